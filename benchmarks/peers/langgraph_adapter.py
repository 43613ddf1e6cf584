"""LangGraph: a StateGraph with async nodes, a reducer on the state and Send for fan-out.

Each step is a node; a step with several parents joins them with a waiting edge
(`add_edge([parents], step)`).  Interchangeable siblings (same parents, children and
duration: the fan-outs) become one node invoked once per sibling through `Send`, which is
how LangGraph expresses map-style fan-out.  Every node adds 1 to a counter whose reducer
is `operator.add`, so the final state proves every step ran exactly once.  No
checkpointer: LangGraph's fastest configuration.

LangGraph runs in supersteps (a step starts once the whole previous superstep is done),
so the unbalanced workload pays its long step at every level.
"""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from typing import Annotated, Any, TypedDict

from graph_shape import depth, sibling_groups
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send
from workloads import Workload


class Counted(TypedDict):
    ran: Annotated[int, operator.add]


Node = Callable[[Counted], Awaitable[dict[str, int]]]


async def _noop(state: Counted) -> dict[str, int]:
    return {"ran": 1}


def _sleeper(seconds: float) -> Node:
    async def sleep_node(state: Counted) -> dict[str, int]:
        await asyncio.sleep(seconds)
        return {"ran": 1}
    return sleep_node


def _fan_out(node: str, count: int) -> Callable[[Counted], list[Send]]:
    def route(state: Counted) -> list[Send]:
        return [Send(node, {"ran": 0}) for _ in range(count)]
    return route


def node_groups(workload: Workload) -> list[list[str]]:
    """Steps grouped into nodes: a fan-out (siblings with one common parent, or none)
    becomes one node sent once per sibling; every other step is a node of its own."""
    out: list[list[str]] = []
    for group in sibling_groups(workload):
        if len(group) > 1 and len(workload.parents[group[0]]) <= 1:
            out.append(group)
        else:
            out.extend([step] for step in group)
    return out


def build_graph(workload: Workload) -> Any:
    builder = StateGraph(Counted)
    groups = node_groups(workload)
    node_of: dict[str, str] = {}  # step -> node running it
    for group in groups:
        seconds = workload.duration.get(group[0], 0.0)
        name = group[0] if len(group) == 1 else f"map_{group[0]}"
        builder.add_node(name, _noop if seconds <= 0 else _sleeper(seconds))
        node_of.update((step, name) for step in group)
    children = workload.children()
    for group in groups:
        name = node_of[group[0]]
        parents = sorted({node_of[p] for p in workload.parents[group[0]]})
        if len(group) > 1:
            source = parents[0] if parents else START
            builder.add_conditional_edges(source, _fan_out(name, len(group)), [name])
        elif parents:
            # several parents: a waiting edge, the node runs once all of them have run
            builder.add_edge(parents if len(parents) > 1 else parents[0], name)
        else:
            builder.add_edge(START, name)
        if not children[group[0]]:
            builder.add_edge(name, END)
    return builder.compile()


class LangGraphAdapter:
    engine = "LangGraph"

    def version(self) -> str:
        return version("langgraph")

    def unsupported(self, workload: Workload) -> str | None:
        return None

    def build(self, workload: Workload) -> tuple[Any, int, int]:
        return build_graph(workload), workload.size, depth(workload)

    async def arun(self, built: tuple[Any, int, int]) -> None:
        graph, size, supersteps = built
        # Every superstep counts against recursion_limit (default 25): allow the depth.
        config = {"recursion_limit": supersteps + 10}
        state = await graph.ainvoke({"ran": 0}, config=config)
        if state["ran"] != size:
            raise RuntimeError(f"LangGraph ran {state['ran']} of {size} steps")
