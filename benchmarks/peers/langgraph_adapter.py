"""LangGraph: a StateGraph with async nodes, a reducer on the state and Send for fan-out.

Each step is a node; a step with several parents joins them with a waiting edge
(`add_edge([parents], step)`).  Interchangeable siblings (same parents, children and
duration: the fan-outs) become one node invoked once per sibling through `Send`, which is
how LangGraph expresses map-style fan-out; each Send carries the sibling's name and its
parents' outputs.  Every node reads its parents' outputs from the state, computes the
shared step body (`workloads.step_value`) and writes its output under its name into
`outputs`, whose reducer merges dicts; the run returns the sinks' outputs, which the
harness checks.  No checkpointer: LangGraph's fastest configuration.

The reducer merges in place (LangGraph keeps the returned value as the channel's new
value): a copying merge costs O(steps) per update, quadratic over a run.

LangGraph runs in supersteps (a step starts once the whole previous superstep is done),
so the unbalanced workload pays its long step at every level.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from typing import Annotated, Any, TypedDict

from graph_shape import depth, sibling_groups
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send
from workloads import StepValue, Workload, step_value


def merge_outputs(current: dict[str, StepValue],
                  update: dict[str, StepValue]) -> dict[str, StepValue]:
    current.update(update)
    return current


class Outputs(TypedDict):
    outputs: Annotated[dict[str, StepValue], merge_outputs]


Update = dict[str, dict[str, StepValue]]
Node = Callable[[Any], Awaitable[Update]]


def _node(step: str, parents: tuple[str, ...], seconds: float) -> Node:
    """A node running one step: its parents' outputs are read from the state."""
    async def node(state: Outputs) -> Update:
        if seconds > 0:
            await asyncio.sleep(seconds)
        outputs = state["outputs"]
        return {"outputs": {step: step_value(step, [outputs[p] for p in parents])}}
    return node


def _map_node(seconds: float) -> Node:
    """A node run once per sibling of a fan-out: the Send carries the sibling's name and
    its parents' outputs."""
    async def node(sent: dict[str, Any]) -> Update:
        if seconds > 0:
            await asyncio.sleep(seconds)
        step = sent["step"]
        return {"outputs": {step: step_value(step, sent["parents"])}}
    return node


def _fan_out(node: str, steps: list[str],
             parents: tuple[str, ...]) -> Callable[[Outputs], list[Send]]:
    def route(state: Outputs) -> list[Send]:
        outputs = state["outputs"]
        given = [outputs[p] for p in parents]
        return [Send(node, {"step": step, "parents": given}) for step in steps]
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
    builder = StateGraph(Outputs)
    groups = node_groups(workload)
    node_of: dict[str, str] = {}  # step -> node running it
    for group in groups:
        seconds = workload.duration.get(group[0], 0.0)
        if len(group) == 1:
            name = group[0]
            builder.add_node(name, _node(name, workload.parents[name], seconds))
        else:
            name = f"map_{group[0]}"
            builder.add_node(name, _map_node(seconds))
        node_of.update((step, name) for step in group)
    children = workload.children()
    for group in groups:
        name = node_of[group[0]]
        parents = sorted({node_of[p] for p in workload.parents[group[0]]})
        if len(group) > 1:
            source = parents[0] if parents else START
            builder.add_conditional_edges(
                source, _fan_out(name, group, workload.parents[group[0]]), [name])
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

    def build(self, workload: Workload) -> tuple[Any, list[str], int]:
        return build_graph(workload), workload.sinks(), depth(workload)

    async def arun(self, built: tuple[Any, list[str], int]) -> dict[str, StepValue]:
        graph, sinks, supersteps = built
        # Every superstep counts against recursion_limit (default 25): allow the depth.
        config = {"recursion_limit": supersteps + 10}
        state = await graph.ainvoke({"outputs": {}}, config=config)
        return {s: state["outputs"][s] for s in sinks}
