"""The built-in step types that need no I/O of their own: python, transform, condition,
delay."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, cast

from ..core import expressions
from ..core.durations import parse_duration
from ..core.model import JSON, StepSpec
from ..core.numbers import MAX_EPOCH, real, shown
from ..core.timestamps import iso
from ..errors import FatalError, SleepRequested
from .binding import (
    ParamPlan,
    compile_plan,
    declared_keys,
    import_call,
    import_untrusted_call,
    invoke,
)
from .procexec import EXECUTORS, process_problem, run_in_process
from .registry import StepCall, StepType, register_step_type
from .types import HTTP_FIELDS, LLM_FIELDS
from .waits import note_wait

if TYPE_CHECKING:
    from ..core.validate import CheckedWorkflow


class PythonStep:
    """A python step's attempt function (``StepType.prepare``), made once per checked
    workflow: its function and parameter plan are worked out at its first attempt and
    kept for every later attempt of every run, so an attempt only moves values.

    Calling it returns the attempt's awaitable, not a coroutine of its own: an async
    step function's coroutine is returned as it is.  Errors binding the parameters
    raise at the call, which the run loop treats like errors raised on await."""

    __slots__ = ("_checked", "_plan", "_process", "_step", "_with", "_with_cheap")

    def __init__(self, step: StepSpec, checked: CheckedWorkflow) -> None:
        self._step, self._checked = step, checked
        given = step.config.get("with")
        self._with = given if given else None
        # a `with` whose templates are not cheap renders in a worker thread
        self._with_cheap = self._with is None or expressions.is_cheap(given)
        self._plan: ParamPlan | None = None
        # `executor: process`: the call's module:function, run in a child process
        self._process = cast(str, step.config.get("call")) \
            if step.config.get("executor") == "process" else None

    def plan(self) -> ParamPlan:
        """The step's function and where each of its parameters comes from (an import
        or signature that fails is tried again at the next attempt)."""
        plan = self._plan
        if plan is None:
            plan = self._plan = _compile(self._step, self._checked)
        return plan

    def __call__(self, call: StepCall) -> Awaitable[JSON]:
        if call.services.trust is not None:  # resolved by the untrusted rule each time
            return self._untrusted(call)
        plan = self._plan or self.plan()
        if self._with is None:
            kwargs = plan.arguments(call.run, call.context) if plan.params else {}
        elif self._with_cheap:
            kwargs = plan.arguments(call.run, call.context, _rendered_with(call))
        else:
            return self._rendered_off_loop(call, plan)
        return self._start(plan, kwargs, call)

    def _start(self, plan: ParamPlan, kwargs: dict[str, object],
               call: StepCall) -> Awaitable[JSON]:
        if self._process is not None:
            return run_in_process(self._process, kwargs, call.step.id)
        return _start(plan, kwargs, call)

    def _untrusted(self, call: StepCall) -> Awaitable[JSON]:
        """An attempt on an engine with rules for untrusted definitions: the function
        must be defined in the module the call names (never an attribute path), and
        its plan is not kept (a trusted engine may share this checked workflow)."""
        plan = _compile(self._step, self._checked, untrusted=True)
        if self._with is None:
            return self._start(plan, plan.arguments(call.run, call.context), call)
        return self._rendered_off_loop(call, plan)

    async def _rendered_off_loop(self, call: StepCall, plan: ParamPlan) -> JSON:
        given = await call.rendered(_rendered_with)
        return await self._start(plan, plan.arguments(call.run, call.context, given), call)


def _compile(step: StepSpec, checked: CheckedWorkflow, *,
             untrusted: bool = False) -> ParamPlan:
    fn = step.func
    if fn is None:
        resolve = import_untrusted_call if untrusted else import_call
        try:
            fn = resolve(cast(str, step.config.get("call")))
        except ImportError as exc:
            raise FatalError(f"step {step.id!r}: {exc}", step=step.id) from exc
    given = step.config.get("with")
    plan = compile_plan(fn, step_id=step.id, steps=checked.graph.index,
                        declared=declared_keys(checked),
                        given=given if isinstance(given, dict) else ())
    if step.config.get("executor") == "process":
        problem = process_problem(fn, cast(str, step.config["call"]))
        if problem is not None:
            raise FatalError(f"step {step.id!r}: {problem}", step=step.id)
    return plan


def _start(plan: ParamPlan, kwargs: dict[str, object], call: StepCall) -> Awaitable[JSON]:
    # the engine checks that the value is JSON (ensure_json) before storing it
    if plan.is_async:
        return cast("Awaitable[JSON]", plan.fn(**kwargs))
    return cast("Awaitable[JSON]", invoke(plan.fn, kwargs, call.services.executor,
                                          is_async=False))


def run_python(call: StepCall) -> Awaitable[JSON]:
    """One attempt of a python step outside a run loop's prepared steps (the loop
    calls the step's ``PythonStep``, made once per checked workflow)."""
    return PythonStep(call.step, call.run.checked)(call)


def _rendered_with(call: StepCall) -> dict[str, JSON]:
    step = call.step
    rendered = call.render(step.config.get("with"), "with")
    if not isinstance(rendered, dict):
        raise FatalError(f"step {step.id!r}: `with` must render to a mapping", step=step.id)
    return rendered


def _check_python(config: Mapping[str, JSON]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    target = config.get("call")
    if target is not None and (not isinstance(target, str) or ":" not in target
                               or target.startswith(":") or target.endswith(":")):
        out.append((".call", f"expected 'module:function', got {target!r}"))
    given = config.get("with")
    if given is not None and not isinstance(given, dict):
        out.append((".with", "expected a mapping of keyword arguments"))
    executor = config.get("executor")
    if executor is not None and executor not in EXECUTORS:
        out.append((".executor", f"expected 'thread' (the default) or 'process', got "
                                 f"{executor!r}"))
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
    """Wait until the step's deadline, holding nothing: before it, the attempt ends
    and the step waits like ``ctx.sleep`` (``steps.waits``), then runs again.  The
    deadline counts from the step's first start, so an attempt re-run after a crash
    waits only for what is left."""
    target = await call.rendered(_delay_target)
    if target > time.time():
        step = call.step.id
        note_wait(call.run.step_log, step, {"kind": "sleep", "event": None,
                                            "until": iso(target), "due": target,
                                            "attempt": call.attempt})
        raise SleepRequested(step, "delay", target)
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
    try:
        return until_seconds(value)
    except ValueError as exc:
        raise FatalError(f"step {step_id!r}: `until` {exc}", step=step_id) from None


def until_seconds(value: JSON) -> float:
    """The epoch seconds of a delay's ``until``: an ISO-8601 time or epoch seconds, from
    1970 to the end of year 9999 (``MAX_EPOCH``); ValueError otherwise."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return real(value, 0, MAX_EPOCH)
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            if moment.tzinfo is None:
                moment = moment.astimezone()
            return real(moment.timestamp(), 0, MAX_EPOCH)
    raise ValueError(f"must be an ISO-8601 time or epoch seconds, got {shown(value)}")


def _check_delay(config: Mapping[str, JSON]) -> list[tuple[str, str]]:
    if ("duration" in config) == ("until" in config):
        return [("", "a delay step needs exactly one of `duration` or `until`")]
    field = "duration" if "duration" in config else "until"
    value = config[field]
    if isinstance(value, str) and expressions.is_template(value):
        return []
    try:
        (parse_duration if field == "duration" else until_seconds)(value)
    except ValueError as exc:
        return [(f".{field}", str(exc))]
    return []


def _check_http(config: Mapping[str, JSON]) -> list[tuple[str, str]]:
    from .http import check_http  # imported with the first definition that has one

    return check_http(config)


async def _run_http(call: StepCall) -> JSON:
    from .http import run_http

    return await run_http(call)


def _check_llm(config: Mapping[str, JSON]) -> list[tuple[str, str]]:
    from .llm import check_llm  # imported with the first definition that has one

    return check_llm(config)


async def _run_llm(call: StepCall) -> JSON:
    from .llm import run_llm

    return await run_llm(call)


_registered = False


def ensure_builtins() -> None:
    """Register the built-in types unless that was done (a definition type registered
    since under a built-in name stays)."""
    if not _registered:
        register_builtins()


def register_builtins() -> None:
    global _registered
    _registered = True
    register_step_type(StepType(name="python", run=run_python, prepare=PythonStep,
                                fields=frozenset({"call", "with", "executor"}),
                                required=frozenset({"call"}), check=_check_python,
                                literal_fields=frozenset({"call", "executor"}),
                                imports_call=True))
    register_step_type(StepType(name="transform", run=run_transform,
                                fields=frozenset({"value"}), required=frozenset({"value"}),
                                inline=transform_inline))
    register_step_type(StepType(name="condition", run=run_condition,
                                fields=frozenset({"if", "then", "else"}),
                                required=frozenset({"if"}), check=_check_condition,
                                inline=condition_inline, branches=True))
    register_step_type(StepType(name="delay", run=run_delay,
                                fields=frozenset({"duration", "until"}),
                                check=_check_delay, only_waits=True))
    register_step_type(StepType(name="http", run=_run_http, fields=HTTP_FIELDS,
                                required=frozenset({"url"}), check=_check_http))
    register_step_type(StepType(name="llm", run=_run_llm, fields=LLM_FIELDS,
                                required=frozenset({"base_url", "model", "api_key_env"}),
                                check=_check_llm, literal_fields=frozenset({"api_key_env"})))
    from .approval import register_approval
    from .event_step import register_event
    from .map import register_map
    from .subworkflow import register_subworkflows

    register_approval()
    register_event()
    register_subworkflows()
    register_map()
