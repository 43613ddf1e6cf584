"""A cluster of ``plait worker`` processes for the fault tests, driven the way an
operator would: workers started, killed, paused and restarted as processes; runs
submitted with ``plait run --detach --json`` and read back with ``plait show --json``.

Nothing here reaches into a worker: what the tests know of the cluster is the CLI's
answers, the store's history (read through the Store protocol) and the side-effect
ledger the step bodies write (cluster_app/ledger_steps.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

import plaitproc
from plait.store.base import EventRecord
from plait.store.url import open_store

APP = Path(__file__).parent / "cluster_app"
STEPS_MODULE = "ledger_steps"
FINAL = ("completed", "failed", "cancelled")
CLI_TIMEOUT_S = 60


def cli_env(ledger: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PLAIT_DB", "FORCE_COLOR", "NO_COLOR", "COLUMNS")}
    env.update(PYTHONUNBUFFERED="1", PLAIT_LEDGER=str(ledger))
    return env


# ---------------------------------------------------------------- workers


@dataclass
class WorkerProc:
    index: int
    proc: plaitproc.Process
    log: Path
    generation: int

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None


@dataclass
class Cluster:
    """``size`` worker slots, each running one ``plait worker`` process at a time."""

    db: str
    directory: Path
    concurrency: int = 4
    lease: str = "2s"
    poll: str = "0.2s"
    extra: Sequence[str] = ()
    workers: list[WorkerProc] = field(default_factory=list)
    retired: list[WorkerProc] = field(default_factory=list)

    @property
    def ledger(self) -> Path:
        return self.directory / "ledger.txt"

    def start(self, size: int) -> None:
        for index in range(size):
            self.workers.append(self._spawn(index, 0))

    def _spawn(self, index: int, generation: int) -> WorkerProc:
        log = self.directory / f"worker-{index}-{generation}.log"
        args = ("worker", "--db", self.db, "--concurrency", str(self.concurrency),
                "--import", STEPS_MODULE, "--lease", self.lease, "--poll", self.poll,
                *self.extra)
        with log.open("wb") as sink:
            proc = plaitproc.popen(args, cwd=APP, env=cli_env(self.ledger),
                                   stdin=subprocess.DEVNULL, stdout=sink,
                                   stderr=subprocess.STDOUT)
        return WorkerProc(index, proc, log, generation)

    def kill(self, index: int, sig: int = signal.SIGKILL) -> WorkerProc:
        worker = self.workers[index]
        worker.proc.send_signal(sig)
        return worker

    def restart(self, index: int) -> WorkerProc:
        """Kill slot ``index``'s process (SIGKILL) and start a new one in its place."""
        old = self.workers[index]
        if old.alive():
            old.proc.kill()
        old.proc.wait(timeout=10)
        self.retired.append(old)
        self.workers[index] = self._spawn(index, old.generation + 1)
        return self.workers[index]

    def revive_dead(self) -> list[int]:
        """Restart every slot whose process has died; the slots restarted."""
        dead = [w.index for w in self.workers if not w.alive()]
        for index in dead:
            self.restart(index)
        return dead

    def stop(self) -> None:
        for worker in self.workers:
            if worker.alive():
                worker.proc.send_signal(signal.SIGCONT)
                worker.proc.kill()
        for worker in self.workers:
            worker.proc.wait(timeout=10)

    def by_pid(self, pid: int) -> WorkerProc:
        for worker in (*self.workers, *self.retired):
            if worker.pid == pid:
                return worker
        raise LookupError(f"no worker process {pid}")

    def tails(self, lines: int = 15) -> str:
        """The end of every worker's output, for a failure message."""
        parts = []
        for worker in (*self.retired, *self.workers):
            state = "alive" if worker.alive() else f"exit {worker.proc.returncode}"
            text = worker.log.read_text(errors="replace").splitlines()[-lines:]
            if text or worker.alive():
                parts.append(f"--- worker {worker.index}.{worker.generation} pid "
                             f"{worker.pid} ({state}) ---\n" + "\n".join(text))
        return "\n".join(parts)


# ---------------------------------------------------------------- runs through the CLI


def cli(*args: str, ledger: Path, cwd: Path = APP) -> subprocess.CompletedProcess[str]:
    return plaitproc.run(args, cwd=cwd, env=cli_env(ledger), timeout=CLI_TIMEOUT_S)


def submit(db: str, flow: Path, inputs: Iterable[Any], ledger: Path,
           threads: int = 4) -> list[str]:
    """``plait run FLOW --db DB --detach --json --input I`` for each input (a few at a
    time); the run ids, in input order."""
    def one(value: Any) -> str:
        done = cli("run", str(flow), "--db", db, "--detach", "--json", "--input",
                   json.dumps(value), ledger=ledger)
        assert done.returncode == 0, (
            f"plait run --detach exited {done.returncode}\nstdout: {done.stdout}\n"
            f"stderr: {done.stderr}")
        answer = json.loads(done.stdout)
        assert isinstance(answer.get("run_id"), str), done.stdout
        return str(answer["run_id"])

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, list(inputs)))


def show(db: str, run_id: str, ledger: Path) -> dict[str, Any]:
    done = cli("show", run_id, "--db", db, "--json", ledger=ledger)
    assert done.returncode == 0, f"plait show exited {done.returncode}: {done.stderr}"
    value: dict[str, Any] = json.loads(done.stdout)
    return value


def show_all(db: str, run_ids: Sequence[str], ledger: Path) -> dict[str, dict[str, Any]]:
    with ThreadPoolExecutor(4) as pool:
        return dict(zip(run_ids, pool.map(lambda r: show(db, r, ledger), run_ids),
                        strict=True))


def statuses(db: str, run_ids: Sequence[str]) -> dict[str, str]:
    """The runs' stored statuses, read straight from the database (a cheap poll; what
    the tests assert on comes from ``plait show``)."""
    with psycopg.connect(db, connect_timeout=5) as conn:
        rows = conn.execute("SELECT run_id, status FROM runs WHERE run_id = ANY(%s)",
                            (list(run_ids),)).fetchall()
    return {str(r[0]): str(r[1]) for r in rows}


def wait_final(db: str, run_ids: Sequence[str], timeout: float,
               between: Callable[[], object] | None = None,
               describe: Callable[[], str] = lambda: "") -> dict[str, str]:
    """Poll until every run is final; ``between`` is called on every turn (the chaos).
    Fails, naming the runs left and the workers' output, after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    found: dict[str, str] = {}
    while time.monotonic() < deadline:
        try:
            found = statuses(db, run_ids)
        except psycopg.OperationalError:
            found = {}  # the server is restarting
        if len(found) == len(run_ids) and all(s in FINAL for s in found.values()):
            return found
        if between is not None:
            between()
        time.sleep(0.25)
    left = {r: found.get(r, "?") for r in run_ids if found.get(r) not in FINAL}
    raise AssertionError(f"{len(left)} of {len(run_ids)} runs not final after "
                         f"{timeout:g}s: {dict(list(left.items())[:8])}\n{describe()}")


# ---------------------------------------------------------------- the store's history


def events(db: str, run_id: str) -> list[EventRecord]:
    async def read() -> list[EventRecord]:
        store = open_store(db, read_only=True)
        await store.open()
        try:
            return await store.get_events(run_id)
        finally:
            await store.close()

    return asyncio.run(read())


def run_owner(db: str, run_id: str) -> str | None:
    """The process holding the run's driver lease (``host:pid``), if any."""
    async def read() -> str | None:
        store = open_store(db, read_only=True)
        await store.open()
        try:
            return (await store.get_run(run_id)).owner
        finally:
            await store.close()

    return asyncio.run(read())


def leftovers(db: str, run_ids: Sequence[str]) -> dict[str, list[str]]:
    """Tickets and inbox outcomes still stored for the runs (a finished run has none:
    every attempt it started was applied or withdrawn)."""
    async def read() -> dict[str, list[str]]:
        store = open_store(db, read_only=True)
        await store.open()
        try:
            found: dict[str, list[str]] = {}
            for run_id in run_ids:
                left = [f"ticket {t.ticket.key}" for t in await store.tickets(run_id)]
                left += [f"outcome {o.key} {o.kind}" for o in await store.outcomes(run_id)]
                if left:
                    found[run_id] = left
            return found
        finally:
            await store.close()

    return asyncio.run(read())


def completions(history: Sequence[EventRecord]) -> Counter[str]:
    """How many times the history records each step moving to ``completed``."""
    return Counter(e.step_id or "" for e in history
                   if e.kind == "step" and e.data.get("to") == "completed")


def notes(history: Sequence[EventRecord], key: str) -> list[Any]:
    return [e.data[key] for e in history if e.kind == "note" and key in e.data]


# ---------------------------------------------------------------- the ledger


@dataclass(frozen=True)
class Entry:
    run: str
    step: str
    attempt: int
    pid: int
    event: str
    at: float


def read_ledger(path: Path) -> list[Entry]:
    if not path.exists():
        return []
    entries = []
    for line in path.read_text().splitlines():
        run, step, attempt, pid, event, at = line.split()
        entries.append(Entry(run, step, int(attempt), int(pid), event, float(at)))
    return entries


def bodies(entries: Iterable[Entry]) -> dict[tuple[str, str, int, int], list[Entry]]:
    """Ledger lines by body: (run, step, attempt, pid)."""
    found: dict[tuple[str, str, int, int], list[Entry]] = defaultdict(list)
    for e in entries:
        found[(e.run, e.step, e.attempt, e.pid)].append(e)
    return found


def intervals(entries: Iterable[Entry],
              keep: Callable[[Entry], bool]) -> list[tuple[float, float]]:
    """(start, end) of every body that ended and passes ``keep``."""
    spans = []
    for lines in bodies(e for e in entries if keep(e)).values():
        start = [e.at for e in lines if e.event == "start"]
        end = [e.at for e in lines if e.event == "end"]
        if start and end:
            spans.append((min(start), max(end)))
    return spans


def max_overlap(spans: Iterable[tuple[float, float]]) -> int:
    """The most spans open at one instant (an end before a start at the same time)."""
    points = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans],
                    key=lambda p: (p[0], p[1]))
    most = now = 0
    for _, delta in points:
        now += delta
        most = max(most, now)
    return most
