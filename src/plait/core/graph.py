"""The dependency graph of a workflow, indexed by integers.

Every algorithm here is iterative (no recursion), so a 100,000-step chain cannot hit
Python's recursion limit, and linear in steps + edges except where noted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import compress
from operator import not_


@dataclass(frozen=True, slots=True, kw_only=True)
class Graph:
    ids: tuple[str, ...]
    index: dict[str, int]
    parents: tuple[tuple[int, ...], ...]
    children: tuple[tuple[int, ...], ...]
    order: tuple[int, ...]  # topological order (empty when the graph has a cycle)
    position: tuple[int, ...]  # position[i] = place of i in `order`

    @property
    def size(self) -> int:
        return len(self.ids)

    def is_ancestor(self, maybe: int, of: int) -> bool:
        """True when ``maybe`` is reachable upward from ``of``.  Searches only nodes that
        come after ``maybe`` in topological order, so near relatives are cheap."""
        if maybe == of:
            return False
        floor = self.position[maybe]
        if floor > self.position[of]:
            return False
        seen = {of}
        todo = [of]
        while todo:
            node = todo.pop()
            for parent in self.parents[node]:
                if parent == maybe:
                    return True
                if parent not in seen and self.position[parent] > floor:
                    seen.add(parent)
                    todo.append(parent)
        return False


def graph_from_indices(ids: Sequence[str], index: dict[str, int],
                       parents: Sequence[Sequence[int]]) -> Graph:
    """Index a graph given each node's parent indices (duplicates are dropped)."""
    return graph_and_depths(ids, index, parents)[0]


def graph_and_depths(ids: Sequence[str], index: dict[str, int],
                     parents: Sequence[Sequence[int]]) -> tuple[Graph, list[int]]:
    """``graph_from_indices`` and, found on the way, what ``depths`` returns for it
    (meaningful only when the graph has no cycle)."""
    parent_idx = tuple([ps if len(ps) < 2 or len(set(ps)) == len(ps)
                        else tuple(dict.fromkeys(ps)) for ps in map(tuple, parents)])
    kids: list[list[int]] = [[] for _ in ids]
    for child, ps in enumerate(parent_idx):
        for p in ps:
            kids[p].append(child)
    children = tuple(map(tuple, kids))
    order, depth = _topological(parent_idx, children)
    position = [0] * len(ids)
    for place, node in enumerate(order):
        position[node] = place
    graph = Graph(ids=tuple(ids), index=index, parents=parent_idx, children=children,
                  order=order if len(order) == len(ids) else (), position=tuple(position))
    return graph, depth


def _topological(parents: Sequence[Sequence[int]],
                 children: Sequence[Sequence[int]]) -> tuple[tuple[int, ...], list[int]]:
    """Kahn's order (first in, first out) and each node's depth (see ``depths``)."""
    waiting = list(map(len, parents))
    order = list(compress(range(len(waiting)), map(not_, waiting)))
    depth = [1] * len(waiting)
    append = order.append
    for node in order:  # visits the nodes appended as it goes
        below = depth[node] + 1
        for child in children[node]:
            if below > depth[child]:
                depth[child] = below
            left = waiting[child] - 1
            waiting[child] = left
            if not left:
                append(child)
    return tuple(order), depth


def find_cycles(graph: Graph) -> list[list[str]]:
    """One cycle per strongly connected knot, each as a closed path ``[a, b, c, a]``
    following dependency direction (a runs before b)."""
    if graph.order:
        return []
    state = [0] * graph.size  # 0 new, 1 on stack, 2 done
    cycles: list[list[str]] = []
    for start in range(graph.size):
        if state[start]:
            continue
        stack: list[tuple[int, int]] = [(start, 0)]
        path: list[int] = [start]
        state[start] = 1
        while stack:
            node, i = stack[-1]
            kids = graph.children[node]
            if i < len(kids):
                stack[-1] = (node, i + 1)
                nxt = kids[i]
                if state[nxt] == 0:
                    state[nxt] = 1
                    stack.append((nxt, 0))
                    path.append(nxt)
                elif state[nxt] == 1:
                    loop = [*path[path.index(nxt):], nxt]
                    cycles.append([graph.ids[n] for n in loop])
            else:
                state[node] = 2
                stack.pop()
                path.pop()
    return cycles


def depths(graph: Graph) -> list[int]:
    """Longest number of steps from a root to each node, counting the node (roots: 1)."""
    depth = [1] * graph.size
    for node in graph.order:
        for child in graph.children[node]:
            if depth[node] + 1 > depth[child]:
                depth[child] = depth[node] + 1
    return depth


def heights(graph: Graph, weight: Sequence[float] | None = None) -> list[float]:
    """Longest remaining path from each node to a sink, including the node itself:
    the critical-path priority (weights default to 1 per step)."""
    w = weight if weight is not None else [1.0] * graph.size
    height = [0.0] * graph.size
    for node in reversed(graph.order):
        best = 0.0
        for child in graph.children[node]:
            if height[child] > best:
                best = height[child]
        height[node] = best + w[node]
    return height


def condensed(graph: Graph) -> tuple[Graph, list[int], list[int]]:
    """The graph with each strongly connected knot (a cycle and everything on it) merged
    into one node: always acyclic, so ancestry questions can still be answered about a
    definition that has a cycle.  Returns that graph, the node each step became
    (``member[step]``), and each merged node's depth (see ``depths``: a lower bound of
    the steps' own, as a knot counts once).  Kosaraju's two passes, iterative, linear."""
    size = graph.size
    children, parents = graph.children, graph.parents
    finished: list[int] = []  # by finishing time of a depth-first walk down
    visited = bytearray(size)
    for start in range(size):
        if visited[start]:
            continue
        visited[start] = 1
        stack = [(start, iter(children[start]))]
        while stack:
            node, kids = stack[-1]
            for kid in kids:
                if not visited[kid]:
                    visited[kid] = 1
                    stack.append((kid, iter(children[kid])))
                    break
            else:
                stack.pop()
                finished.append(node)
    member = [-1] * size
    count = 0
    for start in reversed(finished):  # walking up from the last finished: one knot each
        if member[start] != -1:
            continue
        member[start] = count
        todo = [start]
        while todo:
            for parent in parents[todo.pop()]:
                if member[parent] == -1:
                    member[parent] = count
                    todo.append(parent)
        count += 1
    names = [""] * count
    joined: list[list[int]] = [[] for _ in range(count)]
    for node in range(size):
        here = member[node]
        if not names[here]:
            names[here] = graph.ids[node]
        joined[here].extend(member[p] for p in parents[node] if member[p] != here)
    merged, depth = graph_and_depths(names, {}, joined)
    return merged, member, depth
