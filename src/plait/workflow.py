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
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Never, NoReturn, TypeVar, cast, overload

from .core.durations import parse_duration
from .core.jsoncheck import find_problems
from .core.loader import parse_inline
from .core.model import (
    DEFAULT_CONCURRENCY,
    DEFAULT_RETRY,
    JSON,
    CacheSpec,
    CircuitBreakerSpec,
    Fallback,
    JSONDict,
    Limits,
    OnFailure,
    PoolSpec,
    RetryPolicy,
    ScheduleSpec,
    StepSpec,
    Trigger,
    WorkflowSpec,
    new_step,
)
from .core.plan import Plan, make_plan
from .core.schedule_check import parse_schedules
from .core.serialize import workflow_to_dict
from .core.source import parse_text
from .core.spec_numbers import number_problems
from .core.steptypes import type_info
from .core.suggest import did_you_mean
from .core.validate import CheckedWorkflow, check, gc_paused
from .definitions import alert_problems, check_definition
from .errors import DefinitionError, Problem
from .runtime.binding import Signature, signature_of
from .runtime.results import RunResult
from .runtime.retry_names import retry_name_problems
from .steps.registry import load_plugins

if TYPE_CHECKING:
    from .store.base import Store
    from .store.shared import StoreHandle

MAX_DEFINITION_BYTES = int(os.environ.get("PLAIT_MAX_DEFINITION_BYTES", 16 * 1024 * 1024))
F = TypeVar("F", bound=Callable[..., Any])
_LOCAL = re.compile(r"<locals>|<lambda>")


ExceptionName = str | type[BaseException]


def Retry(max_retries: int = 3, initial_delay: float = 1.0, backoff: float = 2.0,  # noqa: N802
          max_delay: float = 60.0, jitter: float = 0.1,
          retry_on: Sequence[ExceptionName] = (),
          no_retry_on: Sequence[ExceptionName] = ()) -> RetryPolicy:
    """A retry policy (SPEC 5); exceptions are given by name or as classes.  Delays
    are durations (seconds or '500ms', '2s'...); numbers are kept as floats so the
    fingerprint matches the same policy loaded from YAML.  DefinitionError for an entry
    that is neither an exception name nor an exception class."""
    return RetryPolicy(max_retries=max_retries, initial_delay=parse_duration(initial_delay),
                       backoff=float(backoff), max_delay=parse_duration(max_delay),
                       jitter=float(jitter),
                       retry_on=_exception_names("retry_on", retry_on),
                       no_retry_on=_exception_names("no_retry_on", no_retry_on))


def _exception_names(field: str, values: object) -> tuple[str, ...]:
    """Exception names for ``retry_on`` / ``no_retry_on``: classes become their names
    (a class that is not a builtin is named by its dotted path, so it is found again
    when the definition is loaded from YAML)."""
    if isinstance(values, str | type):
        values = [values]
    if not isinstance(values, Sequence | set | frozenset):
        raise DefinitionError([Problem(location=f"retry.{field}", message=(
            f"expected a list of exception names or classes, got {values!r}"))])
    names: list[str] = []
    problems: list[Problem] = []
    for j, value in enumerate(values):
        if isinstance(value, str):
            names.append(value)
        elif isinstance(value, type) and issubclass(value, BaseException):
            names.append(_class_path(value))
        else:
            problems.append(Problem(location=f"retry.{field}[{j}]", message=(
                f"expected an exception name or class, got {value!r}")))
    if problems:
        raise DefinitionError(problems)
    return tuple(names)


def _class_path(cls: type[BaseException]) -> str:
    module = cls.__module__
    if (module in ("builtins", "plait.errors", "__main__") or "." in cls.__qualname__
            or _LOCAL.search(cls.__qualname__)):
        return cls.__name__  # (no path another process could import it by)
    return f"{module}.{cls.__qualname__}"


@dataclass(slots=True, kw_only=True)
class _Pending:
    """A step added in Python, before its implied dependencies are resolved."""

    id: str
    type: str
    func: Callable[..., object] | None
    config: dict[str, JSON]
    depends_on: tuple[str, ...]
    options: dict[str, Any] = field(default_factory=dict)


# the options of ``Workflow.map`` that belong to its inline step (each item)
_ITEM_OPTIONS = ("retry", "timeout", "fallback", "allow_failure", "pool", "circuit_breaker")
_STEP_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_STEP_OPTIONS = frozenset({"when", "trigger", "retry", "timeout", "fallback", "allow_failure",
                           "outputs", "circuit_breaker", "pool", "description", "then",
                           "else_", "cache"})
_WORKFLOW_OPTIONS = frozenset({"concurrency", "on_failure", "timeout", "sla", "input",
                               "reducers", "pools", "output", "version", "description",
                               "limits", "alerts", "schedules", "concurrency_key",
                               "max_runs_per_key", "notify"})


def _type_fields(step_type: str, fn: Callable[..., object] | None) -> frozenset[str] | None:
    """The fields ``add_step`` may be given for a step of ``step_type`` (None when the
    type is unknown: validation reports it)."""
    if fn is not None:
        return frozenset({"with"})  # `call` is the function
    info = type_info(step_type)
    return info.fields if info is not None else None


def _refuse_unknown(unknown: Mapping[str, object], allowed: Iterable[str], what: str,
                    where: str) -> NoReturn:
    """DefinitionError naming each unknown keyword argument and the closest allowed one."""
    names = sorted(allowed)
    raise DefinitionError([Problem(
        location=f"{where}.{key}" if where else key,
        message=f"unknown keyword argument {key!r} for {what}",
        hint=did_you_mean(key, names) or f"expected one of {', '.join(names)}")
        for key in unknown])


def _call_name(fn: Callable[..., object]) -> str:
    module = getattr(fn, "__module__", None) or "__main__"
    qualname = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", "function")
    return f"{module}:{qualname}"


class Workflow:
    """A workflow built in Python (or loaded from YAML/JSON) — see SPEC 1.2."""

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
        """Options as in a definition file (SPEC 1.1, 7); ``schedules`` are mappings
        ``{"cron": "*/5 * * * *", "timezone": "UTC", "input": {...}, "catch_up":
        "skip"}`` (or ScheduleSpec values), checked with the rest by ``validate()``."""
        if unknown:
            _refuse_unknown(unknown, _WORKFLOW_OPTIONS, f"Workflow({name!r})", "")
        self.name = name
        self._options: dict[str, Any] = {
            "concurrency": concurrency, "on_failure": on_failure,
            "timeout": _seconds(timeout), "sla": _seconds(sla),
            "input_schema": input, "reducers": dict(reducers or {}), "output": output,
            "version": version, "description": description, "limits": limits or Limits(),
            "alerts": tuple(alerts), "concurrency_key": concurrency_key,
            "max_runs_per_key": max_runs_per_key,
            "notify": copy.deepcopy(notify)}  # checked by validate()
        self._schedules = [_schedule_dict(s) for s in schedules]
        self._pools = {k: dict(v) for k, v in (pools or {}).items()}
        self._pending: list[_Pending] = []
        # map steps built with ``map``: their item functions, by step id
        self._map_funcs: dict[str, Callable[..., object]] = {}
        self._has_map = False
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
        if isinstance(source, str) and _STEP_ID.match(source):  # a step: its output
            deps.append(source)
            source = "{{ steps['" + source + "'].output }}"
        item: dict[str, JSON] = {"type": "python", "call": _call_name(func)}
        params = inspect.signature(func).parameters
        given = {name: "{{ " + name + " }}" for name in ("item", "index") if name in params}
        if given:
            item["with"] = cast(JSON, given)
        for key in _ITEM_OPTIONS:
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
        fields = _type_fields(step_type, fn)
        config: dict[str, JSON] = {}
        opts: dict[str, Any] = {}
        unknown: dict[str, object] = {}
        for key, value in options.items():
            field_name = key[:-1] if key.endswith("_") and key not in _STEP_OPTIONS else key
            if key in _STEP_OPTIONS:
                opts[key] = value
            elif fields is None or field_name in fields:
                config[field_name] = value
            else:
                unknown[key] = value
        if unknown:
            where = f"steps[{len(self._pending)}]"
            _refuse_unknown(unknown, {*_STEP_OPTIONS, "depends_on", "type", *(
                f"{f}_" if keyword.iskeyword(f) else f for f in fields or ())},
                f"step {id!r}", where)
        if fn is not None:
            config = {"call": _call_name(fn), **config}  # (`call` is not a field here)
        if step_type == "map":
            self._has_map = True
        self._pending.append(_Pending(id=id, type=step_type, func=fn, config=config,
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

    def subworkflow(self, id: str, *, workflow: str | Workflow, input: JSON = None,
                    depends_on: Sequence[str] = (), **options: Any) -> Workflow:
        """Add a ``workflow`` step (SPEC 3): a child run of ``workflow``, a stored
        workflow's ``name`` / ``name@version`` or a ``Workflow`` (its definition is kept
        in the step, and stored when the child runs; its python steps must be
        importable by name), given only ``input`` (templates allowed)."""
        return self.add_step(id, type="workflow", depends_on=depends_on,
                             **_child_fields(workflow), input=input or {}, **options)

    def loop(self, id: str, *, workflow: str | Workflow, until: str,
             max_iterations: int, input: JSON = None, on_max_iterations: str = "fail",
             depends_on: Sequence[str] = (), **options: Any) -> Workflow:
        """Add a ``loop`` step (SPEC 3): a child run of ``workflow`` per iteration until
        ``until`` (a template seeing ``loop.output``) is true, at most
        ``max_iterations`` times; ``input`` templates see ``loop.iteration`` and
        ``loop.previous``.  Output ``{"iterations": N, "output": last output}``."""
        return self.add_step(id, type="loop", depends_on=depends_on,
                             **_child_fields(workflow), input=input or {}, until=until,
                             max_iterations=max_iterations,
                             on_max_iterations=on_max_iterations, **options)

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
        """Check everything (SPEC 2); raise DefinitionError listing every problem."""
        if self._checked is None:
            load_plugins()
            problems: list[Problem] = []
            with gc_paused(keep=True):  # one pause for building and checking
                spec = self._build(problems)
                # a workflow built in Python has its step modules imported already
                problems += (alert_problems(spec) + retry_name_problems(spec)
                             + number_problems(spec))
                self._checked = check(spec, source=self.source, prior=problems)
        return self._checked

    def _build(self, problems: list[Problem] | None = None) -> WorkflowSpec:
        if self._spec is not None:
            return self._spec
        sink = problems if problems is not None else []
        pools = {name: _pool(name, body, sink) for name, body in self._pools.items()}
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
                    known = functions[id(fn)] = (_signature(fn), _doc(fn))
                sig, description = known
                if not isinstance(sig, Signature):
                    sink.append(Problem(location=f"steps[{i}]", message=f"step {p.id!r}: {sig}"))
                elif sig.params:
                    if ids is None:
                        ids = {p.id for p in self._pending}
                    implied = _implied(p, sig, i, ids, writers, props, sink)
            if p.options:
                append(_step_spec(p, implied, sink, i))
                sink += _value_problems(steps[-1], i)
                continue
            # the common case, kept cheap for graphs built by code
            deps = p.depends_on if not implied else (*p.depends_on, *implied)
            if len(deps) > 1 and len(set(deps)) < len(deps):
                deps = tuple(dict.fromkeys(deps))
            append(new_step(id=p.id, type=p.type, config=p.config, depends_on=deps,
                            description=description, func=fn))
            if p.config:
                sink += _value_problems(steps[-1], i)
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


def _child_fields(workflow: str | Workflow) -> dict[str, Any]:
    """The ``workflow`` (and ``definition``) fields naming a child workflow."""
    if isinstance(workflow, Workflow):
        return {"workflow": workflow.name, "definition": workflow.to_dict()}
    return {"workflow": workflow}


def _schedule_dict(schedule: Mapping[str, Any] | ScheduleSpec) -> object:
    """A schedule as a definition file states it (read by ``parse_schedules``, which
    reports anything that is not a mapping)."""
    if isinstance(schedule, ScheduleSpec):
        return {"cron": schedule.cron, "timezone": schedule.timezone,
                "input": schedule.input, "catch_up": schedule.catch_up}
    return dict(schedule) if isinstance(schedule, Mapping) else schedule


def _pool(name: str, body: Mapping[str, Any], problems: list[Problem]) -> PoolSpec:
    from .core.loader import parse_rate

    rate = body.get("rate")
    try:
        parsed = parse_rate(rate) if rate is not None else None
    except ValueError as exc:
        problems.append(Problem(location=f"pools.{name}.rate", message=str(exc)))
        parsed = None
    return PoolSpec(name=name, concurrency=body.get("concurrency"), rate=parsed)


def _signature(fn: Callable[..., object]) -> Signature | str:
    """The function's signature, or why it has none (a message)."""
    try:
        return signature_of(fn)
    except (TypeError, ValueError) as exc:
        return str(exc)


def _implied(p: _Pending, sig: Signature, i: int, ids: set[str],
             writers: Mapping[str, list[str]], props: set[str] | None,
             problems: list[Problem]) -> list[str]:
    """Dependencies implied by the function's parameter names (SPEC 1.2)."""
    assert p.func is not None
    given = p.config.get("with") or {}
    deps: list[str] = []
    for name, has_default in sig.params:
        if name in ("input", "ctx") or name in sig.wants_ctx or (
                isinstance(given, dict) and name in given):
            continue
        if name in ids and name != p.id:
            deps.append(name)
        elif name in writers:
            deps.extend(w for w in writers[name] if w != p.id)
        elif props is not None and name not in props and not has_default:
            problems.append(Problem(
                location=f"steps[{i}]",
                message=f"parameter {name!r} of {_call_name(p.func)} (step {p.id!r}) is not "
                f"'input', 'ctx', a step id, a declared output key or an input property"))
    return deps



def _value_problems(step: StepSpec, i: int) -> list[Problem]:
    """Where the JSON fields of a step built in Python are not JSON (a set, bytes, a
    lone surrogate...): what the fingerprint and every store need (a definition file is
    checked as a whole by check_data)."""
    fields: list[tuple[str, object]] = [("", step.config), (".when", step.when)]
    if step.fallback is not None:
        fields.append((".fallback.output", step.fallback.output))
    return [Problem(location=f"steps[{i}]{where}{found.short_path}",
                    message=f"value {found.problem}")
            for where, value in fields for found in find_problems(value)]

def _step_spec(p: _Pending, implied: list[str], problems: list[Problem], i: int) -> StepSpec:
    o = p.options
    fallback = o.get("fallback")
    if fallback is not None and not isinstance(fallback, Fallback):
        if callable(fallback):
            fallback = Fallback(call=_call_name(fallback), func=fallback)
        elif isinstance(fallback, dict) and "output" in fallback:
            fallback = Fallback(output=fallback["output"])
        elif isinstance(fallback, dict) and "call" in fallback:
            fallback = Fallback(call=fallback["call"])
        else:
            problems.append(Problem(location=f"steps[{i}].fallback", message=(
                "expected a function, {'call': 'module:function'} or {'output': value}")))
            fallback = None
    breaker = o.get("circuit_breaker")
    if isinstance(breaker, dict):
        breaker = CircuitBreakerSpec(**{**breaker, "reset_after": _seconds(
            breaker.get("reset_after", 60.0))})
    retry = _retry(o.get("retry"))
    cache = o.get("cache")
    if cache is not None and not isinstance(cache, CacheSpec):
        if isinstance(cache, dict) and isinstance(cache.get("key"), str) and "ttl" in cache:
            cache = CacheSpec(key=cache["key"], ttl=_seconds(cache["ttl"]) or 0.0)
        else:
            problems.append(Problem(location=f"steps[{i}].cache", message=(
                "expected {'key': '{{ ... }}', 'ttl': duration}")))
            cache = None
    deps = list(dict.fromkeys([*p.depends_on, *implied]))
    return new_step(
        id=p.id, type=p.type, config=p.config, depends_on=tuple(deps),
        when=o.get("when"), trigger=cast(Trigger, o.get("trigger", "default")),
        retry=retry, timeout=_seconds(o.get("timeout")),
        fallback=fallback, allow_failure=bool(o.get("allow_failure", False)),
        outputs=tuple(o.get("outputs", ())), circuit_breaker=breaker, pool=o.get("pool"),
        description=o.get("description") or _doc(p.func),
        then=tuple(o.get("then", ())), else_=tuple(o.get("else_", ())), func=p.func,
        cache=cache)


def _retry(value: object) -> RetryPolicy:
    if value is None:
        return DEFAULT_RETRY
    if isinstance(value, RetryPolicy):
        if all(map(_is_str, (*value.retry_on, *value.no_retry_on))):
            return value
        # built directly, with classes: their names, as Retry(...) gives them
        return dataclasses.replace(
            value, retry_on=_exception_names("retry_on", value.retry_on),
            no_retry_on=_exception_names("no_retry_on", value.no_retry_on))
    if isinstance(value, int) and not isinstance(value, bool):
        return RetryPolicy(max_retries=value)
    if isinstance(value, dict):
        return Retry(**value)
    raise TypeError(f"retry must be a Retry(...), a number of retries or a dict, "
                    f"got {value!r}")


def _is_str(value: object) -> bool:
    return isinstance(value, str)


def _seconds(value: object) -> float | None:
    return None if value is None else parse_duration(value)


def _doc(fn: Callable[..., object] | None) -> str | None:
    """The first paragraph of a step function's own docstring (its description)."""
    doc = getattr(fn, "__doc__", None) if fn is not None else None
    if not isinstance(doc, str) or not doc.strip():
        return None
    return inspect.cleandoc(doc).split("\n\n")[0]
