"""The built-in step types that need no I/O of their own: python, transform, condition,
delay."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import cast

from ..core import expressions
from ..core.durations import parse_duration
from ..core.model import JSON, StepSpec
from ..errors import FatalError, StepError
from ..runtime.binding import bind, import_call, invoke, signature_of
from ..runtime.results import iso
from .registry import StepCall, StepType, register_step_type
from .types import HTTP_FIELDS


def _function(call: StepCall) -> Callable[..., object]:
    step = call.step
    if step.func is not None:
        return step.func
    target = step.config.get("call")
    try:
        return import_call(cast(str, target))
    except ImportError as exc:
        raise FatalError(f"step {step.id!r}: {exc}", step=step.id) from exc


def run_python(call: StepCall) -> Awaitable[JSON]:
    """The attempt's awaitable.  Not a coroutine itself: an async step function's own
    coroutine is returned as it is (one coroutine less per attempt); errors binding the
    parameters raise here, which the run loop treats like errors raised on await."""
    step = call.step
    given = step.config.get("with")
    if given and not expressions.is_cheap(given):
        return _python_rendered_off_loop(call)
    fn = step.func if step.func is not None else _function(call)
    return _python_call(call, fn, _rendered_with(call) if given else None)


async def _python_rendered_off_loop(call: StepCall) -> JSON:
    given = await call.rendered(_rendered_with)
    fn = call.step.func if call.step.func is not None else _function(call)
    return await _python_call(call, fn, given)


def _rendered_with(call: StepCall) -> dict[str, JSON]:
    step = call.step
    rendered = call.render(step.config.get("with"), "with")
    if not isinstance(rendered, dict):
        raise FatalError(f"step {step.id!r}: `with` must render to a mapping", step=step.id)
    return rendered


def _python_call(call: StepCall, fn: Callable[..., object],
                 given: dict[str, JSON] | None) -> Awaitable[JSON]:
    step = call.step
    sig = signature_of(fn)
    if given:
        kwargs = bind(fn, given, call.resolve, step.id)
    elif sig.params:
        kwargs = bind(fn, {}, call.resolve, step.id)
    else:
        kwargs = {}
    # the engine checks that the value is JSON (ensure_json) before storing it
    if sig.is_async:
        return cast("Awaitable[JSON]", fn(**kwargs))
    return cast("Awaitable[JSON]", invoke(fn, kwargs, call.services.executor))


def direct_python(step: StepSpec) -> Callable[[], Awaitable[JSON]] | None:
    """An async function given in Python with no parameters and no ``with``: its own
    coroutine is the attempt, with no binding to do (what ``run_python`` would return)."""
    fn = step.func
    if fn is None or step.config.get("with"):
        return None
    try:
        sig = signature_of(fn)
    except (TypeError, ValueError):
        return None
    if sig.params or not sig.is_async:
        return None
    return cast("Callable[[], Awaitable[JSON]]", fn)


def _check_python(config: Mapping[str, JSON]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    target = config.get("call")
    if target is not None and (not isinstance(target, str) or ":" not in target
                               or target.startswith(":") or target.endswith(":")):
        out.append((".call", f"expected 'module:function', got {target!r}"))
    given = config.get("with")
    if given is not None and not isinstance(given, dict):
        out.append((".with", "expected a mapping of keyword arguments"))
    return out


def transform_inline(call: StepCall) -> JSON:
    return call.render(call.step.config.get("value"), "value")


async def run_transform(call: StepCall) -> JSON:
    return await call.rendered(transform_inline)


def condition_inline(call: StepCall) -> JSON:
    raw = call.step.config.get("if")
    value = call.render(raw, "if")
    return {"result": expressions.truthy(value)}


async def run_condition(call: StepCall) -> JSON:
    return await call.rendered(condition_inline)


def _check_condition(config: Mapping[str, JSON]) -> list[tuple[str, str]]:
    cond = config.get("if")
    if cond is not None and not isinstance(cond, str | bool):
        return [(".if", f"expected a template or a boolean, got {cond!r}")]
    return []


async def run_delay(call: StepCall) -> JSON:
    """Sleep until the step's deadline.  The deadline counts from the step's first
    start, so an attempt re-run after a crash waits only for what is left."""
    target = await call.rendered(_delay_target)
    remaining = target - time.time()
    if remaining > 0:
        await asyncio.sleep(remaining)
    return {"waited_until": iso(target)}


def _delay_target(call: StepCall) -> float:
    config = call.step.config
    if "until" in config:
        return _parse_until(call.render(config["until"], "until"), call.step.id)
    raw = call.render(config.get("duration"), "duration")
    try:
        return call.started_at + parse_duration(raw)
    except ValueError as exc:
        raise FatalError(f"step {call.step.id!r}: {exc}", step=call.step.id) from exc


def _parse_until(value: JSON, step_id: str) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            if moment.tzinfo is None:
                moment = moment.astimezone()
            return moment.timestamp()
    raise StepError(f"step {step_id!r}: `until` must be an ISO-8601 time or epoch seconds, "
                    f"got {value!r}", step=step_id)


def _check_delay(config: Mapping[str, JSON]) -> list[tuple[str, str]]:
    if ("duration" in config) == ("until" in config):
        return [("", "a delay step needs exactly one of `duration` or `until`")]
    duration = config.get("duration")
    if isinstance(duration, str) and expressions.is_template(duration):
        return []
    if duration is not None:
        try:
            parse_duration(duration)
        except ValueError as exc:
            return [(".duration", str(exc))]
    return []


def _check_http(config: Mapping[str, JSON]) -> list[tuple[str, str]]:
    from .http import check_http  # imported with the first definition that has one

    return check_http(config)


async def _run_http(call: StepCall) -> JSON:
    from .http import run_http

    return await run_http(call)


def register_builtins() -> None:
    register_step_type(StepType(name="python", run=run_python, direct=direct_python,
                                fields=frozenset({"call", "with"}),
                                required=frozenset({"call"}), check=_check_python,
                                literal_fields=frozenset({"call"})))
    register_step_type(StepType(name="transform", run=run_transform,
                                fields=frozenset({"value"}), required=frozenset({"value"}),
                                inline=transform_inline))
    register_step_type(StepType(name="condition", run=run_condition,
                                fields=frozenset({"if", "then", "else"}),
                                required=frozenset({"if"}), check=_check_condition,
                                inline=condition_inline))
    register_step_type(StepType(name="delay", run=run_delay,
                                fields=frozenset({"duration", "until"}),
                                check=_check_delay))
    register_step_type(StepType(name="http", run=_run_http, fields=HTTP_FIELDS,
                                required=frozenset({"url"}), check=_check_http))
    from .approval import register_approval

    register_approval()
