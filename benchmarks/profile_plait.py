"""Where plait's time goes, with the standard library's cProfile (nothing to install).

    python benchmarks/profile_plait.py chain:1000 [--phase run|build|validate|plan]
        [--runs N] [--top 25] [--db URL] [--style ctx|params|sync|noop]

Prints the functions with the most own time, and own time summed per module, for one
phase on one workload (specs as in child.py).  cProfile inflates the cost of small
calls, so read shares, not absolute times; a sampling profiler (py-spy, in the peers'
venv) gives the undistorted picture when needed.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import time
from collections import defaultdict
from collections.abc import Callable

from child import make_workload
from plait_adapter import build_workflow, run_workflow
from workloads import Workload


def prepare(phase: str, workload: Workload, db: str,
            style: str = "ctx") -> Callable[[], Callable[[], object]]:
    """A factory that does the unprofiled set-up and returns the call to profile."""
    def for_build() -> Callable[[], object]:
        return lambda: build_workflow(workload, style)

    def for_validate() -> Callable[[], object]:
        return build_workflow(workload, style).validate  # a new workflow: validate() caches

    def for_plan() -> Callable[[], object]:
        wf = build_workflow(workload, style)
        wf.validate()
        return wf.plan

    wf = build_workflow(workload, style)
    wf.validate()

    def for_run() -> Callable[[], object]:
        return lambda: asyncio.run(run_workflow(wf, db))

    return {"build": for_build, "validate": for_validate, "plan": for_plan,
            "run": for_run}[phase]


def by_module(stats: pstats.Stats) -> list[tuple[str, float]]:
    own: dict[str, float] = defaultdict(float)
    for (path, _line, _name), row in stats.stats.items():  # type: ignore[attr-defined]
        own[_module_of(path)] += row[2]  # (calls, primitive calls, own time, cumulative, callers)
    return sorted(own.items(), key=lambda kv: -kv[1])


def _module_of(path: str) -> str:
    if "/plait/" in path:
        return "plait/" + path.split("/plait/", 1)[1]
    if path.startswith(("~", "<")):
        return "builtins"
    return "stdlib: " + path.rsplit("/", 1)[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload")
    parser.add_argument("--phase", default="run", choices=["run", "build", "validate", "plan"])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--db", default="memory://")
    parser.add_argument("--style", default="ctx", choices=["ctx", "params", "sync", "noop"],
                        help="how the steps are written (plait_adapter)")
    args = parser.parse_args()

    workload = make_workload(args.workload)
    setup = prepare(args.phase, workload, args.db, args.style)
    setup()()  # warm-up, unprofiled
    profiler = cProfile.Profile()
    elapsed = 0.0
    for _ in range(args.runs):
        call = setup()
        start = time.perf_counter()
        profiler.runcall(call)
        elapsed += time.perf_counter() - start
    stats = pstats.Stats(profiler)
    total = sum(v[2] for v in stats.stats.values())  # type: ignore[attr-defined]
    print(f"{workload.name}, phase {args.phase}: {args.runs} runs, "
          f"{elapsed / args.runs * 1000:.1f} ms each under the profiler\n")
    print("own time by module:")
    for module, seconds in by_module(stats)[:15]:
        print(f"  {seconds / total * 100:5.1f}%  {module}")
    print()
    stats.sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
