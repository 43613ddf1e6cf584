"""Imports between plait's modules point one way (STYLE: the house's rings).

The graph is read from the source with ``ast``: top-level imports and those under
``if TYPE_CHECKING:`` (a circle of annotations is a circle of design all the same), and
separately every import, the ones inside functions included.  Importing a submodule
imports its package first; that edge is Python's, not a design choice, so ``from ..
import errors`` counts as an edge to ``plait.errors`` only.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import plait

pytestmark = pytest.mark.slow  # starts a Python process per check

ROOT = Path(plait.__file__).parent

# Circles that predate this test, outside the runtime; each is a package's own facade
# (a name re-exported from a module that builds on the first).  Shrink, never grow.
KNOWN = {
    frozenset({"plait.core.expressions", "plait.core.templates"}),  # lazy Jinja2 facade
    frozenset({"plait.observe.gantt", "plait.observe.gantt_html"}),  # render_html re-export
}
ONE_WAY = ("plait.runtime.", "plait.workflow", "plait.definitions")


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(body: list[ast.stmt], *, nested: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            if nested or _is_type_checking(node.test):
                yield from _imports(node.body, nested=nested)
            if nested:
                yield from _imports(node.orelse, nested=nested)
        elif isinstance(node, ast.Try):
            for block in (node.body, *(h.body for h in node.handlers), node.orelse,
                          node.finalbody):
                yield from _imports(block, nested=nested)
        elif nested and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef
                                    | ast.ClassDef | ast.With | ast.For | ast.While):
            yield from _imports(node.body, nested=nested)


def _graph(*, nested: bool) -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = graph[name] = set()
        for node in _imports(ast.parse(path.read_text()).body, nested=nested):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in modules)
                continue
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            subs = {f"{base}.{a.name}" for a in node.names} & modules.keys()
            edges.update(subs)
            if len(subs) < len(node.names) and base in modules:
                edges.add(base)
        edges.discard(name)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _named(cycles: list[frozenset[str]]) -> list[list[str]]:
    return sorted(sorted(c) for c in cycles)


def _listed(cycles: list[list[str]]) -> str:
    return "import circles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_graph_reader_finds_the_modules_that_matter() -> None:
    graph = _graph(nested=False)
    assert {"plait.runtime.engine", "plait.runtime.loop", "plait.workflow"} <= graph.keys()
    assert "plait.runtime.loop" in graph["plait.runtime.engine"]
    assert "plait.runtime.engine" in _graph(nested=True)["plait.workflow"]  # lazily


def test_no_new_circle_among_top_level_and_type_checking_imports() -> None:
    new = _named([c for c in _cycles(_graph(nested=False)) if c not in KNOWN])
    assert new == [], _listed(new)


def test_no_new_circle_even_through_imports_inside_functions() -> None:
    new = _named([c for c in _cycles(_graph(nested=True)) if c not in KNOWN])
    assert new == [], _listed(new)


def test_the_engine_the_loop_and_the_python_api_are_in_no_circle() -> None:
    for nested in (False, True):
        involved = _named([c for c in _cycles(_graph(nested=nested))
                           if any(m.startswith(ONE_WAY) for m in c)])
        assert involved == [], _listed(involved)


def test_an_engine_loads_a_stored_definition_without_the_python_api() -> None:
    # resume and fork validate the stored definition again: plait.workflow (which
    # imports the engine) is not needed for that, nor imported by it
    script = textwrap.dedent("""
        import asyncio, sys
        from plait.runtime.engine import Engine
        from plait.store.memory import MemoryStore

        async def main():
            store = MemoryStore()
            definition = {"name": "stored", "steps": [
                {"id": "a", "type": "transform", "value": {"n": 1}},
                {"id": "b", "type": "python", "call": "json:dumps",
                 "depends_on": ["a"]}]}
            await store.save_workflow("stored", definition, "f" * 16, None)
            checked = await Engine(store).stored_workflow("stored")
            print(checked.graph.ids, "plait.workflow" in sys.modules)

        asyncio.run(main())
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "('a', 'b') False"


def test_observers_names_the_notify_variable_as_notify_targets_does() -> None:
    from plait.observe.notify_targets import ENV
    from plait.runtime.observers import NOTIFY_ENV

    assert NOTIFY_ENV == ENV  # observers keeps its own copy to avoid importing delivery
