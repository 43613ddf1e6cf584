"""A workflow's plan: stages by depth, the critical path and its length."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import compress
from operator import not_

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
    # validation computed both: the depth of each step and its longest remaining path
    depth = checked.depth or depths(graph)
    height = checked.priority or heights(graph)
    stages: list[list[str]] = [[] for _ in range(max(depth, default=0))]
    ids = graph.ids
    for node in graph.order:
        stages[depth[node] - 1].append(ids[node])
    path: list[int] = []
    if graph.size:
        key = height.__getitem__
        children = graph.children
        node = max(compress(range(graph.size), map(not_, graph.parents)), key=key)
        while True:
            path.append(node)
            kids = children[node]
            if not kids:
                break
            node = kids[0] if len(kids) == 1 else max(kids, key=key)
    return Plan(stages=tuple(map(tuple, stages)), critical_path=tuple(map(ids.__getitem__, path)),
                depth=len(stages), steps=graph.size, edges=sum(map(len, graph.parents)))
