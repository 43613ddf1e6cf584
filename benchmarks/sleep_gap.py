"""How much wall time plait adds to the raw asyncio runner on one sleep workload.

    python benchmarks/sleep_gap.py                 parallel-200-sleeps, 40 pairs
    python benchmarks/sleep_gap.py --pairs 80 --workload unbalanced

Runs plait (memory store) and the raw asyncio runner alternately in one process, so
both see the same machine state, and prints the medians and the median of the per-pair
differences.  The makespan target (<= 1.05x the critical path) leaves plait
``0.05 * critical path - (raw - critical path)`` of room: on a machine where the raw
runner alone needs 1.04x, that is about 1 ms for 200 parallel 0.1 s sleeps.
``RESULTS.md`` (``make bench``) stays the reference; this is the quick check for work on
the per-step cost.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from baseline import run_workload
from plait_adapter import build_workflow, run_workflow
from workloads import Workload, parallel_sleeps, unbalanced

WORKLOADS = {"parallel": parallel_sleeps, "unbalanced": unbalanced}


def critical_path(workload: Workload) -> float:
    """The longest sum of durations along any path."""
    finish: dict[str, float] = {}
    for step in workload.steps:
        start = max((finish[p] for p in workload.parents[step]), default=0.0)
        finish[step] = start + workload.duration.get(step, 0.0)
    return max(finish.values(), default=0.0)


async def measure(workload: Workload, pairs: int) -> None:
    wf = build_workflow(workload)
    for _ in range(3):  # warm-up: imports, caches, the checked workflow
        await run_workflow(wf)
        await run_workload(workload)
    plait_s: list[float] = []
    raw_s: list[float] = []
    for _ in range(pairs):
        start = time.perf_counter()
        await run_workflow(wf)
        plait_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        await run_workload(workload)
        raw_s.append(time.perf_counter() - start)
    cp = critical_path(workload)
    med = statistics.median
    gap = med(p - r for p, r in zip(plait_s, raw_s, strict=True))
    print(f"{workload.name}: critical path {cp * 1e3:.1f} ms, {pairs} pairs")
    print(f"  raw asyncio  median {med(raw_s) * 1e3:8.2f} ms = {med(raw_s) / cp:.3f}x")
    print(f"  plait        median {med(plait_s) * 1e3:8.2f} ms = {med(plait_s) / cp:.3f}x")
    print(f"  plait - raw  median of pair differences {gap * 1e3:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="parallel")
    parser.add_argument("--pairs", type=int, default=40)
    args = parser.parse_args()
    asyncio.run(measure(WORKLOADS[args.workload](), args.pairs))


if __name__ == "__main__":
    main()
