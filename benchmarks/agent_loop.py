"""An agent loop on durable engines: its overhead over the bare calls, and what a
``kill -9`` in the middle of it costs.

    python benchmarks/agent_loop.py [--rounds 5] [--repeats 3] [--crashes 3]
        [--only plait,langgraph,dbos] [--out FILE.json] [--md FILE.md]

The loop (``agent_calls``): ten turns, each a mocked model call (``asyncio.sleep`` of
50 ms, the same function for every engine) and a tool call, both durable: plait's
``await ctx.run(...)`` inside one python step (``plait_agent``), LangGraph's functional
API (``@entrypoint`` + ``@task``, SQLite checkpointer, ``peers/langgraph_agent.py``)
and DBOS (``@DBOS.workflow`` + ``@DBOS.step``, ``peers/dbos_agent.py``).  plait runs in
the project's venv; the peers in ``benchmarks/peers/.venv`` (``peers/run.sh`` makes
it from the pinned ``peers/requirements.txt``).  PostgreSQL rows (plait, DBOS) use a
fresh database on ``PLAIT_TEST_DATABASE_URL`` when it answers.

(a) Overhead: per round, each engine (in a rotated order) gets a fresh process
(``agent_child.py ENGINE overhead``) that opens the engine once, then alternates the
bare loop (the same calls in a plain ``async def``) and a run of the engine's loop
(one warm-up, ``--repeats`` timed).  Overhead of a sample = (run - bare) / bare.

(b), (c) Crash: a process starts a run with the calls log on; once the log shows the
6th model call started (5 model and 5 tool calls completed), the parent SIGKILLs it
and starts a resuming process (``agent_child.py ENGINE resume``).  Reported: the
completed calls made again after the resume (target: none), whether the call in
flight was made again, and the time from the resuming process's start to its first
model call (and from the moment its modules were imported to that call).  The resumed
run must return the loop's expected output.  Interleaved over engines, ``--crashes``
times each.

Targets: overhead under 2 %, no completed call repeated.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from agent_calls import LOG_ENV  # noqa: E402
from journal_cost import load_average, pg_reachable  # noqa: E402

PEERS_PYTHON = HERE / "peers" / ".venv" / "bin" / "python"
CHILD = HERE / "agent_child.py"
KILL_AT = "model-6"  # kill once this call has started: five turns are complete
WAIT_S = 120.0  # a bound on a child, never a claim about speed
OVERHEAD_TARGET = 2.0  # percent


@dataclass(frozen=True)
class Engine:
    label: str
    module: str  # agent_child.py's ENGINE
    store: str  # "sqlite" or "postgresql"
    python: str

    def db(self, tmp: Path, name: str, pg: str | None) -> str:
        """A fresh place for this engine's runs: a SQLite file, or the PostgreSQL URL."""
        if self.store == "postgresql":
            assert pg is not None
            return pg
        path = tmp / f"{self.module}-{name}.db"
        return f"sqlite:///{path}" if self.module == "plait" else str(path)


def engines(only: set[str], pg: bool, peers_python: str) -> list[Engine]:
    found = [Engine("plait (SQLite)", "plait", "sqlite", sys.executable)]
    if pg:
        found.append(Engine("plait (PostgreSQL)", "plait", "postgresql", sys.executable))
    if Path(peers_python).exists():
        found.append(Engine("LangGraph functional API (SQLite checkpointer)", "langgraph",
                            "sqlite", peers_python))
        found.append(Engine("DBOS (SQLite system database)", "dbos", "sqlite",
                            peers_python))
        if pg:
            found.append(Engine("DBOS (PostgreSQL system database)", "dbos", "postgresql",
                                peers_python))
    else:
        print(f"no peers venv at {peers_python} (bash benchmarks/peers/run.sh makes it): "
              f"plait only", file=sys.stderr)
    return [e for e in found if e.module in only]


def child(engine: Engine, *args: str, env: dict[str, str] | None = None) -> Any:
    done = subprocess.run([engine.python, str(CHILD), engine.module, *args],
                          capture_output=True, text=True, timeout=WAIT_S, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{engine.label}: agent_child.py {' '.join(args)} failed:\n"
                         f"{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def pg_databases(server: str | None, names: list[str]) -> Iterator[dict[str, str]]:
    """A fresh PostgreSQL database per name (none without a server)."""
    with contextlib.ExitStack() as stack:
        found: dict[str, str] = {}
        if server:
            from cluster import fresh_database

            for name in names:
                found[name] = stack.enter_context(fresh_database(server, "plait_agentbench"))
        yield found


# ------------------------------------------------------------------ (a) overhead

def overhead(engs: list[Engine], tmp: Path, pg: str | None, rounds: int,
             repeats: int) -> dict[str, dict[str, Any]]:
    samples: dict[str, dict[str, list[float]]] = {
        e.label: {"bare": [], "engine": []} for e in engs}
    with pg_databases(pg, [e.label for e in engs if e.store == "postgresql"]) as dbs:
        for r in range(rounds):
            for engine in engs[r % len(engs):] + engs[:r % len(engs)]:
                got = child(engine, "overhead", "--db",
                            dbs.get(engine.label) or engine.db(tmp, f"loop{r}", pg),
                            "--repeats", str(repeats))
                for key in ("bare", "engine"):
                    samples[engine.label][key] += got[key]
            print(f"overhead round {r + 1}/{rounds}: " + ", ".join(
                f"{label} {statistics.median(percent(s)):.1f} %"
                for label, s in samples.items()), file=sys.stderr)
    return {label: overhead_row(s) for label, s in samples.items()}


def percent(s: dict[str, list[float]]) -> list[float]:
    return [(e - b) / b * 100 for b, e in zip(s["bare"], s["engine"], strict=True)]


def overhead_row(s: dict[str, list[float]]) -> dict[str, Any]:
    pct = percent(s)
    ms = [(e - b) * 1000 for b, e in zip(s["bare"], s["engine"], strict=True)]
    median = statistics.median(pct)
    return {"samples": len(pct), "bare_ms_median": statistics.median(s["bare"]) * 1000,
            "engine_ms_median": statistics.median(s["engine"]) * 1000,
            "overhead_ms_median": statistics.median(ms),
            "overhead_pct_median": median, "overhead_pct_min": min(pct),
            "overhead_pct_max": max(pct), "overhead_pct": pct,
            "met": median < OVERHEAD_TARGET}


# ------------------------------------------------------------------ (b), (c) crash

def read_log(path: Path) -> list[tuple[float, str, str]]:
    if not path.exists():
        return []
    found = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 4:
            found.append((float(parts[0]), parts[1], parts[2]))
    return found


def crash_once(engine: Engine, db: str, log: Path, run_id: str) -> dict[str, Any]:
    env = {**os.environ, LOG_ENV: str(log)}
    proc = subprocess.Popen([engine.python, str(CHILD), engine.module, "start", "--db", db,
                             "--run-id", run_id], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + WAIT_S
    while not any(e == "start" and n == KILL_AT for _, e, n in read_log(log)):
        if proc.poll() is not None:
            raise SystemExit(f"{engine.label}: the run ended before {KILL_AT}: "
                             f"{proc.stderr.read().decode() if proc.stderr else ''}")
        if time.monotonic() > deadline:
            proc.kill()
            raise SystemExit(f"{engine.label}: {KILL_AT} never started")
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=WAIT_S)
    before = read_log(log)
    completed = {n for _, e, n in before if e == "done"}
    in_flight = {n for _, e, n in before if e == "start"} - completed
    resumed_at = time.time()
    child(engine, "resume", "--db", db, "--run-id", run_id, env=env)
    after = read_log(log)[len(before):]
    ready = next(t for t, e, n in after if e == "ready")
    starts = [(t, n) for t, e, n in after if e == "start"]
    first_model = next(t for t, n in starts if n.startswith("model-"))
    again = sorted({n for _, n in starts} & completed)
    return {"completed_before_kill": len(completed), "repeated": again,
            "in_flight": sorted(in_flight),
            "in_flight_made_again": sorted(in_flight & {n for _, n in starts}),
            "to_next_call_s": first_model - resumed_at,
            "imports_s": ready - resumed_at, "after_imports_s": first_model - ready}


def crashes(engs: list[Engine], tmp: Path, pg: str | None,
            count: int) -> dict[str, dict[str, Any]]:
    results: dict[str, list[dict[str, Any]]] = {e.label: [] for e in engs}
    for r in range(count):
        names = [e.label for e in engs if e.store == "postgresql"]
        with pg_databases(pg, names) as dbs:
            for engine in engs[r % len(engs):] + engs[:r % len(engs)]:
                db = dbs.get(engine.label) or engine.db(tmp, f"crash{r}", pg)
                one = crash_once(engine, db, tmp / f"calls-{engine.module}-{r}-"
                                 f"{engine.store}.log", f"agent-crash-{r}")
                results[engine.label].append(one)
                print(f"crash {r + 1}/{count} {engine.label}: repeated {one['repeated']}, "
                      f"next model call {one['to_next_call_s'] * 1000:.0f} ms after the "
                      f"resume started", file=sys.stderr)
    return {label: crash_row(rows) for label, rows in results.items()}


def crash_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def ms(key: str) -> dict[str, float]:
        values = [r[key] * 1000 for r in rows]
        return {"median": statistics.median(values), "min": min(values), "max": max(values)}

    repeated = sum(len(r["repeated"]) for r in rows)
    return {"crashes": len(rows),
            "completed_before_kill": sum(r["completed_before_kill"] for r in rows),
            "repeated": repeated, "repeated_names": [r["repeated"] for r in rows],
            "in_flight_made_again": sum(1 for r in rows if r["in_flight_made_again"]),
            "to_next_call_ms": ms("to_next_call_s"), "imports_ms": ms("imports_s"),
            "after_imports_ms": ms("after_imports_s"), "met": repeated == 0, "runs": rows}


# ------------------------------------------------------------------ report

def markdown(report: dict[str, Any]) -> str:
    lines = [
        "# An agent loop on durable engines",
        "",
        "Generated by `make bench-agents` (`benchmarks/agent_loop.py`); do not edit.",
        "",
        f"- date: {report['date']}",
        f"- machine: {report['machine']}",
        f"- load average before the run (1, 5, 15 min): {report['load_average']}",
        f"- loop: 10 turns of a mocked model call (`asyncio.sleep(0.05)`) and a tool call, "
        f"both durable; bare = the same calls in a plain `async def`; "
        f"{report['rounds']} rounds x {report['repeats']} runs per engine, interleaved",
        f"- crash: SIGKILL once the 6th model call has started (5 turns complete), then a "
        f"new process resumes the run; {report['crashes']} times per engine, interleaved",
        f"- versions: {report['versions']}",
        "",
        "| engine | bare loop (ms) | loop (ms) | overhead (median) | overhead range | "
        "completed calls made again after kill -9 | call in flight made again | "
        "resume process start → next model call (ms) | of which imports (ms) | "
        "targets (< 2 %, none repeated) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, row in report["rows"].items():
        o, c = row["overhead"], row["crash"]
        met = "yes" if o["met"] and c["met"] else "**no**"
        lines.append(
            f"| {label} | {o['bare_ms_median']:.1f} | {o['engine_ms_median']:.1f} | "
            f"{o['overhead_pct_median']:.1f} % ({o['overhead_ms_median']:.1f} ms) | "
            f"{o['overhead_pct_min']:.1f} – {o['overhead_pct_max']:.1f} % | "
            f"{c['repeated']} of {c['completed_before_kill']} | "
            f"{c['in_flight_made_again']} of {c['crashes']} | "
            f"{c['to_next_call_ms']['median']:.0f} ({c['to_next_call_ms']['min']:.0f} – "
            f"{c['to_next_call_ms']['max']:.0f}) | {c['imports_ms']['median']:.0f} | {met} |")
    if report.get("note"):
        lines += ["", report["note"]]
    lines.append("")
    return "\n".join(lines)


def versions(engs: list[Engine]) -> str:
    from importlib.metadata import version

    found = [f"plait {version('plait')}"]
    for module, dist in (("langgraph", "langgraph"), ("dbos", "dbos")):
        python = next((e.python for e in engs if e.module == module), None)
        if python:
            got = subprocess.run([python, "-c", f"from importlib.metadata import version; "
                                  f"print(version({dist!r}))"], capture_output=True,
                                 text=True, timeout=WAIT_S)
            found.append(f"{dist} {got.stdout.strip()}")
    return ", ".join(found)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per process")
    parser.add_argument("--crashes", type=int, default=3)
    parser.add_argument("--only", default="plait,langgraph,dbos")
    parser.add_argument("--peers-python", default=str(PEERS_PYTHON))
    parser.add_argument("--note", default="", help="a line added under the table")
    parser.add_argument("--out", default=None)
    parser.add_argument("--md", default=None)
    args = parser.parse_args()
    pg = os.environ.get("PLAIT_TEST_DATABASE_URL")
    if not (pg and pg_reachable(pg)):
        print("PostgreSQL not reachable (PLAIT_TEST_DATABASE_URL): SQLite only",
              file=sys.stderr)
        pg = None
    engs = engines(set(args.only.split(",")), pg is not None, args.peers_python)
    report: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
                   f"{platform.python_version()}",
        "load_average": load_average(), "rounds": args.rounds, "repeats": args.repeats,
        "crashes": args.crashes, "versions": versions(engs), "note": args.note}
    with tempfile.TemporaryDirectory(prefix="plait-agentbench-") as tmpdir:
        tmp = Path(tmpdir)
        loop = overhead(engs, tmp, pg, args.rounds, args.repeats)
        crash = crashes(engs, tmp, pg, args.crashes)
    report["rows"] = {e.label: {"overhead": loop[e.label], "crash": crash[e.label]}
                      for e in engs}
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    if args.md:
        Path(args.md).write_text(markdown(report))
    else:
        print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
