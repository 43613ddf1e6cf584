"""Steps per second of durable runs on the SQLite store (issue 4: >= 5,000 steps/s with
synchronous=NORMAL, >= 1,000 with FULL, for fan-out 1->1000->1 and chain-1000).

    .venv/bin/python benchmarks/sqlite_speed.py [--repeat 5] [--dir /tmp]

Steps are real (they read their parents' outputs from ``ctx.outputs`` and return a JSON
object, as in ``make bench``).  For each workload and mode: a fresh database, one run
through ``Workflow.run_async``
with ``db="sqlite:///..."``; prints the best steps/s of the repeats and the share of
the wall time spent inside ``SqliteStore.write`` (awaited by the run loop, so it is the
store's part of the per-step cost).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from plait import StepContext, Workflow
from plait.core.model import Limits
from plait.store.sqlite import SqliteStore
from plait.store.sqlite_database import SqliteDatabase as _Database


async def noop(ctx: StepContext) -> dict[str, object]:
    """The benchmarks' step body (workloads.step_value): parents' outputs in, JSON out."""
    return {"step": ctx.step_id, "n": 1 + sum(o["n"] for o in ctx.outputs.values())}


def chain(n: int) -> Workflow:
    wf = Workflow(f"chain-{n}", concurrency=16, limits=Limits(max_depth=max(1000, n + 1)))
    for i in range(n):
        wf.add_step(f"s{i}", noop, depends_on=[f"s{i - 1}"] if i else [])
    return wf


def fanout(n: int) -> Workflow:
    wf = Workflow(f"fanout-{n}", concurrency=max(16, n + 2))
    wf.add_step("src", noop)
    for i in range(n):
        wf.add_step(f"m{i}", noop, depends_on=["src"])
    wf.add_step("sink", noop, depends_on=[f"m{i}" for i in range(n)])
    return wf


class Timer:
    """Wraps SqliteStore.write to add up the time runs spend awaiting it, and the
    database thread's job to add up the time spent in SQLite (the rest of an awaited
    write is the hop between the event loop and the store's thread)."""

    def __init__(self) -> None:
        self.spent = 0.0
        self.inside = 0.0
        self.calls = 0
        self._write = SqliteStore.write
        self._job = _Database.write

    def __enter__(self) -> Timer:
        original, job = self._write, self._job
        timer = self

        async def timed(store: SqliteStore, batch: object) -> None:
            start = time.perf_counter()
            try:
                await original(store, batch)  # type: ignore[arg-type]
            finally:
                timer.spent += time.perf_counter() - start
                timer.calls += 1

        def timed_job(db: _Database, batch: object) -> None:
            start = time.perf_counter()
            try:
                job(db, batch)  # type: ignore[arg-type]
            finally:
                timer.inside += time.perf_counter() - start

        SqliteStore.write = timed  # type: ignore[method-assign]
        _Database.write = timed_job  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        SqliteStore.write = self._write  # type: ignore[method-assign]
        _Database.write = self._job  # type: ignore[method-assign]


async def measure(wf: Workflow, steps: int,
                  url: str) -> tuple[float, float, float, float, int]:
    with Timer() as timer:
        start, cpu = time.perf_counter(), time.process_time()
        result = await wf.run_async({}, db=url)
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert result.status == "completed", result.status
    return (steps / elapsed, timer.spent / elapsed, timer.inside / elapsed,
            cpu / steps, timer.calls)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    workloads = {f"fanout 1->{args.n}->1": (fanout(args.n), args.n + 2),
                 f"chain-{args.n}": (chain(args.n), args.n)}
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for mode in ("NORMAL", "FULL"):
            for name, (wf, steps) in workloads.items():
                rates, shares, insides, cpus = [], [], [], []
                for k in range(args.repeat):
                    path = Path(tmp).resolve() / f"{mode}-{k}-{steps}.db"
                    rate, share, inside, cpu, calls = asyncio.run(
                        measure(wf, steps, f"sqlite:///{path}?synchronous={mode}"))
                    rates.append(rate)
                    shares.append(share)
                    insides.append(inside)
                    cpus.append(cpu)
                print(f"{mode:6} {name:18} best {max(rates):6.0f} steps/s  "
                      f"median {statistics.median(rates):6.0f}  "
                      f"in write() {statistics.median(shares):4.0%} "
                      f"(SQLite {statistics.median(insides):4.0%})  "
                      f"CPU {min(cpus) * 1e6:4.0f} us/step  {calls} writes/run")
        for name, (wf, steps) in workloads.items():
            runs = [_timed(wf) for _ in range(args.repeat)]
            print(f"memory {name:18} best {steps / min(r[0] for r in runs):6.0f} steps/s"
                  f"  {'':38} CPU {min(r[1] for r in runs) / steps * 1e6:4.0f} us/step")


def _timed(wf: Workflow) -> tuple[float, float]:
    start, cpu = time.perf_counter(), time.process_time()
    asyncio.run(wf.run_async({}))
    return time.perf_counter() - start, time.process_time() - cpu


if __name__ == "__main__":
    main()
