"""Graph-level validation (SPEC 2) and the checked form the run loop executes."""

from __future__ import annotations

import dataclasses
import gc
import json
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from typing import Protocol

from ..errors import DefinitionError, Problem
from . import expressions
from .graph import Graph, depths, find_cycles, graph_from_indices, heights
from .loader import STEP_ID, WORKFLOW_NAME
from .model import JSON, JSONDict, StepSpec, WorkflowSpec
from .serialize import fingerprint_of, workflow_to_dict
from .steptypes import known_types, type_info
from .suggest import did_you_mean

CONTEXT_NAMES = frozenset({"input", "state", "steps", "run", "item", "index", "secrets",
                           "range", "dict", "lipsum", "cycler", "joiner", "namespace"})


@dataclass(frozen=True, kw_only=True)
class CheckedWorkflow:
    """A definition that passed validation, with its graph and scheduling priorities.

    The canonical dict form and the fingerprint are computed on first use (storing a
    run needs them; validating does not)."""

    spec: WorkflowSpec
    graph: Graph
    priority: tuple[float, ...]  # longest remaining path (critical path first)
    guards: tuple[tuple[tuple[int, bool], ...], ...]  # per step: (condition, branch)
    sinks: tuple[int, ...]
    # What the runtime derives from the definition alone (step types, import checks,
    # per-step flags), computed on the first run and reused by every later run of
    # this checked workflow.  Not part of the definition: excluded from comparisons.
    derived: dict[str, object] = dataclasses.field(default_factory=dict, compare=False,
                                                   repr=False)

    @property
    def name(self) -> str:
        return self.spec.name

    @cached_property
    def definition(self) -> JSONDict:
        """The canonical dict form (what is stored)."""
        with gc_paused():
            return workflow_to_dict(self.spec)

    @cached_property
    def fingerprint(self) -> str:
        return fingerprint_of(self.definition)

    @cached_property
    def definition_json(self) -> str:
        """The canonical form as JSON text, encoded once however often runs store it."""
        return json.dumps(self.definition)


def check(spec: WorkflowSpec, *, source: str | None = None,
          prior: list[Problem] | None = None) -> CheckedWorkflow:
    """Validate ``spec``; raise DefinitionError listing every problem (including
    ``prior`` ones from loading)."""
    problems = list(prior or [])
    with gc_paused():
        checked = _check(spec, problems)
    if problems or checked is None:
        raise DefinitionError(problems, source=source)
    return checked


def _check(spec: WorkflowSpec, problems: list[Problem]) -> CheckedWorkflow | None:
    def add(location: str, message: str, hint: str | None = None) -> None:
        problems.append(Problem(location=location, message=message, hint=hint))

    if not WORKFLOW_NAME.match(spec.name) and not any(p.location == "name"
                                                       for p in problems):
        add("name", f"invalid workflow name {spec.name!r}",
            "lowercase letters, digits, '_' and '-', at most 64 characters")
    if len(spec.steps) > spec.limits.max_steps:
        add("steps", f"{len(spec.steps)} steps exceed limits.max_steps "
            f"({spec.limits.max_steps})", "raise limits.max_steps in the definition")
    _check_schema(spec, add)
    ids = [s.id for s in spec.steps]
    seen: dict[str, int] = {}
    for i, step in enumerate(spec.steps):
        where = f"steps[{i}]"
        if step.id.startswith("__invalid_"):
            continue
        if not STEP_ID.match(step.id):
            add(f"{where}.id", f"invalid step id {step.id!r}",
                "letters, digits and '_', not starting with a digit, at most 64 characters")
        if step.id in seen:
            add(f"{where}.id", f"duplicate step id {step.id!r} (first at steps[{seen[step.id]}])")
        else:
            seen[step.id] = i
        _check_step_fields(step, where, spec, add)
    known = set(seen)
    parents = _parents(spec, seen, add)
    graph = graph_from_indices(ids, seen, parents)
    for cycle in find_cycles(graph):
        add("steps", "cycle: " + " -> ".join(cycle),
            "remove one of these dependencies (bounded repetition is a `loop` step)")
    _check_templates(spec, graph, known, add)  # ancestry is checked only when acyclic
    if not graph.order:
        return None
    _check_state_writes(spec, graph, add)
    depth = depths(graph)
    deepest = max(depth, default=0)
    if deepest > spec.limits.max_depth:
        add("steps", f"the longest dependency chain has {deepest} steps, over "
            f"limits.max_depth ({spec.limits.max_depth})", "raise limits.max_depth")
    if problems:
        return None
    return CheckedWorkflow(spec=spec, graph=graph, priority=tuple(heights(graph)),
                           guards=_guards(spec, graph),
                           sinks=tuple(i for i, k in enumerate(graph.children) if not k))


def _check_schema(spec: WorkflowSpec, add: _Add) -> None:
    if spec.input_schema is None:
        return
    # imported here: only definitions with an input schema pay for jsonschema
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(spec.input_schema)
    except SchemaError as exc:
        path = "".join(f".{p}" if isinstance(p, str) else f"[{p}]" for p in exc.path)
        add(f"input{path}", f"not a valid JSON Schema: {exc.message}")


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building large graphs: they allocate
    hundreds of thousands of containers and create no reference cycles, so full
    collections in the middle are pure cost (2-3x on 100,000 steps)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class _Add(Protocol):  # the problem collector's signature (keeps signatures short)
    def __call__(self, location: str, message: str, hint: str | None = None) -> None: ...


def _check_step_fields(step: StepSpec, where: str, spec: WorkflowSpec, add: _Add) -> None:
    info = type_info(step.type)
    if info is None:
        if step.type != "invalid":
            add(f"{where}.type", f"unknown step type {step.type!r}",
                did_you_mean(step.type, known_types()) or f"one of {', '.join(known_types())}")
        return
    for name in sorted(info.required):
        if name not in step.config and not (name == "call" and step.func is not None):
            add(f"{where}.{name}", f"missing field {name!r} of a {step.type} step "
                f"(step {step.id!r})")
    # (a Python-built step's only field, its generated `call`, needs no check)
    if info.check is not None and (step.func is None or len(step.config) > 1):
        for suffix, message in info.check(step.config):
            add(f"{where}{suffix}", f"{message} (step {step.id!r})")
    if step.pool is not None and step.pool not in spec.pools:
        add(f"{where}.pool", f"unknown pool {step.pool!r}",
            did_you_mean(step.pool, spec.pools) or "declare it under `pools:`")
    if step.fallback is not None and step.fallback.call is not None and \
            ":" not in step.fallback.call:
        add(f"{where}.fallback.call", "expected 'module:function'")
    if (step.then or step.else_) and step.type != "condition":
        add(f"{where}.then", "only condition steps have then/else")


def _parents(spec: WorkflowSpec, index: dict[str, int], add: _Add) -> list[list[int]]:
    """Parent indices of every step: depends_on plus the conditions listing it."""
    parents: list[list[int]] = [[] for _ in spec.steps]
    for i, step in enumerate(spec.steps):
        mine = parents[i]
        for j, dep in enumerate(step.depends_on):
            found = index.get(dep)
            if found is not None:
                mine.append(found)
            else:
                add(f"steps[{i}].depends_on[{j}]", f"unknown step {dep!r} in depends_on "
                    f"of {step.id!r}", did_you_mean(dep, index))
        for field, branch in (("then", step.then), ("else", step.else_)):
            for j, target in enumerate(branch):
                if target not in index:
                    add(f"steps[{i}].{field}[{j}]", f"unknown step {target!r} in {field} of "
                        f"{step.id!r}", did_you_mean(target, index))
                elif target == step.id:
                    add(f"steps[{i}].{field}[{j}]", "a condition cannot list itself")
                else:
                    parents[index[target]].append(i)
    return parents


def _templates(step: StepSpec) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    if step.when is not None and expressions.is_template(step.when):
        found.append(("when", step.when))
    info = type_info(step.type)
    literal = info.literal_fields if info else frozenset()
    for key, value in step.config.items():
        if key not in literal:
            found.extend((f"{key}{path}", text)
                         for path, text in expressions.templates_in(value))
    if step.fallback is not None and step.fallback.call is None:
        found.extend((f"fallback.output{path}", text)
                     for path, text in expressions.templates_in(step.fallback.output))
    return found


def _check_templates(spec: WorkflowSpec, graph: Graph, known: set[str], add: _Add) -> None:
    for i, step in enumerate(spec.steps):
        for field, text in _templates(step):
            where = f"steps[{i}].{field}"
            reads = _template_reads(text, where, add)
            for name in sorted(reads):
                if name not in known:
                    add(where, f"template reads unknown step {name!r}",
                        did_you_mean(name, known))
                elif graph.order and not graph.is_ancestor(graph.index[name], i):
                    add(where, f"template reads steps.{name}, which is not an ancestor of "
                        f"{step.id!r} (it may not have run)",
                        f"add {name!r} to depends_on of {step.id!r}")
    for path, text in expressions.templates_in(spec.output):
        for name in sorted(_template_reads(text, f"output{path}", add)):
            if name not in known:
                add(f"output{path}", f"template reads unknown step {name!r}",
                    did_you_mean(name, known))


def _template_reads(text: str, where: str, add: _Add) -> frozenset[str]:
    problem = expressions.syntax_problem(text)
    if problem is not None:
        add(where, f"template syntax error at line {problem.line}, column {problem.column}: "
            f"{problem.message}")
        return frozenset()
    return expressions.compile_template(text).steps_read


def _check_state_writes(spec: WorkflowSpec, graph: Graph, add: _Add) -> None:
    writers: dict[str, list[int]] = defaultdict(list)
    for i, step in enumerate(spec.steps):
        for key in step.outputs:
            writers[key].append(i)
    branch_of: dict[int, tuple[int, bool]] = {}
    for i, step in enumerate(spec.steps):
        for target in step.then:
            if target in graph.index:  # unknown targets are reported by _parents
                branch_of[graph.index[target]] = (i, True)
        for target in step.else_:
            if target in graph.index:
                branch_of[graph.index[target]] = (i, False)
    for key, steps in writers.items():
        if len(steps) < 2 or key in spec.reducers:
            continue
        for a_pos, a in enumerate(steps):
            for b in steps[a_pos + 1:]:
                if graph.is_ancestor(a, b) or graph.is_ancestor(b, a):
                    continue
                ba, bb = branch_of.get(a), branch_of.get(b)
                if ba and bb and ba[0] == bb[0] and ba[1] != bb[1]:
                    continue  # the two sides of one condition never both run
                add(f"steps[{b}].outputs", f"state key {key!r} is written by "
                    f"{spec.steps[a].id!r} and {spec.steps[b].id!r}, which may run at the "
                    f"same time", f"declare a reducer (reducers: {{{key}: append}}) or "
                    f"order them with depends_on")


def _guards(spec: WorkflowSpec, graph: Graph) -> tuple[tuple[tuple[int, bool], ...], ...]:
    guards: list[list[tuple[int, bool]]] = [[] for _ in spec.steps]
    for i, step in enumerate(spec.steps):
        for target in step.then:
            guards[graph.index[target]].append((i, True))
        for target in step.else_:
            guards[graph.index[target]].append((i, False))
    return tuple(tuple(g) for g in guards)


def validate_input(checked: CheckedWorkflow, value: JSON) -> list[str]:
    """Messages for each way ``value`` fails the input schema (empty when it passes)."""
    schema = checked.spec.input_schema
    if schema is None:
        return []
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(schema)
    out: list[str] = []
    for err in sorted(validator.iter_errors(value), key=lambda e: list(e.path)):
        path = "".join(f".{p}" if isinstance(p, str) else f"[{p}]" for p in err.path)
        out.append(f"input{path}: {err.message}")
    return out
