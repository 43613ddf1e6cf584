"""Graph-level validation (docs/definitions.md) and the checked form the run loop executes."""

from __future__ import annotations

import dataclasses
import json
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import chain, compress, islice, repeat
from operator import attrgetter, contains, is_, is_not, not_
from typing import Protocol, TypeVar, cast

from ..errors import DefinitionError, Problem
from . import expressions
from .concurrency_key import key_problems
from .graph import Graph, condensed, find_cycles, graph_and_depths, heights
from .input_schema import input_problems, schema_problems
from .loader import STEP_ID, WORKFLOW_NAME
from .model import JSON, REDUCERS, JSONDict, StepSpec, WorkflowSpec
from .reducers import reducer_hint, unknown_reducer
from .retry import is_exception_name, policies_naming_exceptions
from .schedule_check import schedule_problems
from .serialize import fingerprint_of, workflow_to_dict
from .steptypes import (
    known_types,
    traits_of,
    type_info,
    unavailable_reason,
    unavailable_types,
)
from .suggest import did_you_mean

CONTEXT_NAMES = frozenset({"input", "state", "steps", "run", "item", "index", "secrets",
                           "loop", "range", "dict", "lipsum", "cycler", "joiner", "namespace"})

_T = TypeVar("_T")


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
    # per step: the number of steps on the longest path from a root to it (roots: 1)
    depth: tuple[int, ...] = dataclasses.field(default=(), compare=False, repr=False)
    # What the runtime derives from the definition alone (step types, import checks,
    # per-step flags), computed on the first run and reused by every later run of
    # this checked workflow.  Not part of the definition: excluded from comparisons.
    derived: dict[str, object] = dataclasses.field(default_factory=dict, compare=False,
                                                   repr=False)

    @property
    def name(self) -> str:
        return self.spec.name

    def derive(self, key: str, make: Callable[[], _T]) -> _T:
        """``derived[key]``, made by ``make()`` on first use (an error in ``make``
        stores nothing, so the next call tries again)."""
        try:
            return cast(_T, self.derived[key])
        except KeyError:
            value = self.derived[key] = make()
            return value

    @cached_property
    def definition(self) -> JSONDict:
        """The canonical dict form (what is stored)."""
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
    problems += schedule_problems(spec, problems) + key_problems(spec, problems)
    _check_reducers(spec, add)
    _check_retry_names(spec, add)
    steps = spec.steps
    # Most checks read one field of every step, across all steps at once; only the steps
    # where something may be wrong are then checked one by one.
    ids = list(map(_ID, steps))
    types = _by_type(steps)
    branches = any(map(_THEN, steps)) or any(map(_ELSE, steps))  # condition steps
    seen = _unique_valid_ids(ids)
    if seen is not None:  # the common case
        for i in _steps_with_fields_to_check(spec, types, branches):
            _check_step_fields(steps[i], f"steps[{i}]", spec, add)
    else:
        seen = {}
        for i, step in enumerate(steps):
            where = f"steps[{i}]"
            if step.id.startswith("__invalid_"):
                continue
            if not STEP_ID.match(step.id):
                add(f"{where}.id", f"invalid step id {step.id!r}",
                    "letters, digits and '_', not starting with a digit, at most 64 "
                    "characters")
            if step.id in seen:
                add(f"{where}.id",
                    f"duplicate step id {step.id!r} (first at steps[{seen[step.id]}])")
            else:
                seen[step.id] = i
            _check_step_fields(step, where, spec, add)
    parents = _parents_of_valid(spec, seen, branches)
    if parents is None:  # an unknown name, or a condition listing itself: say where
        parents = _parents(spec, seen, add)
    graph, depth = graph_and_depths(ids, seen, parents)
    order = _Order(graph)
    if not graph.order:
        for cycle in find_cycles(graph):
            add("steps", "cycle: " + " -> ".join(cycle),
                "remove one of these dependencies; to repeat steps until a condition "
                "holds, use a `loop` step")
        # the checks below still run, on the graph with each cycle merged into one node
        dag, member, depth = condensed(graph)
        order = _Order(dag, member)
    _check_templates(spec, types, order, seen, add)
    if any(traits_of(name).expands for name, _ in types):
        _check_maps(spec, order, seen, add)
    _check_state_writes(spec, graph, order, add)
    deepest = max(depth, default=0)
    if deepest > spec.limits.max_depth:
        add("steps", f"the longest dependency chain has {deepest} steps, over "
            f"limits.max_depth ({spec.limits.max_depth})", "raise limits.max_depth")
    if problems:
        return None
    return CheckedWorkflow(spec=spec, graph=graph, priority=tuple(heights(graph)),
                           guards=_guards(spec, graph) if branches else ((),) * len(steps),
                           sinks=tuple(compress(range(graph.size), map(not_, graph.children))),
                           depth=tuple(depth))


_ID = attrgetter("id")
_TYPE = attrgetter("type")
_CONFIG = attrgetter("config")
_FUNC = attrgetter("func")
_POOL = attrgetter("pool")
_FALLBACK = attrgetter("fallback")
_THEN = attrgetter("then")
_ELSE = attrgetter("else_")
_WHEN = attrgetter("when")
_CACHE = attrgetter("cache")
_OUTPUTS = attrgetter("outputs")
_DEPENDS_ON = attrgetter("depends_on")
# Many valid step ids separated by spaces (which no id contains).
_STEP_IDS = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}(?: [A-Za-z_][A-Za-z0-9_]{0,63})*")


def _unique_valid_ids(ids: list[str]) -> dict[str, int] | None:
    """Each id's index when every id is valid and unique (one regular expression over
    all of them), else None: the caller then checks id by id and says what is wrong."""
    try:
        joined = " ".join(ids)
    except TypeError:
        return None
    if (not _STEP_IDS.fullmatch(joined) or joined.count(" ") != len(ids) - 1
            or "__invalid_" in joined):
        return None
    index = dict(zip(ids, range(len(ids)), strict=True))
    return index if len(index) == len(ids) else None


_Types = list[tuple[str, list[int] | range]]  # the steps of each type


def _by_type(steps: tuple[StepSpec, ...]) -> _Types:
    """The step indices of each step type (in order of first appearance)."""
    types = list(map(_TYPE, steps))
    if len(set(types)) == 1:  # programmatic graphs often have one type
        return [(types[0], range(len(types)))]
    groups: dict[str, list[int]] = defaultdict(list)
    for i, name in enumerate(types):
        groups[name].append(i)
    return list(groups.items())


def _steps_with_fields_to_check(spec: WorkflowSpec, types: _Types,
                                branches: bool) -> list[int]:
    """The steps `_check_step_fields` may report a problem for, in order (a superset:
    the others are skipped, as checking them would find nothing)."""
    steps = spec.steps
    flagged: set[int] = set()
    for name, where in types:
        group = steps if isinstance(where, range) else [steps[i] for i in where]
        info = type_info(name)
        if info is None:
            flagged.update(where)
            continue
        configs = list(map(_CONFIG, group))
        funcs = list(map(_FUNC, group))
        for field in info.required:
            if not all(map(contains, configs, repeat(field))):
                flagged.update(i for i, c, f in zip(where, configs, funcs, strict=True)
                               if field not in c and not (field == "call" and f is not None))
        if info.check is not None and (any(map(is_, funcs, repeat(None)))
                                       or max(map(len, configs)) > 1):
            flagged.update(i for i, c, f in zip(where, configs, funcs, strict=True)
                           if f is None or len(c) > 1)
    pools = set(map(_POOL, steps))
    pools.discard(None)
    if not pools.issubset(spec.pools):
        flagged.update(i for i, s in enumerate(steps)
                       if s.pool is not None and s.pool not in spec.pools)
    if any(map(is_not, map(_FALLBACK, steps), repeat(None))):
        flagged.update(i for i, s in enumerate(steps) if s.fallback is not None)
    if branches:
        flagged.update(i for i, s in enumerate(steps) if s.then or s.else_)
    return sorted(flagged)


def _check_schema(spec: WorkflowSpec, add: _Add) -> None:
    for problem in schema_problems(spec.input_schema):
        add(problem.location, problem.message)


def _check_reducers(spec: WorkflowSpec, add: _Add) -> None:
    for key, reducer in spec.reducers.items():
        if reducer not in REDUCERS:
            add(f"reducers.{key}", unknown_reducer(reducer), reducer_hint(reducer))


def _check_retry_names(spec: WorkflowSpec, add: _Add) -> None:
    """Each retry_on / no_retry_on entry is an exception name (which exception it names
    is checked where step modules are imported: plait.runtime.retry_names)."""
    named = policies_naming_exceptions(spec.steps)
    if not named:
        return
    for i, step in enumerate(spec.steps):
        if id(step.retry) not in named:
            continue
        for field in ("retry_on", "no_retry_on"):
            for j, name in enumerate(getattr(step.retry, field)):
                if not is_exception_name(name):
                    add(f"steps[{i}].retry.{field}[{j}]", f"expected an exception name "
                        f"(ValueError, package.module.ClassName), got {name!r}")


class _Add(Protocol):  # the problem collector's signature (keeps signatures short)
    def __call__(self, location: str, message: str, hint: str | None = None) -> None: ...


def _check_step_fields(step: StepSpec, where: str, spec: WorkflowSpec, add: _Add) -> None:
    info = type_info(step.type)
    if info is None:
        if step.type != "invalid":
            _unknown_type(step.type, f"{where}.type", add)
        return
    for name in sorted(info.required):
        if name not in step.config and not (name == "call" and step.func is not None):
            add(f"{where}.{name}", f"missing field {name!r} of a {step.type} step "
                f"(step {step.id!r})", f"set it in the step, or for every {step.type} "
                f"step under defaults.{step.type}")
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


def _unknown_type(name: str, where: str, add: _Add) -> None:
    reason = unavailable_reason(name)
    if reason is not None:  # a plugin advertised it, and failed to load
        add(where, f"unknown step type {name!r}: {reason}",
            "fix or reinstall the package that provides it")
        return
    hint = did_you_mean(name, known_types()) or f"one of {', '.join(known_types())}"
    broken = unavailable_types()
    if broken:
        hint += "; plugins that failed to load: " + "; ".join(broken.values())
    add(where, f"unknown step type {name!r}", hint)


def _parents_of_valid(spec: WorkflowSpec, index: dict[str, int],
                      branches: bool) -> Sequence[Sequence[int]] | None:
    """What `_parents` returns, or None when it would report a problem (the caller
    then runs `_parents`)."""
    steps = spec.steps
    deps = list(map(_DEPENDS_ON, steps))
    found = map(index.__getitem__, chain.from_iterable(deps))  # cut into each step's share
    try:
        if not branches:
            return list(map(tuple, map(islice, repeat(found), map(len, deps))))
        parents = list(map(list, map(islice, repeat(found), map(len, deps))))
    except KeyError:  # an unknown step
        return None
    # a condition step is a parent of its targets, placed as `_parents` places it:
    # before the target's own depends_on when the condition comes first in the list
    before: dict[int, list[int]] = defaultdict(list)
    after: dict[int, list[int]] = defaultdict(list)
    for i, step in enumerate(steps):
        for target in (*step.then, *step.else_):
            j = index.get(target)
            if j is None or target == step.id:
                return None
            (before if i < j else after)[j].append(i)
    for j, conditions in before.items():
        parents[j][:0] = conditions
    for j, conditions in after.items():
        parents[j].extend(conditions)
    return parents


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


def step_templates(step: StepSpec) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    if step.when is not None and expressions.is_template(step.when):
        found.append(("when", step.when))
    info = type_info(step.type)
    literal = info.literal_fields if info else frozenset()
    strings = info.template_strings if info else frozenset()
    for key, value in step.config.items():
        if key not in literal or (key in strings and isinstance(value, str)):
            found.extend((f"{key}{path}", text)
                         for path, text in expressions.templates_in(value))
    if step.fallback is not None and step.fallback.call is None:
        found.extend((f"fallback.output{path}", text)
                     for path, text in expressions.templates_in(step.fallback.output))
    if step.cache is not None and expressions.is_template(step.cache.key):
        found.append(("cache.key", step.cache.key))
    return found


def _steps_with_templates(spec: WorkflowSpec, types: _Types) -> list[int] | range:
    """The steps `_templates` may find a template in (a superset), in order."""
    steps = spec.steps
    flagged: set[int] = set()
    for name, where in types:
        group = steps if isinstance(where, range) else [steps[i] for i in where]
        info = type_info(name)
        literal = info.literal_fields if info else frozenset()
        strings = info.template_strings if info else frozenset()
        if strings:  # a string in one of these fields is a template
            flagged.update(i for i, step in zip(where, group, strict=True)
                           if any(isinstance(step.config.get(key), str) for key in strings))
        if not literal.issuperset(set().union(*map(_CONFIG, group))):  # all field names
            if isinstance(where, range) and not literal:
                return where  # every step has a field to look into
            flagged.update(i for i, step in zip(where, group, strict=True)
                           if not literal.issuperset(step.config))
    if (any(map(is_not, map(_WHEN, steps), repeat(None)))
            or any(map(is_not, map(_FALLBACK, steps), repeat(None)))
            or any(map(is_not, map(_CACHE, steps), repeat(None)))):
        flagged.update(i for i, step in enumerate(steps)
                       if step.when is not None or step.fallback is not None
                       or step.cache is not None)
    return sorted(flagged)


def _check_templates(spec: WorkflowSpec, types: _Types, order: _Order,
                     index: dict[str, int], add: _Add) -> None:
    known: set[str] | None = None  # the names suggested from (built once, if needed)
    for i in _steps_with_templates(spec, types):
        step = spec.steps[i]
        for field, text in step_templates(step):
            where = f"steps[{i}].{field}"
            reads = _template_reads(text, where, add)
            for name in sorted(reads):
                if name not in index:
                    known = set(index) if known is None else known
                    add(where, f"template reads unknown step {name!r}",
                        did_you_mean(name, known))
                elif not order.runs_before(index[name], i):
                    add(where, f"template reads steps.{name}, which is not an ancestor of "
                        f"{step.id!r} (it may not have run)",
                        f"add {name!r} to depends_on of {step.id!r}")
    for path, text in expressions.templates_in(spec.output):
        for name in sorted(_template_reads(text, f"output{path}", add)):
            if name not in index:
                known = set(index) if known is None else known
                add(f"output{path}", f"template reads unknown step {name!r}",
                    did_you_mean(name, known))


def _check_maps(spec: WorkflowSpec, order: _Order, index: dict[str, int],
                add: _Add) -> None:
    """Each map step's inline step, checked like a step in the map's place: its type
    (any but map), its fields, its pool, its templates (which may read ``item``,
    ``index`` and the steps that run before the map)."""
    for i, step in enumerate(spec.steps):
        item = step.item
        if item is None:
            continue
        where = f"steps[{i}].step"
        if traits_of(item.type).expands:
            continue  # reported by the map type's check
        _check_step_fields(item, where, spec, add)
        for field, text in step_templates(item):
            at = f"{where}.{field}"
            for name in sorted(_template_reads(text, at, add)):
                if name not in index:
                    add(at, f"template reads unknown step {name!r}",
                        did_you_mean(name, set(index)))
                elif not order.runs_before(index[name], i):
                    add(at, f"template reads steps.{name}, which is not an ancestor of "
                        f"{step.id!r} (it may not have run)",
                        f"add {name!r} to depends_on of {step.id!r}")


class _Order:
    """Which steps surely run before which: ancestry in the graph, or, when it has a
    cycle, in its condensation (``member``: the merged node of each step), where two
    steps on one cycle count as ordered (the cycle is reported; saying more about them
    would be noise)."""

    def __init__(self, dag: Graph, member: list[int] | None = None) -> None:
        self.dag = dag
        self.member = member
        self._ancestry: _Ancestry | None = None  # built on the first question

    @property
    def ancestry(self) -> _Ancestry:
        if self._ancestry is None:
            self._ancestry = _Ancestry(self.dag)
        return self._ancestry

    def nodes(self, steps: list[int]) -> list[int]:
        """The distinct graph nodes of ``steps``."""
        member = self.member
        return steps if member is None else sorted({member[i] for i in steps})

    def runs_before(self, a: int, b: int) -> bool:
        member = self.member
        if member is None:
            return self.ancestry.is_ancestor(a, b)
        if member[a] == member[b]:
            return a != b
        return self.ancestry.is_ancestor(member[a], member[b])

    def ordered(self, a: int, b: int) -> bool:
        return self.runs_before(a, b) or self.runs_before(b, a)


class _Ancestry:
    """``graph.is_ancestor`` for many questions.  Once the searches about one step have
    visited as many steps as come after it in topological order, its descendants are
    marked (one walk) and later questions about it are read from the marks: a template
    reading one step from thousands of others would otherwise search the graph once per
    reader (quadratic on a long chain), and near relatives stay one short search."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.spent: dict[int, int] = defaultdict(int)
        self.below: dict[int, bytearray] = {}

    def is_ancestor(self, maybe: int, of: int) -> bool:
        below = self.below.get(maybe)
        if below is not None:
            return bool(below[of])
        graph = self.graph
        position = graph.position
        floor = position[maybe]
        if maybe == of or floor > position[of]:
            return False
        parents = graph.parents
        seen = {of}
        todo = [of]
        found = False
        while todo and not found:
            for parent in parents[todo.pop()]:
                if parent == maybe:
                    found = True
                    break
                if parent not in seen and position[parent] > floor:
                    seen.add(parent)
                    todo.append(parent)
        self.spent[maybe] += len(seen)
        if self.spent[maybe] > graph.size - floor:
            self.below[maybe] = _descendants(graph, maybe)
        return found


def _descendants(graph: Graph, node: int) -> bytearray:
    """1 for every step reachable downward from ``node`` (not itself), else 0."""
    marks = bytearray(graph.size)
    children = graph.children
    todo = [node]
    while todo:
        for child in children[todo.pop()]:
            if not marks[child]:
                marks[child] = 1
                todo.append(child)
    return marks


def _template_reads(text: str, where: str, add: _Add) -> frozenset[str]:
    problem = expressions.syntax_problem(text)
    if problem is not None:
        add(where, problem.describe())
        return frozenset()
    return expressions.compile_template(text).steps_read


def _check_state_writes(spec: WorkflowSpec, graph: Graph, order: _Order,
                        add: _Add) -> None:
    steps = spec.steps
    writers: dict[str, list[int]] = defaultdict(list)
    for i in compress(range(len(steps)), map(_OUTPUTS, steps)):
        for key in steps[i].outputs:
            writers[key].append(i)
    branch_of: dict[int, tuple[int, bool]] | None = None  # built for the first such key
    for key, found in writers.items():
        if (len(found) < 2 or key in spec.reducers
                or _in_sequence(order.dag, order.nodes(found))):
            continue
        if branch_of is None:
            branch_of = _branches(spec, graph)
        for a_pos, a in enumerate(found):
            for b in found[a_pos + 1:]:
                if order.ordered(a, b):
                    continue
                ba, bb = branch_of.get(a), branch_of.get(b)
                if ba and bb and ba[0] == bb[0] and ba[1] != bb[1]:
                    continue  # the two sides of one condition never both run
                add(f"steps[{b}].outputs", f"state key {key!r} is written by "
                    f"{steps[a].id!r} and {steps[b].id!r}, which may run at the "
                    f"same time", f"declare a reducer (reducers: {{{key}: append}}) or "
                    f"order them with depends_on")


def _in_sequence(graph: Graph, nodes: list[int]) -> bool:
    """True when every two of ``nodes`` are ordered (one is an ancestor of the other):
    then each is an ancestor of the next in topological order, which takes one search
    per node instead of one per pair."""
    ordered = sorted(nodes, key=graph.position.__getitem__)
    return all(map(graph.is_ancestor, ordered, ordered[1:]))


def _branches(spec: WorkflowSpec, graph: Graph) -> dict[int, tuple[int, bool]]:
    """The (condition, branch) each conditional step is on (the last listing wins)."""
    branch_of: dict[int, tuple[int, bool]] = {}
    for i, step in enumerate(spec.steps):
        if not (step.then or step.else_):
            continue
        for target in step.then:
            if target in graph.index:  # unknown targets are reported by _parents
                branch_of[graph.index[target]] = (i, True)
        for target in step.else_:
            if target in graph.index:
                branch_of[graph.index[target]] = (i, False)
    return branch_of


def _guards(spec: WorkflowSpec, graph: Graph) -> tuple[tuple[tuple[int, bool], ...], ...]:
    steps = spec.steps
    guards: list[list[tuple[int, bool]]] = [[] for _ in steps]
    for i, step in enumerate(steps):
        for target in step.then:
            guards[graph.index[target]].append((i, True))
        for target in step.else_:
            guards[graph.index[target]].append((i, False))
    return tuple(tuple(g) for g in guards)


def validate_input(checked: CheckedWorkflow, value: JSON) -> list[str]:
    """Messages for each way ``value`` fails the input schema (empty when it passes)."""
    return input_problems(checked.spec.input_schema, value)
