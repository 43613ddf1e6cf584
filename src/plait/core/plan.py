"""A workflow's plan: stages by depth, the critical path and its length."""

from __future__ import annotations

from dataclasses import dataclass

from .graph import depths, heights
from .model import JSONDict
from .validate import CheckedWorkflow


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """Stages say what *may* run together; plait starts every step as soon as its own
    parents are final, without waiting for the rest of its stage."""

    stages: tuple[tuple[str, ...], ...]
    critical_path: tuple[str, ...]
    depth: int
    steps: int
    edges: int

    def to_json(self) -> JSONDict:
        return {"steps": self.steps, "edges": self.edges, "depth": self.depth,
                "critical_path": list(self.critical_path),
                "stages": [list(s) for s in self.stages]}


def make_plan(checked: CheckedWorkflow) -> Plan:
    graph = checked.graph
    depth = depths(graph)
    stages: list[list[str]] = [[] for _ in range(max(depth, default=0))]
    for node in graph.order:
        stages[depth[node] - 1].append(graph.ids[node])
    height = heights(graph)
    path: list[str] = []
    if graph.size:
        node = max((n for n in range(graph.size) if not graph.parents[n]),
                   key=lambda n: height[n])
        while True:
            path.append(graph.ids[node])
            kids = graph.children[node]
            if not kids:
                break
            node = max(kids, key=lambda n: height[n])
    return Plan(stages=tuple(tuple(s) for s in stages), critical_path=tuple(path),
                depth=len(stages), steps=graph.size,
                edges=sum(len(p) for p in graph.parents))
