"""One measurement in a fresh interpreter: one engine, one workload, some repeats.

    python benchmarks/child.py MODULE:CLASS WORKLOAD_SPEC --out FILE [--repeats N]
        [--warmup N] [--budget SECONDS] [--opt KEY=VALUE]...

The orchestrators (run.py, peers/run.py) start one of these per (engine, workload) so
that every engine gets a clean process: its imports, caches and garbage do not leak into
the next measurement, and ru_maxrss is the peak of this engine alone.  The result goes
to FILE as JSON (not stdout, which engines are free to log to).

An adapter is a class whose instances have:
    engine: str; version() -> str; unsupported(workload) -> str | None;
    build(workload) -> graph; and either run(graph) or async arun(graph).
Optional: setup() / teardown() (sync or async), timings(graph) -> {phase: seconds},
notes() -> str (configuration worth reporting, e.g. thread counts), expected(workload)
-> the run's expected result (default: ``workload.expected_output()``).

run/arun returns what the run computed, ``{sink step: its output}``; after every run
(warm-up and measured, outside the timed part) it must equal the expected value, else
the measurement is an error: an engine that skipped or garbled work gets no number.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import json
import os
import resource
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# Adapters live next to this file and in peers/; both must import by bare module name.
for folder in (HERE, HERE / "peers"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import workloads  # noqa: E402
from workloads import Workload  # noqa: E402


def make_workload(spec: str) -> Workload:
    """`chain:100000` -> workloads.chain(100000); `unbalanced` -> workloads.unbalanced()."""
    name, *args = spec.split(":")
    factory = getattr(workloads, name)
    workload: Workload = factory(*(int(a) for a in args))
    return workload


def load_adapter(target: str, options: dict[str, str]) -> Any:
    module_name, _, class_name = target.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls(**options)


WARM_ENOUGH_S = 5.0


def peak_rss_mb() -> float:
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _descendants() -> set[int]:
    """Live processes started (directly or not) by this one."""
    parent_of: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # the command name (field 2) may hold spaces; ppid is the 2nd field after ')'
            parent_of[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # the process ended while we looked
    mine = {os.getpid()}
    while found := {pid for pid, ppid in parent_of.items() if ppid in mine} - mine:
        mine |= found
    return mine - {os.getpid()}


def helpers_peak_rss_mb() -> float:
    """Sum of the peak RSS (VmHWM) of this process's live descendants, e.g. a local API
    server an engine started: ru_maxrss does not see processes that are still running."""
    total_kb = 0
    for pid in _descendants():
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        total_kb += sum(int(line.split()[1]) for line in status.splitlines()
                        if line.startswith("VmHWM:"))
    return total_kb / 1024


def _call(runner: asyncio.Runner, fn: Callable[..., Any], *args: Any) -> Any:
    """Call fn; if it is async, finish it on the runner's loop.  The loop is created only
    when first needed and kept across calls, so sync engines never see an event loop and
    async ones do not pay for a new loop per run."""
    value = fn(*args)
    return runner.run(value) if inspect.isawaitable(value) else value


class WrongOutput(Exception):
    """A run returned something other than the workload's expected output."""


def _timed(runner: asyncio.Runner, run: Callable[..., Any], graph: Any,
           expected: Any) -> tuple[float, float]:
    """Wall and CPU seconds of one run, whose output is then checked (untimed).  CPU
    time (all threads of this process) is not inflated when other processes compete
    for the cores, so it is reported too."""
    wall, cpu = time.perf_counter(), time.process_time()
    output = _call(runner, run, graph)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    check_output(output, expected)
    return wall, cpu


def check_output(output: Any, expected: Any) -> None:
    if output == expected:
        return
    if not isinstance(output, dict) or not isinstance(expected, dict):
        raise WrongOutput(f"the run returned {_short(output)}, expected {_short(expected)}")
    missing = [k for k in expected if k not in output]
    wrong = [k for k in expected if k in output and output[k] != expected[k]]
    extra = [k for k in output if k not in expected]
    detail = "; ".join(
        f"{what}: {', '.join(map(str, keys[:3]))}{'...' if len(keys) > 3 else ''}"
        + (f" ({_short(output[keys[0]])} != {_short(expected[keys[0]])})"
           if what == "wrong" else "")
        for what, keys in (("missing", missing), ("wrong", wrong), ("unexpected", extra))
        if keys)
    raise WrongOutput(f"the run's output differs from the expected one: {detail}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _nothing() -> None:
    return None


def _measure(adapter: Any, workload: Workload, repeats: int, warmup: int, budget_s: float,
             result: dict[str, Any]) -> None:
    """Set up, build once (timed), then time the runs of that one graph."""
    run = adapter.arun if hasattr(adapter, "arun") else adapter.run
    with asyncio.Runner() as runner:
        start = time.perf_counter()
        _call(runner, getattr(adapter, "setup", _nothing))
        result["setup_s"] = time.perf_counter() - start
        try:
            result["rss_before_build_mb"] = peak_rss_mb()
            start = time.perf_counter()
            graph = adapter.build(workload)
            result["build_s"] = time.perf_counter() - start
            if hasattr(adapter, "timings"):
                result["phases"] = adapter.timings(graph)
            expected = (adapter.expected(workload) if hasattr(adapter, "expected")
                        else workload.expected_output())
            _time_runs(lambda: _timed(runner, run, graph, expected), repeats, warmup,
                       budget_s, result)
            if hasattr(adapter, "notes"):
                result["notes"] = adapter.notes()
            result["helpers_peak_rss_mb"] = helpers_peak_rss_mb()
        finally:
            _call(runner, getattr(adapter, "teardown", _nothing))


def _time_runs(once: Callable[[], tuple[float, float]], repeats: int, warmup: int,
               budget_s: float, result: dict[str, Any]) -> None:
    """Warm-up runs, then up to `repeats` measured ones, appended to result["walls"] and
    ["cpus"] as they finish (so a later failure keeps them).  Repeating stops early, with
    at least one measured run, once measured runs used budget_s: one slow engine must not
    eat the whole benchmark's time.  A warm-up run longer than WARM_ENOUGH_S is kept as
    a measured run: at that length, cold-start effects are noise, and it saves a run."""
    walls: list[float] = result["walls"]
    cpus: list[float] = result["cpus"]
    for _ in range(warmup):
        wall, cpu = once()
        result.setdefault("first_s", wall)  # cold: lazy imports, first-use caches
        if wall > WARM_ENOUGH_S:
            walls.append(wall)
            cpus.append(cpu)
    while len(walls) < repeats and not (walls and sum(walls) >= budget_s):
        wall, cpu = once()
        walls.append(wall)
        cpus.append(cpu)
    result.setdefault("first_s", walls[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("adapter", help="MODULE:CLASS")
    parser.add_argument("workload", help="workloads function and int args, e.g. chain:1000")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=0)
    parser.add_argument("--budget", type=float, default=float("inf"),
                        help="stop repeating once measured runs took this many seconds")
    parser.add_argument("--opt", action="append", default=[], help="KEY=VALUE for the adapter")
    args = parser.parse_args(argv)

    options = dict(o.split("=", 1) for o in args.opt)
    result: dict[str, Any] = {"adapter": args.adapter, "spec": args.workload, "walls": [],
                              "cpus": []}
    try:
        workload = make_workload(args.workload)
        result.update(workload=workload.name, steps=workload.size, edges=workload.edges,
                      critical_path_s=workload.critical_path())
        adapter = load_adapter(args.adapter, options)
        result.update(engine=adapter.engine, version=adapter.version())
        reason = adapter.unsupported(workload)
        if reason:
            result["unsupported"] = reason
        else:
            _measure(adapter, workload, args.repeats, args.warmup, args.budget, result)
            result["median_s"] = statistics.median(result["walls"])
            result["median_cpu_s"] = statistics.median(result["cpus"])
    except BaseException as exc:  # reported to the orchestrator, which decides what it means
        result["error"] = f"{type(exc).__name__}: {exc}"
        result["traceback"] = traceback.format_exc(limit=8)
    result["peak_rss_mb"] = peak_rss_mb()
    args.out.write_text(json.dumps(result))
    return 1 if "error" in result else 0


if __name__ == "__main__":
    sys.exit(main())
