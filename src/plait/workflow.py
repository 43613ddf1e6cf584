"""The Python front end: ``Workflow``, ``@wf.step``, ``add_step``, loading files, running.

Both front ends produce the same model (``WorkflowSpec``); this module only builds it.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import inspect
import keyword
import os
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, Never, TypeVar, cast, overload

from .core.jsoncheck import find_problems
from .core.loader import parse_inline
from .core.model import (
    DEFAULT_CONCURRENCY,
    JSON,
    JSONDict,
    Limits,
    OnFailure,
    ScheduleSpec,
    StepSpec,
    WorkflowSpec,
    new_step,
)
from .core.plan import Plan, make_plan
from .core.schedule_check import parse_schedules
from .core.serialize import workflow_to_dict
from .core.source import parse_text
from .core.spec_numbers import number_problems
from .core.validate import CheckedWorkflow, check
from .definitions import alert_problems, check_definition
from .errors import DefinitionError, Problem
from .runtime.gctune import gc_paused
from .runtime.results import RunResult
from .runtime.retry_names import retry_name_problems
from .step_options import (
    ITEM_OPTIONS,
    STEP_ID,
    STEP_OPTIONS,
    PendingStep,
    call_name,
    first_paragraph,
    implied_dependencies,
    pool_spec,
    refuse_unknown,
    schedule_dict,
    seconds,
    signature_or_reason,
    step_spec,
    type_fields,
    value_problems,
)
from .steps.binding import Signature
from .steps.registry import load_plugins

if TYPE_CHECKING:
    from .store.base import Store
    from .store.shared import StoreHandle

MAX_DEFINITION_BYTES = int(os.environ.get("PLAIT_MAX_DEFINITION_BYTES", 16 * 1024 * 1024))
F = TypeVar("F", bound=Callable[..., Any])
_WORKFLOW_OPTIONS = frozenset({"concurrency", "on_failure", "timeout", "sla", "input",
                               "reducers", "pools", "output", "version", "description",
                               "limits", "alerts", "schedules", "concurrency_key",
                               "max_runs_per_key", "notify"})


class Workflow:
    """A workflow built in Python (or loaded from YAML/JSON): docs/python-api.md."""

    def __init__(self, name: str, *, concurrency: int = DEFAULT_CONCURRENCY,
                 on_failure: OnFailure = "continue", timeout: float | None = None,
                 sla: float | None = None, input: JSONDict | None = None,
                 reducers: Mapping[str, str] | None = None,
                 pools: Mapping[str, Mapping[str, Any]] | None = None,
                 output: JSON = None, version: int | None = None,
                 description: str | None = None, limits: Limits | None = None,
                 alerts: Sequence[str] = (),
                 schedules: Sequence[Mapping[str, Any] | ScheduleSpec] = (),
                 concurrency_key: str | None = None, max_runs_per_key: int | None = None,
                 notify: Sequence[Mapping[str, Any]] | None = None,
                 **unknown: Never) -> None:
        """Options as in a definition file; ``schedules`` are mappings
        ``{"cron": "*/5 * * * *", "timezone": "UTC", "input": {...}, "catch_up":
        "skip"}`` (or ScheduleSpec values), checked with the rest by ``validate()``."""
        if unknown:
            refuse_unknown(unknown, _WORKFLOW_OPTIONS, f"Workflow({name!r})", "")
        self.name = name
        self._options: dict[str, Any] = {
            "concurrency": concurrency, "on_failure": on_failure,
            "timeout": seconds(timeout), "sla": seconds(sla),
            "input_schema": input, "reducers": dict(reducers or {}), "output": output,
            "version": version, "description": description, "limits": limits or Limits(),
            "alerts": tuple(alerts), "concurrency_key": concurrency_key,
            "max_runs_per_key": max_runs_per_key,
            "notify": copy.deepcopy(notify)}  # checked by validate()
        self._schedules = [schedule_dict(s) for s in schedules]
        self._pools = {k: dict(v) for k, v in (pools or {}).items()}
        self._pending: list[PendingStep] = []
        # map steps built with ``map``: their item functions, by step id
        self._map_funcs: dict[str, Callable[..., object]] = {}
        self._has_map = False
        # child workflows of `workflow` / `loop` steps given as Workflow objects, by the
        # step's position: validated with this one, their definitions kept in the steps
        self._children: dict[int, Workflow] = {}
        self._seen: list[CheckedWorkflow | None] = []  # the children's, when checked
        self._spec: WorkflowSpec | None = None  # set when loaded from a definition
        self._checked: CheckedWorkflow | None = None
        self.source: str | None = None

    # ------------------------------------------------------------ building

    @overload
    def step(self, fn: F) -> F: ...

    @overload
    def step(self, fn: None = None, **options: Any) -> Callable[[F], F]: ...

    def step(self, fn: F | None = None, **options: Any) -> F | Callable[[F], F]:
        """Decorator: the function becomes a step named after it (``id=`` overrides).
        Options: depends_on, when, trigger, retry, timeout, fallback, allow_failure,
        outputs, circuit_breaker, pool, description, cache ({"key", "ttl"}), with_; any
        other keyword is refused
        (DefinitionError naming it, with the closest option)."""
        def register(func: F) -> F:
            self.add_step(options.pop("id", None) or func.__name__, func, **options)
            return func
        return register(fn) if fn is not None else register

    def map(self, fn: Callable[..., object] | None = None, *, over: object,
            id: str | None = None, concurrency: int | None = None,
            depends_on: Sequence[str | Callable[..., object]] = (),
            **options: Any) -> Any:
        """Decorator: a ``map`` step named after the function, which runs once per item
        of ``over`` with the item as its ``item`` parameter (and its position as
        ``index``, if it has one); other parameters resolve as for ``step``.  ``over``:
        a template yielding a list (``"{{ input.urls }}"``), or a step (its id or its
        function), whose output is the list (the map then depends on it).  Options of
        the map: depends_on, when, trigger, outputs, description; retry, timeout,
        fallback (``{'output': value}``), allow_failure, pool and circuit_breaker (as
        dicts) apply to each item."""
        def register(func: Callable[..., object]) -> Callable[..., object]:
            self._add_map(id or func.__name__, func, over, concurrency, depends_on, options)
            return func
        return register(fn) if fn is not None else register

    def _add_map(self, sid: str, func: Callable[..., object], over: object,
                 concurrency: int | None,
                 depends_on: Sequence[str | Callable[..., object]],
                 options: dict[str, Any]) -> None:
        source = getattr(over, "__name__", None) if callable(over) else over
        deps = list(self._dep_ids(sid, depends_on))
        if isinstance(source, str) and STEP_ID.match(source):  # a step: its output
            deps.append(source)
            source = "{{ steps['" + source + "'].output }}"
        item: dict[str, JSON] = {"type": "python", "call": call_name(func)}
        params = inspect.signature(func).parameters
        given = {name: "{{ " + name + " }}" for name in ("item", "index") if name in params}
        if given:
            item["with"] = cast(JSON, given)
        for key in ITEM_OPTIONS:
            if key in options:
                item[key] = options.pop(key)
        config: dict[str, Any] = {"over": source, "step": item}
        if concurrency is not None:
            config["concurrency"] = concurrency
        self._map_funcs[sid] = func
        self.add_step(sid, type="map", depends_on=tuple(dict.fromkeys(deps)),
                      **config, **options)

    def add_step(self, id: str, fn: Callable[..., object] | None = None, *,
                 type: str | None = None,
                 depends_on: Sequence[str | Callable[..., object]] = (),
                 **options: Any) -> Workflow:
        """Add a step programmatically.  With ``fn``: a python step calling it; with
        ``type``: a step of that type whose fields (``url``, ``value``...) are given as
        keyword arguments (a field named like a Python keyword takes a trailing
        underscore: ``with_``, ``if_``).  A keyword that is neither a step option nor a
        field of the type is refused (DefinitionError naming it, with the closest name)."""
        self._mutable()
        load_plugins()  # a plugin's step type knows its own fields
        step_type = type or "python"
        if fn is not None and step_type != "python":
            raise TypeError("add_step: give either a function or a type, not both")
        fields = type_fields(step_type, fn)
        config: dict[str, JSON] = {}
        opts: dict[str, Any] = {}
        unknown: dict[str, object] = {}
        for key, value in options.items():
            field_name = key[:-1] if key.endswith("_") and key not in STEP_OPTIONS else key
            if key in STEP_OPTIONS:
                opts[key] = value
            elif field_name == "workflow" and isinstance(value, Workflow):
                self._adopt(id, value)
                config.update(workflow=value.name, definition={})  # filled by _build
            elif fields is None or field_name in fields:
                config[field_name] = value
            else:
                unknown[key] = value
        if unknown:
            where = f"steps[{len(self._pending)}]"
            refuse_unknown(unknown, {*STEP_OPTIONS, "depends_on", "type", *(
                f"{f}_" if keyword.iskeyword(f) else f for f in fields or ())},
                f"step {id!r}", where)
        if fn is not None:
            config = {"call": call_name(fn), **config}  # (`call` is not a field here)
        if step_type == "map":
            self._has_map = True
        self._pending.append(PendingStep(id=id, type=step_type, func=fn, config=config,
                                      depends_on=self._dep_ids(id, depends_on),
                                      options=opts))
        self._checked = None
        return self

    def _dep_ids(self, id: str, depends_on: Sequence[object]) -> tuple[str, ...]:
        """Step ids of ``depends_on``: names, or the functions of this workflow's steps
        (``depends_on=[collect]`` as well as ``["collect"]``)."""
        if isinstance(depends_on, str):
            depends_on = (depends_on,)
        ids: list[str] = []
        for dep in depends_on:
            if isinstance(dep, str):
                ids.append(dep)
                continue
            found = [p.id for p in self._pending if p.func is not None and p.func is dep]
            if not found:
                shown = getattr(dep, "__name__", repr(dep))
                raise TypeError(f"step {id!r}: depends_on names steps by id or by the "
                                f"function of a step of this workflow; {shown!r} is neither")
            ids.append(found[0])
        return tuple(ids)

    def subworkflow(self, id: str, *, workflow: str | Workflow | None = None,
                    definition: JSONDict | str | Callable[..., object] | None = None,
                    input: JSON = None, depends_on: Sequence[str] = (),
                    **options: Any) -> Workflow:
        """Add a ``workflow`` step (docs/subworkflows.md): a child run of ``workflow``, a stored
        workflow's ``name`` / ``name@version`` or a ``Workflow`` (its definition is kept
        in the step, and stored when the child runs; its python steps must be
        importable by name), given only ``input`` (templates allowed).

        Or a child written at run time: ``definition`` a template string yielding the
        definition (``"{{ steps.plan.output.json }}"``), or a function returning it,
        called when the step runs with its parameters bound by name as a python step's
        are (``ctx``, ``input``, a step id for that step's output...; a step it names
        is an implied dependency).  A dict is the child's definition inline.  Its
        python steps may call only the modules listed in ``allowed_modules=[...]``."""
        if callable(definition):
            self.add_step(id, type="workflow", depends_on=depends_on,
                          call=call_name(definition), input=input or {}, **options)
            self._pending[-1].func = definition
            return self
        fields: dict[str, Any] = {"definition": definition} if definition is not None \
            else {}
        if workflow is not None:
            fields["workflow"] = workflow
        return self.add_step(id, type="workflow", depends_on=depends_on,
                             input=input or {}, **fields, **options)

    def loop(self, id: str, *, workflow: str | Workflow, until: str,
             max_iterations: int, input: JSON = None, on_max_iterations: str = "fail",
             depends_on: Sequence[str] = (), **options: Any) -> Workflow:
        """Add a ``loop`` step (docs/subworkflows.md): a child run of ``workflow`` per
        iteration until ``until`` (a template seeing ``loop.output``) is true, at most
        ``max_iterations`` times; ``input`` templates see ``loop.iteration`` and
        ``loop.previous``.  Output ``{"iterations": N, "output": last output}``."""
        return self.add_step(id, type="loop", depends_on=depends_on,
                             workflow=workflow, input=input or {}, until=until,
                             max_iterations=max_iterations,
                             on_max_iterations=on_max_iterations, **options)

    def _adopt(self, id: str, child: Workflow) -> None:
        """Keep ``child`` as the workflow of the step being added (the next one)."""
        if child is self:
            raise DefinitionError([Problem(
                location=f"steps[{len(self._pending)}].workflow",
                message=f"step {id!r}: workflow {self.name!r} cannot run itself as a child",
                hint="repeat work with a `loop` step over another workflow")])
        self._children[len(self._pending)] = child

    def _mutable(self) -> None:
        if self._spec is not None:
            raise TypeError(f"workflow {self.name!r} was loaded from a definition; build "
                            f"a new Workflow to add steps in Python")

    # ------------------------------------------------------------ loading

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, max_bytes: int = MAX_DEFINITION_BYTES,
             check_imports: bool = False) -> Workflow:
        """Load and validate a YAML or JSON definition file (``check_imports``: see
        ``from_dict``)."""
        p = Path(path)
        try:
            size = p.stat().st_size
            if size > max_bytes:
                raise DefinitionError([Problem(location="", message=(
                    f"file is {size} bytes, over the {max_bytes}-byte limit "
                    f"(PLAIT_MAX_DEFINITION_BYTES)"))], source=str(p))
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise DefinitionError([Problem(location="", message=f"cannot read: "
                                           f"{exc.strerror or exc}")], source=str(p)) from exc
        except UnicodeDecodeError as exc:
            raise DefinitionError([Problem(location="", message=f"not UTF-8 text: {exc}")],
                                  source=str(p)) from exc
        return cls.from_dict(parse_text(text, source=str(p)), source=str(p),
                             check_imports=check_imports)

    @classmethod
    def from_dict(cls, data: object, *, source: str | None = None,
                  check_imports: bool = False) -> Workflow:
        """Build and validate a workflow from a definition dict.  With ``check_imports``
        the python steps' functions are imported and the exception names of their retry
        policies checked (what running does first), and those problems are listed with
        every other one."""
        checked = check_definition(data, source=source, check_imports=check_imports)
        wf = cls(checked.spec.name)
        wf._spec, wf._checked, wf.source = checked.spec, checked, source
        return wf

    @classmethod
    def from_yaml(cls, text: str, *, source: str = "<string>") -> Workflow:
        return cls.from_dict(parse_text(text, source=source, fmt="yaml"), source=source)

    # ------------------------------------------------------------ the model

    @property
    def spec(self) -> WorkflowSpec:
        return self._spec if self._spec is not None else self._build()

    def validate(self) -> CheckedWorkflow:
        """Check everything, child workflows included (their problems located at the
        step: ``steps[3].workflow: steps[0].pool: ...``); raise DefinitionError listing
        every problem."""
        if self._checked is not None and self._children and self._children_changed():
            self._checked = None  # a child changed since: check again
        if self._checked is None:
            load_plugins()
            problems: list[Problem] = []
            with gc_paused(keep=True):  # one pause for building and checking
                spec = self._build(problems)
                # a workflow built in Python has its step modules imported already
                problems += (alert_problems(spec) + retry_name_problems(spec)
                             + number_problems(spec))
                self._checked = check(spec, source=self.source, prior=problems)
            self._seen = [child._checked for child in self._children.values()]
        return self._checked

    def _children_changed(self) -> bool:
        """Whether a child workflow was checked anew (it changed) since this one was."""
        now = [child._current_check() for child in self._children.values()]
        return any(a is not b for a, b in zip(now, self._seen, strict=True))

    def _current_check(self) -> CheckedWorkflow | None:
        try:
            return self.validate()
        except DefinitionError:
            return None

    def _build(self, problems: list[Problem] | None = None) -> WorkflowSpec:
        if self._spec is not None:
            return self._spec
        sink = problems if problems is not None else []
        pools = {name: pool_spec(name, body, sink) for name, body in self._pools.items()}
        writers: dict[str, list[str]] = {}
        for p in self._pending:
            if p.options:
                for key in p.options.get("outputs", ()):
                    writers.setdefault(key, []).append(p.id)
        ids: set[str] | None = None  # built for the first function with parameters
        schema = self._options["input_schema"]
        props = (set(schema.get("properties", {})) if isinstance(schema, dict)
                 and isinstance(schema.get("properties"), dict) else None)
        # Steps share functions (often one for thousands of steps): each function's
        # signature and description are read once.
        functions: dict[int, tuple[Signature | str, str | None]] = {}
        steps: list[StepSpec] = []
        append = steps.append
        for i, p in enumerate(self._pending):
            fn = p.func
            implied: list[str] = []
            description = None
            if fn is not None:
                known = functions.get(id(fn))
                if known is None:
                    known = functions[id(fn)] = (signature_or_reason(fn), first_paragraph(fn))
                sig, description = known
                if not isinstance(sig, Signature):
                    sink.append(Problem(location=f"steps[{i}]", message=f"step {p.id!r}: {sig}"))
                elif sig.params:
                    if ids is None:
                        ids = {p.id for p in self._pending}
                    implied = implied_dependencies(p, sig, i, ids, writers, props, sink)
            if p.options:
                append(step_spec(p, implied, sink, i))
                sink += value_problems(steps[-1], i)
                continue
            # the common case, kept cheap for graphs built by code
            deps = p.depends_on if not implied else (*p.depends_on, *implied)
            if len(deps) > 1 and len(set(deps)) < len(deps):
                deps = tuple(dict.fromkeys(deps))
            append(new_step(id=p.id, type=p.type, config=p.config, depends_on=deps,
                            description=description, func=fn))
            if p.config:
                sink += value_problems(steps[-1], i)
        opts = self._options
        if opts.get("output") is not None:
            sink += [Problem(location=f"output{found.short_path}",
                             message=f"value {found.problem}")
                     for found in find_problems(opts["output"])]
        schedules, found = parse_schedules(cast(JSON, self._schedules) or None)
        sink += found
        if self._has_map:
            steps = [self._with_item(s, i, sink) if s.type == "map" else s
                     for i, s in enumerate(steps)]
        if self._children:
            steps = [_with_child(s, self._children[i], f"steps[{i}].workflow", problems)
                     if i in self._children else s for i, s in enumerate(steps)]
        return WorkflowSpec(name=self.name, steps=tuple(steps), pools=pools,
                            schedules=schedules, **opts)

    def _with_item(self, step: StepSpec, i: int, sink: list[Problem]) -> StepSpec:
        """A map step built in Python, with its inline step parsed (and its function)."""
        item, problems = parse_inline(f"steps[{i}].step", step.config.get("step"), step.id)
        sink += problems
        func = self._map_funcs.get(step.id)
        if item is not None and func is not None:
            item = dataclasses.replace(item, func=func)
        return dataclasses.replace(step, item=item)

    def to_dict(self) -> JSONDict:
        return workflow_to_dict(self.spec)

    def plan(self) -> Plan:
        checked = self.validate()
        with gc_paused():
            return make_plan(checked)

    def mermaid(self) -> str:
        from .observe.graph import mermaid

        return mermaid(self.validate())

    def dot(self) -> str:
        from .observe.graph import dot

        return dot(self.validate())

    @property
    def fingerprint(self) -> str:
        return self.validate().fingerprint

    # ------------------------------------------------------------ running

    def run(self, input: JSON = None, *, db: str | None = None,
            run_id: str | None = None) -> RunResult:
        """Run to the end and return the result (blocking; memory store by default).
        ``db`` is a store URL: the store is opened for this run and closed after it (a
        ``plait.connect`` handle belongs to an event loop, and this call starts its own:
        hold one and ``await run_async`` to share a store between runs)."""
        return asyncio.run(self.run_async(input, db=db, run_id=run_id))

    async def run_async(self, input: JSON = None, *, db: str | StoreHandle | None = None,
                        run_id: str | None = None) -> RunResult:
        """Run to the end and return the result.  ``db``: a store URL, whose store is
        shared with every other run holding the same URL in this event loop (opened by
        the first, closed by the last: see ``plait.connect``); a handle from
        ``plait.connect``; or None for a private memory store."""
        from .runtime.gctune import relaxed_gc
        from .store.shared import StoreHandle

        checked = self.validate()
        value = {} if input is None else input
        if db is not None:
            from .runtime.control import warn_main_steps

            warn_main_steps(checked, db.url if isinstance(db, StoreHandle) else db)
        with relaxed_gc():
            if isinstance(db, StoreHandle):
                return await _run_on(db.store, checked, value, run_id)
            async with StoreHandle(db or "memory://") as held:
                return await _run_on(held.store, checked, value, run_id)

    def __repr__(self) -> str:
        return f"<Workflow {self.name!r} with {len(self.spec.steps)} steps>"


async def _run_on(store: Store, checked: CheckedWorkflow, value: JSON,
                  run_id: str | None) -> RunResult:
    from .runtime.engine import Engine

    engine = Engine(store)
    try:
        return await engine.run(checked, value, run_id=run_id)
    finally:
        engine.close()


# the child workflows being built, outermost first (a workflow that is its own
# descendant is a problem, not an endless recursion)
_BUILDING: ContextVar[tuple[int, ...]] = ContextVar("plait_building", default=())


def _with_child(step: StepSpec, child: Workflow, where: str,
                problems: list[Problem] | None) -> StepSpec:
    """``step`` with the child workflow's definition in its ``definition`` field.  With
    ``problems`` (validating) the child is validated first and each of its problems is
    added, located at the step (``steps[3].workflow: steps[0].pool: ...``)."""
    outer = _BUILDING.get()
    if id(child) in outer:
        if problems is not None:
            problems.append(Problem(location=where, message=(
                f"workflow {child.name!r} includes itself (through its child workflows)"),
                hint="a workflow cannot run itself as a child; repeat work with a `loop` "
                     "step"))
        return step
    token = _BUILDING.set((*outer, id(child)))
    try:
        definition = _child_definition(child, where, problems)
    finally:
        _BUILDING.reset(token)
    return dataclasses.replace(step, config={**step.config, "definition": definition})


def _child_definition(child: Workflow, where: str,
                      problems: list[Problem] | None) -> JSONDict:
    """The child's canonical definition (validated when ``problems`` is given: its
    problems go there, relocated under ``where``)."""
    if problems is None:
        return child.to_dict()
    try:
        return child.validate().definition
    except DefinitionError as exc:
        problems += [Problem(location=where, hint=p.hint, message=(
            f"{p.location}: {p.message}" if p.location else p.message))
            for p in exc.problems]
        return {}

