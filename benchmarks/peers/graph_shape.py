"""Facts about a Workload's shape that several peer adapters need."""

from __future__ import annotations

import os

from workloads import Workload


def levels(workload: Workload) -> list[list[str]]:
    """Steps grouped by depth (roots first): what a level-by-level engine runs together."""
    depth: dict[str, int] = {}
    out: list[list[str]] = []
    for step in workload.steps:  # topological, so parents are already placed
        d = 1 + max((depth[p] for p in workload.parents[step]), default=-1)
        depth[step] = d
        if d == len(out):
            out.append([])
        out[d].append(step)
    return out


def depth(workload: Workload) -> int:
    return len(levels(workload))


def sleep_threads(workload: Workload) -> int | None:
    """Threads a thread-pool engine needs so that no sleeping step waits for a thread: the
    widest level (enough for the standard workloads, whose sleepers sit in levels).  None
    for no-op workloads: there the engine's default pool size is the idiomatic choice."""
    if not workload.sleeps:
        return None
    return max(len(level) for level in levels(workload))


def default_threads() -> int:
    """ThreadPoolExecutor's own default, for the record."""
    return min(32, (os.cpu_count() or 1) + 4)


def sibling_groups(workload: Workload) -> list[list[str]]:
    """Steps partitioned into groups of interchangeable siblings: same parents, same
    children, same duration.  A group of more than one step is a map (fan-out) over
    identical work; engines with a map primitive (LangGraph's Send) express it as one.
    Groups come out in the topological order of their first member."""
    children = workload.children()
    groups: dict[tuple[object, ...], list[str]] = {}
    for step in workload.steps:
        key = (workload.parents[step], tuple(children[step]),
               workload.duration.get(step, 0.0))
        groups.setdefault(key, []).append(step)
    return list(groups.values())
