"""Many small runs in one process: runs per second of a 4-step diamond, 50 at a time.

    python benchmarks/many_runs.py [--runs 2000] [--concurrency 50] [--chunk 250]
        [--only memory|sqlite] [--out FILE]

The workflow is the README's shape: steps whose parameters are named after their
parents (``a(input)``, ``b(a)``, ``c(a)``, ``d(b, c)``; every body is
``workloads.step_value``), each run started with ``await wf.run_async(input, db=...)``,
at most ``--concurrency`` at once (a semaphore).  Stores, measured interleaved in
chunks of ``--chunk`` runs (memory, SQLite, memory, SQLite, ...) so that both see the
same machine state, until each has done ``--runs``:

- ``url``: ``db="memory://"`` / ``db="sqlite:///<fresh file>"``, a URL per call (each
  run opens and closes its own store);
- ``connect``: one ``async with plait.connect(url) as db`` handle per store, shared by
  every run (only when plait has ``connect``).

Every run must complete with output ``{"d": step_value of d}``; a run that does not is
an error, not a number.  Prints (or writes to FILE) JSON: per mode the runs, seconds,
runs/s and per-chunk rates, and per kind the SQLite/memory ratio per round.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from workloads import StepValue, step_value  # noqa: E402

import plait  # noqa: E402
from plait import Workflow  # noqa: E402


def diamond() -> Workflow:
    """a -> b, c -> d, written as the README teaches (parameters named after steps)."""
    wf = Workflow("diamond")

    @wf.step
    async def a(input: Any) -> StepValue:
        return step_value("a", ())

    @wf.step
    async def b(a: StepValue) -> StepValue:
        return step_value("b", (a,))

    @wf.step
    async def c(a: StepValue) -> StepValue:
        return step_value("c", (a,))

    @wf.step
    async def d(b: StepValue, c: StepValue) -> StepValue:
        return step_value("d", (b, c))

    return wf


EXPECTED = {"d": {"step": "d", "n": 5}}


class WrongRun(Exception):
    """A run did not complete with the expected output."""


async def run_many(wf: Workflow, db: Any, count: int, concurrency: int, first: int) -> None:
    gate = asyncio.Semaphore(concurrency)

    async def one(k: int) -> None:
        async with gate:
            result = await wf.run_async({"run": k}, db=db)
        if result.status != "completed" or result.output != EXPECTED:
            raise WrongRun(f"run {k} ended {result.status!r} with output "
                           f"{result.output!r}, expected {EXPECTED!r}")

    async with asyncio.TaskGroup() as group:
        for k in range(first, first + count):
            group.create_task(one(k))


@contextlib.asynccontextmanager
async def stores(tmp: str) -> AsyncIterator[dict[str, Any]]:
    """mode label -> what goes into ``db=``; handles stay open for the whole run."""
    sqlite_url = f"sqlite:///{tmp}/url.db"
    modes: dict[str, Any] = {"memory, url": "memory://", "sqlite, url": sqlite_url}
    async with contextlib.AsyncExitStack() as stack:
        connect = getattr(plait, "connect", None)
        if connect is not None:
            modes["memory, connect"] = await stack.enter_async_context(connect("memory://"))
            modes["sqlite, connect"] = await stack.enter_async_context(
                connect(f"sqlite:///{tmp}/connect.db"))
        yield modes


async def measure(runs: int, concurrency: int, chunk: int,
                  only: str | None = None) -> dict[str, Any]:
    wf = diamond()
    wf.validate()
    with tempfile.TemporaryDirectory(prefix="plait-many-") as tmp:
        async with stores(tmp) as all_modes:
            modes = {m: db for m, db in all_modes.items()
                     if only is None or m.startswith(f"{only},")}
            started = 0
            for db in modes.values():  # warm-up: imports, first-use caches, the schema
                await run_many(wf, db, min(chunk, 50), concurrency, started)
                started += min(chunk, 50)
            seconds = dict.fromkeys(modes, 0.0)
            chunk_rates: dict[str, list[float]] = {m: [] for m in modes}
            done = 0
            while done < runs:
                n = min(chunk, runs - done)
                for mode, db in modes.items():
                    start = time.perf_counter()
                    await run_many(wf, db, n, concurrency, started)
                    spent = time.perf_counter() - start
                    started += n
                    seconds[mode] += spent
                    chunk_rates[mode].append(n / spent)
                done += n
    out: dict[str, Any] = {"runs": runs, "concurrency": concurrency, "chunk": chunk,
                           "connect": "memory, connect" in seconds, "modes": {}}
    for mode, spent in seconds.items():
        out["modes"][mode] = {"runs": runs, "seconds": spent, "runs_per_s": runs / spent,
                              "chunk_rates": chunk_rates[mode]}
    for kind in ("url", "connect"):
        mem, lite = chunk_rates.get(f"memory, {kind}"), chunk_rates.get(f"sqlite, {kind}")
        if mem and lite:
            per_round = [s / m for s, m in zip(lite, mem, strict=True)]
            out[f"sqlite_over_memory_{kind}"] = {
                "ratio": seconds[f"memory, {kind}"] / seconds[f"sqlite, {kind}"],
                "per_round": per_round, "median": statistics.median(per_round)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000, help="runs per store")
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--chunk", type=int, default=250,
                        help="runs per store before switching to the next store")
    parser.add_argument("--only", choices=("memory", "sqlite"),
                        help="measure one store alone (no interleaving)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    try:
        result = asyncio.run(measure(args.runs, args.concurrency, args.chunk, args.only))
    except* WrongRun as group:
        result = {"error": str(group.exceptions[0])}
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text)
    else:
        print(text)
    return 1 if "error" in result else 0


if __name__ == "__main__":
    sys.exit(main())
