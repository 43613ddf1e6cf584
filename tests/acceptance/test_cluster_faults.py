"""Proof under faults: ``plait worker`` processes on a real PostgreSQL, killed with
SIGKILL at random, paused past their lease, cut off by a server restart, and killed by
their own steps; every run still ends, with the right output, and the store's history
agrees with what the step bodies did (a ledger they append to; see
cluster_app/ledger_steps.py and cluster_harness.py).

``make soak`` runs the kill -9 test for longer (``PLAIT_SOAK_SECONDS``).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cluster_harness import (
    APP,
    Cluster,
    Entry,
    bodies,
    cli_env,
    completions,
    events,
    intervals,
    leftovers,
    max_overlap,
    notes,
    read_ledger,
    run_owner,
    show,
    show_all,
    submit,
    wait_final,
)

import pgutil

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

SOAK_S = float(os.environ.get("PLAIT_SOAK_SECONDS", "0") or 0)
# kill -9 chaos submits waves for SOAK_S, waits up to 120 + SOAK_S for them to end, then
# reads every run back (over 200 s in all on a loaded 2-core machine at SOAK_S = 0)
pytestmark.append(pytest.mark.timeout(600 + 2 * SOAK_S))
MIN_KILLS = 3  # workers SIGKILLed at least, or the chaos test tested nothing
MAX_BATCHES = 8  # batches of RUNS runs submitted at most to reach MIN_KILLS
RUNS = max(25, int(os.environ.get("PLAIT_CHAOS_RUNS", "25")) // 5 * 5)
WIDTH = 6  # branches of the fan-out; 3 * WIDTH + 7 steps in all


# ---------------------------------------------------------------- the workflows


def chaos_flow(pause: float = 0.005) -> dict[str, Any]:
    """root -> WIDTH branches of three chained steps -> join -> four -> end.  Chained
    steps also get their parent's value through a template (``via``)."""
    retry = {"max_retries": 20, "initial_delay": "20ms", "backoff": 1.5,
             "max_delay": "200ms", "jitter": 0.1}
    steps: list[dict[str, Any]] = [
        {"id": "root", "type": "python", "call": "ledger_steps:node",
         "with": {"add": "{{ input.seed }}"}}]
    for i in range(WIDTH):
        for level, parent in (("a", "root"), ("b", f"a{i}"), ("c", f"b{i}")):
            steps.append({"id": f"{level}{i}", "type": "python", "call": "ledger_steps:node",
                          "depends_on": [parent],
                          "with": {"add": 10 * i + ord(level),
                                   "via": f"{{{{ steps.{parent}.output.v }}}}"}})
    steps.append({"id": "join", "type": "python", "call": "ledger_steps:node",
                  "depends_on": [f"c{i}" for i in range(WIDTH)], "with": {"add": 1}})
    for j in range(4):
        steps.append({"id": f"d{j}", "type": "python", "call": "ledger_steps:node",
                      "depends_on": ["join"], "with": {"add": j}})
    steps.append({"id": "end", "type": "python", "call": "ledger_steps:node",
                  "depends_on": [f"d{j}" for j in range(4)], "with": {"add": 0}})
    for step in steps:
        step["with"]["pause"] = pause
    return {"name": "chaos", "defaults": {"retry": retry},
            "output": "{{ steps.end.output }}", "steps": steps}


def expected_outputs(seed: int) -> dict[str, dict[str, Any]]:
    """Every step's output for ``seed``, computed here the way ``node`` computes it."""
    out: dict[str, dict[str, Any]] = {"root": {"v": seed, "via": None}}
    for i in range(WIDTH):
        for level, parent in (("a", "root"), ("b", f"a{i}"), ("c", f"b{i}")):
            v = out[parent]["v"]
            out[f"{level}{i}"] = {"v": 10 * i + ord(level) + v, "via": v}
    out["join"] = {"v": 1 + sum(out[f"c{i}"]["v"] for i in range(WIDTH)), "via": None}
    for j in range(4):
        out[f"d{j}"] = {"v": j + out["join"]["v"], "via": None}
    out["end"] = {"v": sum(out[f"d{j}"]["v"] for j in range(4)), "via": None}
    return out


def write_flow(directory: Path, flow: dict[str, Any]) -> Path:
    path = directory / f"{flow['name']}.json"
    path.write_text(json.dumps(flow, indent=1))
    return path


@pytest.fixture
def cluster(pg_database: str, tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(db=pg_database, directory=tmp_path)
    try:
        yield made
    finally:
        made.stop()


def diagnose(cluster: Cluster) -> str:
    return f"\nworkers:\n{cluster.tails()}"


# ---------------------------------------------------------------- 1. kill -9 chaos


def test_kill9_chaos_loses_and_doubles_nothing(cluster: Cluster) -> None:
    """Four workers, one SIGKILLed every 2 s (and started again) from the first
    submission until every run has ended: every run completes with the right output,
    every step's body ended at least once, no body ran more often than its step's
    recorded attempts, and the history records each step completed exactly once."""
    flow = write_flow(cluster.directory, chaos_flow(pause=0.04))
    cluster.start(4)
    chaos = Chaos(cluster, every=2.0)
    seeds: dict[str, int] = {}
    started = time.monotonic()
    chaos.start()
    try:
        batch = 0
        # at least one batch, and more until MIN_KILLS workers were killed: started
        # in a flash (tests/plaitproc.py), workers can finish a batch between two kills
        while batch == 0 or time.monotonic() - started < SOAK_S or (
                len(chaos.kills) < MIN_KILLS and batch < MAX_BATCHES):
            # in waves, so the kills land while runs are being submitted too
            for wave in range(RUNS // 5):
                inputs = [{"seed": 1000 * batch + 5 * wave + n} for n in range(5)]
                ids = submit(cluster.db, flow, inputs, cluster.ledger)
                seeds.update({r: v["seed"] for r, v in zip(ids, inputs, strict=True)})
            wait_final(cluster.db, list(seeds), timeout=120 + SOAK_S,
                       describe=lambda: chaos.describe() + diagnose(cluster))
            batch += 1
    finally:
        chaos.stop()
    assert len(chaos.kills) >= MIN_KILLS, \
        f"only {len(chaos.kills)} kills in {batch} batches: no chaos to speak of"

    shown = show_all(cluster.db, list(seeds), cluster.ledger)
    ledger = read_ledger(cluster.ledger)
    _assert_runs_correct(shown, seeds, cluster)
    _assert_ledger_agrees(shown, ledger, cluster)
    for run_id in seeds:
        twice = {s: n for s, n in completions(events(cluster.db, run_id)).items() if n != 1}
        assert not twice, f"run {run_id}: steps not completed exactly once: {twice}"
    left = leftovers(cluster.db, list(seeds))
    assert not left, f"finished runs left work stored: {left}"
    interrupted = [(r, a["step"], a["attempt"]) for r, run in shown.items()
                   for a in run["attempts"] if a["status"] != "completed"]
    assert interrupted, f"{len(chaos.kills)} kills interrupted no attempt: nothing tested"
    print(f"\n{len(seeds)} runs of {len(chaos_flow()['steps'])} steps, {len(ledger)} "
          f"ledger lines, {len(chaos.kills)} kills, {len(interrupted)} attempts "
          f"interrupted, {time.monotonic() - started:.1f}s")


# A body on this attempt or a later one is never aimed at (Chaos): the kills that aim
# interrupt one step at most CHASED - 1 times, far below its max_retries of 20.
CHASED = 5


class Chaos:
    """A thread SIGKILLing a random worker every ``every`` seconds (one in the middle
    of a step's body when there is one) and starting a new process in its place, until
    stopped.

    Aiming at bodies alone chases one step: the run's next driver takes the run over
    about a lease (2 s, the kill period) after the kill and restarts the step's attempt
    at once, in its own process, so the restarted body lands in the killer's next look,
    and often in the one after.  A lone run's step lost 9 attempts in a row so, and a
    step that loses 21 has spent its ``max_retries: 20`` and fails, as it should (each
    attempt interrupted, each counted once): the run ended ``failed`` and the test with
    it.  So a body on attempt ``CHASED`` or later is spared (``aim``): its worker is not
    aimed at, nor picked at random while that body runs."""

    def __init__(self, cluster: Cluster, every: float, seed: int = 11) -> None:
        self.cluster = cluster
        self.every = every
        self.rng = random.Random(seed)
        self.kills: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def describe(self) -> str:
        return f"\n{len(self.kills)} workers killed: pids {self.kills}"

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            busy, spared = self._aim_soon()
            victims = busy or [w.index for w in self.cluster.workers
                               if w.index not in spared]
            if not victims:
                continue
            victim = self.rng.choice(victims)
            self.kills.append(self.cluster.workers[victim].pid)
            self.cluster.restart(victim)

    def _aim_soon(self, within: float = 1.0) -> tuple[list[int], set[int]]:
        """``aim`` of the workers now, looked at again for up to ``within`` seconds
        while no slot is busy: on a loaded machine the bodies are short beside the
        commits around them, and a kill that lands between bodies interrupts nothing."""
        deadline = time.monotonic() + within
        while True:
            busy, spared = aim(read_ledger(self.cluster.ledger),
                               [w.pid for w in self.cluster.workers])
            if busy or time.monotonic() >= deadline or self._stop.is_set():
                return busy, spared
            time.sleep(0.01)


def aim(ledger: list[Entry], pids: list[int]) -> tuple[list[int], set[int]]:
    """(the busy slots: their process is in the middle of a body, a start without its
    end in the ledger, so killing it interrupts an attempt for sure; the spared slots:
    one of their bodies is on attempt ``CHASED`` or later).  ``pids``: by slot."""
    open_bodies = [key for key, lines in bodies(ledger).items()
                   if all(e.event == "start" for e in lines)]
    spared_pids = {pid for _, _, attempt, pid in open_bodies if attempt >= CHASED}
    busy_pids = {pid for *_, pid in open_bodies} - spared_pids
    return ([slot for slot, pid in enumerate(pids) if pid in busy_pids],
            {slot for slot, pid in enumerate(pids) if pid in spared_pids})


def _assert_runs_correct(shown: dict[str, dict[str, Any]], seeds: dict[str, int],
                         cluster: Cluster) -> None:
    for run_id, run in shown.items():
        want = expected_outputs(seeds[run_id])
        assert run["status"] == "completed", (
            f"run {run_id} ended {run['status']}: {run['error']}\n"
            + json.dumps({s: v["error"] for s, v in run["steps"].items() if v["error"]},
                         indent=1) + _failed_history(run) + diagnose(cluster))
        assert run["output"] == want["end"], f"run {run_id}: output {run['output']}"
        wrong = {s: (v["output"], want[s]) for s, v in run["steps"].items()
                 if v["output"] != want[s]}
        assert not wrong, f"run {run_id}: wrong step outputs (got, want): {wrong}"


def _failed_history(run: dict[str, Any]) -> str:
    """Each step that did not complete: its attempts counted, and its attempts as the
    history lists them (number, status, worker, times, error)."""
    lines = []
    for step_id, step in run["steps"].items():
        if step["status"] in ("completed", "upstream_failed"):
            continue
        lines.append(f"\nstep {step_id}: {step['status']}, {step['attempts']} attempts:")
        lines += [f"  #{a['attempt']}{' (fallback)' if a['fallback'] else ''} "
                  f"{a['status']} by {a['worker']} {a['started_at']} -> "
                  f"{a['finished_at']}: {a['error']}"
                  for a in run["attempts"] if a["step"] == step_id]
    return "\n".join(lines)


def _assert_ledger_agrees(shown: dict[str, dict[str, Any]], ledger: list[Entry],
                          cluster: Cluster) -> None:
    by_step: dict[tuple[str, str], list[Entry]] = defaultdict(list)
    for entry in ledger:
        by_step[(entry.run, entry.step)].append(entry)
    for run_id, run in shown.items():
        for step_id, step in run["steps"].items():
            lines = by_step.get((run_id, step_id), [])
            where = f"run {run_id} step {step_id}"
            assert any(e.event == "end" for e in lines), (
                f"{where}: completed, but no body of it ever ended: {lines}")
            starts = Counter(e.attempt for e in lines if e.event == "start")
            assert sum(starts.values()) <= step["attempts"], (
                f"{where}: {sum(starts.values())} bodies started, {step['attempts']} "
                f"attempts recorded: {lines}")
            again = {a: n for a, n in starts.items() if n > 1 or a > step["attempts"]}
            assert not again, f"{where}: attempts run twice or beyond the count: {again}"
            recorded = [a for a in run["attempts"] if a["step"] == step_id]
            assert len(recorded) == step["attempts"], (
                f"{where}: {step['attempts']} attempts counted, history lists {recorded}")
            assert [a["status"] for a in recorded].count("completed") == 1, (
                f"{where}: attempts {recorded}")
    ran = {(e.run, e.step) for e in ledger}
    unknown = {key for key in ran if key[0] not in shown}
    assert not unknown, f"bodies ran for runs never submitted: {unknown}{diagnose(cluster)}"


# ---------------------------------------------------------------- 2. SIGSTOP past the lease


def test_sigstop_past_lease_discards_late_result(cluster: Cluster) -> None:
    """A worker paused (SIGSTOP) in the middle of a step, past its lease: the attempt is
    reaped and run again by another worker; the paused worker, continued, finds its
    result discarded and noted in the history under its name; the retry's result
    stands and the run completes."""
    flow = write_flow(cluster.directory, {
        "name": "pause", "output": "{{ steps.nap.output }}",
        "steps": [{"id": "nap", "type": "python", "call": "ledger_steps:nap",
                   "with": {"seconds": 4},
                   "retry": {"max_retries": 2, "initial_delay": "50ms"}}]})
    cluster.start(2)
    [run_id] = submit(cluster.db, flow, [{}], cluster.ledger)
    first = _wait_for_line(cluster, lambda e: e.run == run_id and e.attempt == 1
                           and e.event == "start")
    paused = cluster.by_pid(first.pid)
    paused.proc.send_signal(signal.SIGSTOP)
    try:
        wait_final(cluster.db, [run_id], timeout=30, describe=lambda: diagnose(cluster))
    finally:
        paused.proc.send_signal(signal.SIGCONT)
    shown = show(cluster.db, run_id, cluster.ledger)
    assert shown["status"] == "completed", f"{shown}{diagnose(cluster)}"
    assert shown["output"]["attempt"] >= 2, shown["output"]
    assert shown["output"]["pid"] != paused.pid, "the paused worker's result stood"
    assert shown["steps"]["nap"]["attempts"] >= 2

    # the paused worker, continued, finishes its body and tries to complete it
    late = _wait_for_notes(cluster, run_id)
    assert any(n["step"] == "nap" and n["attempt"] == 1
               and str(paused.pid) in str(n["worker"]) for n in late), (
        f"no late_result_discarded note names worker pid {paused.pid}: {late}"
        f"{diagnose(cluster)}")
    after = show(cluster.db, run_id, cluster.ledger)
    assert after["output"] == shown["output"], "the late result replaced the retry's"
    assert after["steps"]["nap"]["attempts"] == shown["steps"]["nap"]["attempts"]
    first_attempt = [a for a in after["attempts"] if a["step"] == "nap"][0]
    assert first_attempt["status"] != "completed", after["attempts"]
    assert paused.alive(), f"the paused worker died{diagnose(cluster)}"


def _wait_for_line(cluster: Cluster, match: Any, timeout: float = 20) -> Entry:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for entry in read_ledger(cluster.ledger):
            if match(entry):
                return entry
        time.sleep(0.05)
    raise AssertionError(f"no matching ledger line after {timeout}s{diagnose(cluster)}")


def _wait_for_notes(cluster: Cluster, run_id: str, timeout: float = 15) -> list[Any]:
    deadline = time.monotonic() + timeout
    found: list[Any] = []
    while time.monotonic() < deadline:
        found = notes(events(cluster.db, run_id), "late_result_discarded")
        if found:
            return found
        time.sleep(0.2)
    return found


def test_driver_paused_past_its_lease_is_fenced(cluster: Cluster) -> None:
    """The worker driving a run is paused (SIGSTOP) while the run's steps are out;
    another worker takes the run over and finishes it.  Continued, the old driver
    writes nothing more to the run (its batches are refused: the outcomes they would
    apply are gone), and it lives on."""
    flow = write_flow(cluster.directory, chaos_flow(pause=0.1) | {"name": "driven"})
    cluster.start(3)
    [run_id] = submit(cluster.db, flow, [{"seed": 5}], cluster.ledger)
    _wait_for_line(cluster, lambda e: e.run == run_id and e.step.startswith("a"))
    owner = run_owner(cluster.db, run_id)
    assert owner is not None, "a run with steps out has no driver"
    driver = cluster.by_pid(int(owner.rpartition(":")[2]))
    driver.proc.send_signal(signal.SIGSTOP)
    try:
        wait_final(cluster.db, [run_id], timeout=40, describe=lambda: diagnose(cluster))
        before = events(cluster.db, run_id)
    finally:
        driver.proc.send_signal(signal.SIGCONT)
    time.sleep(3.0)  # the old driver wakes up, heartbeats, tries its writes
    after = events(cluster.db, run_id)
    written = [e for e in after[len(before):] if e.kind != "note"]
    assert not written, f"the paused driver wrote after the takeover: {written}"
    shown = show(cluster.db, run_id, cluster.ledger)
    _assert_runs_correct({run_id: shown}, {run_id: 5}, cluster)
    _assert_ledger_agrees({run_id: shown}, read_ledger(cluster.ledger), cluster)
    assert not {s: n for s, n in completions(after).items() if n != 1}
    assert driver.alive(), f"the paused driver died{diagnose(cluster)}"


def test_in_process_run_killed_is_finished_by_workers(cluster: Cluster) -> None:
    """``wf.run(db=postgresql://...)`` executes in the calling process; SIGKILLed in the
    middle, its run is taken over by the workers and completes with the right output;
    what it had completed is not run again, what it was running retries."""
    flow = write_flow(cluster.directory, chaos_flow(pause=0.3) | {"name": "local"})
    script = cluster.directory / "local_run.py"
    script.write_text(
        "import json, sys\n"
        f"sys.path.insert(0, {str(APP)!r})\n"
        "from plait import Workflow\n"
        f"Workflow.load({str(flow)!r}).run({{'seed': 9}}, db={cluster.db!r})\n")
    cluster.start(2)
    local = subprocess.Popen([sys.executable, str(script)], cwd=cluster.directory,
                             env=cli_env(cluster.ledger), stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    try:
        # any step this process completed (under load the workers may run the b steps)
        first = _wait_for_line(cluster, lambda e: e.event == "end" and e.pid == local.pid,
                               timeout=40)
        # a body's ledger line comes before its completion's commit: kill once the store
        # holds a completion of the process (else, under load, it completed nothing)
        # (read in this process: a `plait show` per poll took so long under load that
        # the whole run had ended in the calling process, leaving the workers nothing)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not completions(events(cluster.db, first.run)):
            time.sleep(0.01)
    except AssertionError as exc:
        failed: AssertionError | None = exc
    else:
        failed = None
    finally:
        local.kill()
        _, err = local.communicate(timeout=10)  # reaps it and closes its stderr pipe
    if failed is not None:  # what the killed process said explains it
        raise AssertionError(f"{failed}\nthe in-process run's stderr:\n{err.decode()}")
    run_id = first.run
    wait_final(cluster.db, [run_id], timeout=40, describe=lambda: diagnose(cluster))
    shown = show(cluster.db, run_id, cluster.ledger)
    _assert_runs_correct({run_id: shown}, {run_id: 9}, cluster)
    ledger = read_ledger(cluster.ledger)
    _assert_ledger_agrees({run_id: shown}, ledger, cluster)
    assert not {s: n for s, n in completions(events(cluster.db, run_id)).items() if n != 1}
    done_locally = {a["step"] for a in shown["attempts"] if a["status"] == "completed"
                    and str(a["worker"]).endswith(f":{local.pid}")}
    assert done_locally, f"the killed process completed nothing: {shown['attempts']}"
    again = {e.step for e in ledger if e.step in done_locally and e.pid != local.pid}
    assert not again, f"steps the killed process completed ran again: {again}"
    workers = {w.pid for w in cluster.workers}
    assert any(e.pid in workers for e in ledger), "the workers ran nothing: no takeover"
    assert all(e.pid in workers | {local.pid} for e in ledger)


# ---------------------------------------------------------------- 3. PostgreSQL restarted


@pytest.fixture
def private_server() -> Iterator[pgutil.PrivateServer]:
    server = pgutil.PrivateServer.make()
    try:
        server.start()
        with psycopg.connect(server.url(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE plait")
        yield server
    finally:
        server.remove()


def test_postgres_restart_mid_run(private_server: pgutil.PrivateServer,
                                  tmp_path: Path) -> None:
    """The database server restarts (twice: a fast restart, then an immediate stop
    and 3 s down, past every lease) while runs are in the middle of their steps;
    workers reconnect and every run completes with the right output."""
    flow = chaos_flow(pause=0.05) | {"name": "restart"}
    path = write_flow(tmp_path, flow)
    cluster = Cluster(db=private_server.url("plait"), directory=tmp_path)
    try:
        cluster.start(3)
        seeds = {n: n for n in range(6)}
        ids = submit(cluster.db, path, [{"seed": s} for s in seeds], cluster.ledger)
        _wait_for_line(cluster, lambda e: e.step.startswith("b"))
        private_server.restart("fast")
        _wait_for_line(cluster, lambda e: e.step == "join")
        private_server.stop("immediate")  # as a crash: and down for longer than a lease
        time.sleep(3.0)
        private_server.start()
        wait_final(cluster.db, ids, timeout=60, describe=lambda: diagnose(cluster))
        dead = [w for w in cluster.workers if not w.alive()]
        assert not dead, f"workers died with the server{diagnose(cluster)}"
        shown = show_all(cluster.db, ids, cluster.ledger)
        _assert_runs_correct(shown, dict(zip(ids, seeds.values(), strict=True)), cluster)
        for run_id in ids:
            twice = {s: n for s, n in completions(events(cluster.db, run_id)).items()
                     if n != 1}
            assert not twice, f"run {run_id}: steps not completed exactly once: {twice}"
        left = leftovers(cluster.db, ids)
        assert not left, f"finished runs left work stored: {left}"
    finally:
        cluster.stop()


# ---------------------------------------------------------------- 4. lost NOTIFY


def test_workers_that_hear_no_notify_complete_runs_by_polling(pg_database: str,
                                                               tmp_path: Path) -> None:
    """Workers that never hear a notification (``--no-listen``: every NOTIFY is lost
    to them) still claim every step and apply every outcome, by polling
    (``--no-eager``: every step is a ticket, every outcome goes through the inbox)."""
    cluster = Cluster(db=pg_database, directory=tmp_path,
                      extra=("--no-listen", "--no-eager"))
    flow = write_flow(tmp_path, chaos_flow() | {"name": "deaf"})
    try:
        cluster.start(2)
        ids = submit(cluster.db, flow, [{"seed": s} for s in range(3)], cluster.ledger)
        wait_final(cluster.db, ids, timeout=60, describe=lambda: diagnose(cluster))
        shown = show_all(cluster.db, ids, cluster.ledger)
        _assert_runs_correct(shown, dict(zip(ids, range(3), strict=True)), cluster)
        assert {e.pid for e in read_ledger(cluster.ledger)} <= {w.pid for w in
                                                                 cluster.workers}
    finally:
        cluster.stop()


# ---------------------------------------------------------------- 5. a step that kills


def test_step_that_kills_its_worker_fails_the_run(cluster: Cluster) -> None:
    """A body that SIGKILLs its own worker every time: its attempts are reaped one by
    one, the step fails naming the lost lease, and the run ends ``failed`` instead of
    staying ``running``; the other branch completes."""
    flow = write_flow(cluster.directory, {
        "name": "doomed",
        "steps": [
            {"id": "doom", "type": "python", "call": "ledger_steps:doom",
             "retry": {"max_retries": 1, "initial_delay": "50ms"}},
            {"id": "fine", "type": "python", "call": "ledger_steps:node",
             "with": {"add": 7}}]})
    cluster.start(2)
    [run_id] = submit(cluster.db, flow, [{}], cluster.ledger)
    wait_final(cluster.db, [run_id], timeout=40, between=cluster.revive_dead,
               describe=lambda: diagnose(cluster))
    shown = show(cluster.db, run_id, cluster.ledger)
    doom = shown["steps"]["doom"]
    assert shown["status"] == "failed", f"{shown}{diagnose(cluster)}"
    assert doom["status"] == "failed"
    assert doom["attempts"] == 2, doom
    assert "lease" in (doom["error"] or "").lower(), doom["error"]
    assert shown["steps"]["fine"]["status"] == "completed"
    starts = [e for e in read_ledger(cluster.ledger) if e.step == "doom"]
    assert sorted(e.attempt for e in starts) == [1, 2], starts
    assert len({e.pid for e in starts}) == 2, "one process ran doom twice and lived"
    assert len(cluster.retired) >= 2, f"the workers did not die{diagnose(cluster)}"


# ---------------------------------------------------------------- bounds across workers


def test_pool_and_run_concurrency_hold_across_four_workers(cluster: Cluster) -> None:
    """Pool ``slow`` (concurrency 2) and each run's ``concurrency: 3`` are never exceeded
    across four workers, judged from the bodies' own start and end times."""
    steps = [{"id": f"p{i}", "type": "python", "call": "ledger_steps:busy",
              "pool": "slow", "with": {"seconds": 0.15}} for i in range(6)]
    steps += [{"id": f"q{i}", "type": "python", "call": "ledger_steps:busy",
               "with": {"seconds": 0.15}} for i in range(6)]
    flow = write_flow(cluster.directory, {"name": "bounded", "concurrency": 3,
                                          "pools": {"slow": {"concurrency": 2}},
                                          "steps": steps})
    cluster.start(4)
    ids = submit(cluster.db, flow, [{}] * 4, cluster.ledger)
    wait_final(cluster.db, ids, timeout=60, describe=lambda: diagnose(cluster))
    shown = show_all(cluster.db, ids, cluster.ledger)
    assert all(r["status"] == "completed" for r in shown.values()), diagnose(cluster)
    ledger = read_ledger(cluster.ledger)
    assert len(bodies(ledger)) == 12 * len(ids)
    pool = max_overlap(intervals(ledger, lambda e: e.step.startswith("p")))
    assert pool <= 2, f"pool slow had {pool} bodies running at once (limit 2)"
    per_run = {r: max_overlap(intervals(ledger, _of_run(r))) for r in ids}
    assert all(n <= 3 for n in per_run.values()), f"run concurrency 3 exceeded: {per_run}"
    workers = {e.pid for e in ledger}
    assert len(workers) >= 2, "one worker ran everything: the bound was not tested"
    assert pool == 2, f"the pool never ran two at once ({pool}): nothing was bounded"


def _of_run(run_id: str) -> Callable[[Entry], bool]:
    return lambda entry: entry.run == run_id


def test_runs_per_key_hold_across_four_workers(cluster: Cluster) -> None:
    """``max_runs_per_key: 1``: across four workers, two runs of one customer never
    have bodies running in the same stretch of time, while other customers' runs do."""
    flow = write_flow(cluster.directory, {
        "name": "keyed", "concurrency_key": "{{ input.customer }}", "max_runs_per_key": 1,
        "steps": [{"id": "k1", "type": "python", "call": "ledger_steps:busy",
                   "with": {"seconds": 0.2}},
                  {"id": "k2", "type": "python", "call": "ledger_steps:busy",
                   "depends_on": ["k1"], "with": {"seconds": 0.2}}]})
    cluster.start(4)
    inputs = [{"customer": c} for c in ("acme", "umbrella") for _ in range(3)]
    ids = submit(cluster.db, flow, inputs, cluster.ledger)
    wait_final(cluster.db, ids, timeout=60, describe=lambda: diagnose(cluster))
    ledger = read_ledger(cluster.ledger)
    spans = {r: _run_span(ledger, r) for r in ids}
    for customer in ("acme", "umbrella"):
        mine = [spans[r] for r, value in zip(ids, inputs, strict=True)
                if value["customer"] == customer]
        assert max_overlap(mine) <= 1, f"{customer}: runs overlapped: {sorted(mine)}"
    assert max_overlap(spans.values()) >= 2, "no two runs ever ran at once"


def _run_span(ledger: list[Entry], run_id: str) -> tuple[float, float]:
    times = [e.at for e in ledger if e.run == run_id]
    assert times, f"run {run_id}: no body ran"
    return min(times), max(times)
