"""The step options of the Python API: what the keywords of ``@wf.step``,
``add_step`` and ``Workflow.map`` become in the model (retry policies, fallbacks,
circuit breakers, caches, the dependencies implied by parameter names), and the
problems found on the way.  ``plait.workflow`` builds workflows with them."""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn, cast

from .core.durations import parse_duration
from .core.jsoncheck import find_problems
from .core.model import (
    DEFAULT_RETRY,
    JSON,
    CacheSpec,
    CircuitBreakerSpec,
    Fallback,
    PoolSpec,
    RetryPolicy,
    ScheduleSpec,
    StepSpec,
    Trigger,
    new_step,
)
from .core.steptypes import type_info
from .core.suggest import did_you_mean
from .errors import DefinitionError, Problem
from .steps.binding import Signature, signature_of

_LOCAL = re.compile(r"<locals>|<lambda>")


ExceptionName = str | type[BaseException]


def Retry(max_retries: int = 3, initial_delay: float = 1.0, backoff: float = 2.0,  # noqa: N802
          max_delay: float = 60.0, jitter: float = 0.1,
          retry_on: Sequence[ExceptionName] = (),
          no_retry_on: Sequence[ExceptionName] = ()) -> RetryPolicy:
    """A retry policy for a step; exceptions are given by name or as classes.  Delays
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
class PendingStep:
    """A step added in Python, before its implied dependencies are resolved."""

    id: str
    type: str
    func: Callable[..., object] | None
    config: dict[str, JSON]
    depends_on: tuple[str, ...]
    options: dict[str, Any] = field(default_factory=dict)


# the options of ``Workflow.map`` that belong to its inline step (each item)
ITEM_OPTIONS = ("retry", "timeout", "fallback", "allow_failure", "pool", "circuit_breaker")
STEP_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
STEP_OPTIONS = frozenset({"when", "trigger", "retry", "timeout", "fallback", "allow_failure",
                           "outputs", "circuit_breaker", "pool", "description", "then",
                           "else_", "cache"})


def type_fields(step_type: str, fn: Callable[..., object] | None) -> frozenset[str] | None:
    """The fields ``add_step`` may be given for a step of ``step_type`` (None when the
    type is unknown: validation reports it)."""
    if fn is not None:
        return frozenset({"with", "executor"})  # `call` is the function
    info = type_info(step_type)
    return info.fields if info is not None else None


def refuse_unknown(unknown: Mapping[str, object], allowed: Iterable[str], what: str,
                    where: str) -> NoReturn:
    """DefinitionError naming each unknown keyword argument and the closest allowed one."""
    names = sorted(allowed)
    raise DefinitionError([Problem(
        location=f"{where}.{key}" if where else key,
        message=f"unknown keyword argument {key!r} for {what}",
        hint=did_you_mean(key, names) or f"expected one of {', '.join(names)}")
        for key in unknown])


def call_name(fn: Callable[..., object]) -> str:
    module = getattr(fn, "__module__", None) or "__main__"
    qualname = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", "function")
    return f"{module}:{qualname}"


def schedule_dict(schedule: Mapping[str, Any] | ScheduleSpec) -> object:
    """A schedule as a definition file states it (read by ``parse_schedules``, which
    reports anything that is not a mapping)."""
    if isinstance(schedule, ScheduleSpec):
        return {"cron": schedule.cron, "timezone": schedule.timezone,
                "input": schedule.input, "catch_up": schedule.catch_up}
    return dict(schedule) if isinstance(schedule, Mapping) else schedule


def pool_spec(name: str, body: Mapping[str, Any], problems: list[Problem]) -> PoolSpec:
    from .core.loader import parse_rate

    rate = body.get("rate")
    try:
        parsed = parse_rate(rate) if rate is not None else None
    except ValueError as exc:
        problems.append(Problem(location=f"pools.{name}.rate", message=str(exc)))
        parsed = None
    return PoolSpec(name=name, concurrency=body.get("concurrency"), rate=parsed)


def signature_or_reason(fn: Callable[..., object]) -> Signature | str:
    """The function's signature, or why it has none (a message)."""
    try:
        return signature_of(fn)
    except (TypeError, ValueError) as exc:
        return str(exc)


def implied_dependencies(p: PendingStep, sig: Signature, i: int, ids: set[str],
             writers: Mapping[str, list[str]], props: set[str] | None,
             problems: list[Problem]) -> list[str]:
    """Dependencies implied by the function's parameter names: a step id, or an
    output key another step declares."""
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
                message=f"parameter {name!r} of {call_name(p.func)} (step {p.id!r}) is not "
                f"'input', 'ctx', a step id, a declared output key or an input property"))
    return deps



def value_problems(step: StepSpec, i: int) -> list[Problem]:
    """Where the JSON fields of a step built in Python are not JSON (a set, bytes, a
    lone surrogate...): what the fingerprint and every store need (a definition file is
    checked as a whole by check_data)."""
    fields: list[tuple[str, object]] = [("", step.config), (".when", step.when)]
    if step.fallback is not None:
        fields.append((".fallback.output", step.fallback.output))
    return [Problem(location=f"steps[{i}]{where}{found.short_path}",
                    message=f"value {found.problem}")
            for where, value in fields for found in find_problems(value)]

def step_spec(p: PendingStep, implied: list[str], problems: list[Problem], i: int) -> StepSpec:
    o = p.options
    fallback = o.get("fallback")
    if fallback is not None and not isinstance(fallback, Fallback):
        if callable(fallback):
            fallback = Fallback(call=call_name(fallback), func=fallback)
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
        breaker = CircuitBreakerSpec(**{**breaker, "reset_after": seconds(
            breaker.get("reset_after", 60.0))})
    retry = retry_policy(o.get("retry"))
    cache = o.get("cache")
    if cache is not None and not isinstance(cache, CacheSpec):
        if isinstance(cache, dict) and isinstance(cache.get("key"), str) and "ttl" in cache:
            cache = CacheSpec(key=cache["key"], ttl=seconds(cache["ttl"]) or 0.0)
        else:
            problems.append(Problem(location=f"steps[{i}].cache", message=(
                "expected {'key': '{{ ... }}', 'ttl': duration}")))
            cache = None
    deps = list(dict.fromkeys([*p.depends_on, *implied]))
    return new_step(
        id=p.id, type=p.type, config=p.config, depends_on=tuple(deps),
        when=o.get("when"), trigger=cast(Trigger, o.get("trigger", "default")),
        retry=retry, timeout=seconds(o.get("timeout")),
        fallback=fallback, allow_failure=bool(o.get("allow_failure", False)),
        outputs=tuple(o.get("outputs", ())), circuit_breaker=breaker, pool=o.get("pool"),
        description=o.get("description") or first_paragraph(p.func),
        then=tuple(o.get("then", ())), else_=tuple(o.get("else_", ())), func=p.func,
        cache=cache)


def retry_policy(value: object) -> RetryPolicy:
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


def seconds(value: object) -> float | None:
    return None if value is None else parse_duration(value)


def first_paragraph(fn: Callable[..., object] | None) -> str | None:
    """The first paragraph of a step function's own docstring (its description)."""
    doc = getattr(fn, "__doc__", None) if fn is not None else None
    if not isinstance(doc, str) or not doc.strip():
        return None
    return inspect.cleandoc(doc).split("\n\n")[0]
