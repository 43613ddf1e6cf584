"""Imports between plait's modules point one way (STYLE: the house's rings).

The graph is read from the source with ``ast``: top-level imports and those under
``if TYPE_CHECKING:`` (a circle of annotations is a circle of design all the same), and
separately every import, the ones inside functions included.  Importing a submodule
imports its package first; that edge is Python's, not a design choice, so ``from ..
import errors`` counts as an edge to ``plait.errors`` only.

The rings, over packages (every import, those inside functions included):

- ``core`` imports only itself and ``plait.errors``; ``store`` only itself, ``core``
  and ``errors``;
- no circle among ``core``, ``store``, ``steps``, ``runtime`` and ``observe``: steps
  are given what they need through their call (``StepCall``, ``Services``), and
  ``observe`` subscribes to what the runtime publishes (``runtime/observers.py``);
- ``steps`` and ``observe`` import nothing of the engine (``runtime``, ``plait.workflow``,
  ``plait.definitions``, ``plait.runs``); ``server`` nothing of ``cli`` (nor rich);
- outside ``plait.steps`` a step type is known by its traits (``StepType`` fields such
  as ``branches``, ``expands``, ``child_runs``), never by its name.
"""

from __future__ import annotations

import ast
import functools
import re
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


@functools.cache
def _parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


@functools.cache  # read-only for the tests: each reads the source once
def _graph(*, nested: bool) -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = graph[name] = set()
        for node in _imports(_parsed(path).body, nested=nested):
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


# ------------------------------------------------------------------ rings of packages

RINGS = ("core", "store", "steps", "runtime", "observe")
ENGINE = frozenset({"runtime", "workflow", "definitions", "runs"})
MAY_IMPORT = {"core": frozenset({"core", "errors"}),
              "store": frozenset({"store", "core", "errors"})}
MAY_NOT_IMPORT = {"steps": ENGINE, "observe": ENGINE, "server": frozenset({"cli"})}
# Module edges that break a rule above and are kept for now, each with why; the tests
# are strict about everything else, and fail when a listed edge is gone (remove it).
EXCEPTIONS: dict[tuple[str, str], str] = {}


def _package(module: str) -> str:
    """``core`` for ``plait.core.model``; ``errors`` for ``plait.errors``; ``plait``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _edges() -> list[tuple[str, str]]:
    graph = _graph(nested=True)
    return sorted((a, b) for a, targets in graph.items() for b in targets
                  if _package(a) != _package(b) and (a, b) not in EXCEPTIONS)


def _broken(rule: str, edges: list[tuple[str, str]]) -> str:
    return f"{rule}: " + "; ".join(f"{a} -> {b}" for a, b in edges)


def test_core_and_store_import_only_what_is_inside_them() -> None:
    for ring, allowed in MAY_IMPORT.items():
        found = [(a, b) for a, b in _edges()
                 if _package(a) == ring and _package(b) not in allowed]
        assert found == [], _broken(f"{ring} may import only {sorted(allowed)}", found)


def test_steps_observe_and_server_import_nothing_of_what_drives_them() -> None:
    for ring, refused in MAY_NOT_IMPORT.items():
        found = [(a, b) for a, b in _edges() if _package(a) == ring and _package(b) in refused]
        assert found == [], _broken(f"{ring} may not import {sorted(refused)}", found)


def test_no_circle_among_the_packages_of_the_rings() -> None:
    edges = [(a, b) for a, b in _edges() if {_package(a), _package(b)} <= set(RINGS)]
    packages: dict[str, set[str]] = {ring: set() for ring in RINGS}
    for a, b in edges:
        packages[_package(a)].add(_package(b))
    circles = _cycles(packages)
    offending = [(a, b) for a, b in edges
                 if any({_package(a), _package(b)} <= c for c in circles)]
    named = "; ".join(" <-> ".join(c) for c in _named(circles))
    assert circles == [], _broken(f"package circle {named}, through", offending)


def test_every_listed_exception_is_still_an_import() -> None:
    graph = _graph(nested=True)
    gone = [edge for edge in EXCEPTIONS if edge[1] not in graph.get(edge[0], ())]
    assert gone == [], f"no longer imported, remove from EXCEPTIONS: {gone}"


def test_the_server_loads_neither_the_cli_nor_rich() -> None:
    script = ("import importlib, pkgutil, sys, plait.server\n"
              "for m in pkgutil.walk_packages(plait.server.__path__, 'plait.server.'):\n"
              "    importlib.import_module(m.name)\n"
              "print(sorted(m for m in sys.modules if m.startswith(('plait.cli', 'rich'))))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


# ------------------------------------------------------------------ step-type traits

BUILT_IN_TYPES = frozenset({"python", "transform", "condition", "delay", "http", "llm",
                            "approval", "map", "workflow", "loop"})
# Where a type's name is the definition format itself (the fields of that type), not a
# trait; each place is a module and the names it compares.
FORMAT = {
    # parsing a condition's then/else and a map's inline `step` into the model
    "plait.core.loader": {"condition", "map"},
    # "only condition steps have then/else": a field of the condition type
    "plait.core.validate": {"condition"},
    # the Python builder writes steps of these types (a function is a python step's
    # `call`; a map's inline step is built from its own arguments)
    "plait.workflow": {"python", "map"},
}
# Not comparisons, so not found by the scan, and kept as format too: core.trust's
# OUTGOING_FIELDS and NETWORK_TYPES name the fields of http and llm steps that leave the
# process (the only places an untrusted definition may read a secret); a trait there
# would read as "no such fields" whenever the types are not registered yet.


def _is_type_of_step(node: ast.expr) -> bool:
    """``x.type``, ``x.get("type")`` or ``x["type"]`` (but an ASGI ``scope``'s)."""
    if isinstance(node, ast.Attribute):
        return node.attr == "type"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        owner, args = node.func.value, node.args
        return node.func.attr == "get" and bool(args) and _text(args[0]) == {"type"} \
            and not (isinstance(owner, ast.Name) and owner.id == "scope")
    if isinstance(node, ast.Subscript):
        return _text(node.slice) == {"type"} and not (
            isinstance(node.value, ast.Name) and node.value.id == "scope")
    return isinstance(node, ast.Name) and bool(re.fullmatch(r"(step_|s)?type", node.id))


def _text(node: ast.expr) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return set().union(*(_text(e) for e in node.elts))
    return set()


def _names_tested(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(_parsed(path)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_type_of_step(side) for side in sides):
                found |= set().union(*(_text(side) for side in sides)) & BUILT_IN_TYPES
    return found


def test_the_scan_finds_a_type_name_tested_outside_the_steps(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("def f(step, d, scope):\n"
                    "    return (step.type == 'map', d.get('type') in ('workflow', 'loop'),\n"
                    "            scope['type'] == 'http', step.kind == 'python')\n")
    assert _names_tested(path) == {"map", "workflow", "loop"}


def test_outside_the_steps_a_step_type_is_known_by_its_traits() -> None:
    found = {}
    for name, path in _modules().items():
        if _package(name) == "steps":
            continue
        names = _names_tested(path) - FORMAT.get(name, set())
        if names:
            found[name] = sorted(names)
    assert found == {}, (f"step type names tested outside plait.steps: {found}; give "
                         f"StepType (core.steptypes.StepTypeInfo) a trait instead")
