"""Graph export: Mermaid and Graphviz DOT, optionally coloured by step state."""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..core.steptypes import traits_of
from ..core.validate import CheckedWorkflow

COLOURS = {"completed": "#2e7d32", "failed": "#c62828", "running": "#1565c0",
           "queued": "#6a1b9a", "waiting": "#ef6c00", "skipped": "#9e9e9e",
           "upstream_failed": "#ad1457", "cancelled": "#5d4037", "pending": "#eeeeee"}


def _label(checked: CheckedWorkflow, i: int) -> str:
    step = checked.spec.steps[i]
    return f"{step.id}<br/><i>{step.type}</i>"


def _safe(text: str) -> str:
    return re.sub(r'["<>]', "", text)


def mermaid(checked: CheckedWorkflow, states: Mapping[str, str] | None = None) -> str:
    g = checked.graph
    spec = checked.spec
    lines = ["flowchart TD"]
    for i, sid in enumerate(g.ids):
        step = spec.steps[i]
        shape = ("{{", "}}") if traits_of(step.type).branches else ("[", "]")
        lines.append(f'    {sid}{shape[0]}"{_label(checked, i)}"{shape[1]}')
    guards = {(c, t): b for t, gs in enumerate(checked.guards) for c, b in gs}
    for child, parents in enumerate(g.parents):
        for p in parents:
            branch = guards.get((p, child))
            arrow = "-->" if branch is None else f"-->|{'then' if branch else 'else'}|"
            lines.append(f"    {g.ids[p]} {arrow} {g.ids[child]}")
    if states:
        for status, colour in COLOURS.items():
            members = [sid for sid in g.ids if states.get(sid) == status]
            if members:
                lines.append(f"    classDef {status} fill:{colour},color:#fff")
                lines.append(f"    class {','.join(members)} {status}")
    return "\n".join(lines) + "\n"


def dot(checked: CheckedWorkflow, states: Mapping[str, str] | None = None) -> str:
    g = checked.graph
    spec = checked.spec
    lines = [f'digraph "{_safe(spec.name)}" {{', "    rankdir=TB;",
             '    node [shape=box, style="rounded,filled", fillcolor="#ffffff"];']
    for i, sid in enumerate(g.ids):
        step = spec.steps[i]
        attrs = [f'label="{sid}\\n({step.type})"']
        if traits_of(step.type).branches:
            attrs.append("shape=diamond")
        if states and sid in states:
            attrs.append(f'fillcolor="{COLOURS.get(states[sid], "#ffffff")}"')
        lines.append(f"    {sid} [{', '.join(attrs)}];")
    guards = {(c, t): b for t, gs in enumerate(checked.guards) for c, b in gs}
    for child, parents in enumerate(g.parents):
        for p in parents:
            branch = guards.get((p, child))
            label = "" if branch is None else f' [label="{"then" if branch else "else"}"]'
            lines.append(f"    {g.ids[p]} -> {g.ids[child]}{label};")
    lines.append("}")
    return "\n".join(lines) + "\n"
