"""Running one attempt of a step in this process, to its ``Outcome``.

The supervised step boundary: the step's circuit breaker is asked first, then the
step's attempt function (or its fallback) runs under the step's timeout; its value is
checked to be JSON within the run's output limit; every exception becomes error info;
a cancellation by plait is reported as ``cancelled`` and raised on, never swallowed.
The breaker is told how an attempt it let through ended (``Breakers.settle``).
What the outcome means for the run is the run loop's business, not the runner's.
"""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import Awaitable, Callable, Sequence

from ..core.jsoncheck import clean_text, ensure_json
from ..core.model import JSON, CircuitBreakerSpec
from ..core.retry import ErrorInfo, finite_seconds
from ..core.validate import CheckedWorkflow
from ..errors import CircuitOpenError, ProcessStepFailed, StepError, StepTimeout
from ..steps.binding import compile_plan, declared_keys, import_call, import_untrusted_call, invoke
from ..steps.registry import StepCall, StepFunction, get_step_type
from . import stepcache
from .breakers import breakers_for, holder_of
from .untrusted import refusal
from .worksource import Outcome, OutcomeKind, Report, Reported


def error_info(exc: BaseException) -> ErrorInfo:
    """What the core is told of an exception (its class names decide retry policies),
    every part of it storable: a lone surrogate in a text is stored as U+FFFD, a
    ``retry_after`` that is not a finite number of seconds is dropped, a message that
    cannot be made (``__str__`` raised) is named."""
    kind = type(exc)
    if isinstance(exc, ProcessStepFailed):  # raised in a child: its classes, its trace
        names = tuple(map(clean_text, exc.names))
        tb = clean_text(exc.child_traceback or "")
    else:
        names = tuple(clean_text(c.__name__) for c in kind.__mro__
                      if c not in (object, BaseException, Exception))
        tb = clean_text("".join(traceback.format_exception(exc, limit=-8))[-4000:])
    return ErrorInfo(type=names[0] if names else clean_text(kind.__name__),
                     message=clean_text(_message_of(exc)), names=names,
                     retryable=_retryable(exc),
                     retry_after=finite_seconds(getattr(exc, "retry_after", None)),
                     traceback=tb)


def _message_of(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - a step's own exception class: named instead
        return f"<{type(exc).__name__} whose message could not be made (str() raised)>"


def _retryable(exc: BaseException) -> bool:
    if not isinstance(exc, StepError):
        return True
    try:
        return bool(getattr(exc, "retryable", True))
    except Exception:  # noqa: BLE001 - a subclass's own property raised
        return True


def failed(call: StepCall, exc: Exception, fallback: bool) -> Outcome:
    """The outcome of an attempt that raised ``exc`` (a CircuitOpenError: ``refused``)."""
    kind: OutcomeKind = "refused" if isinstance(exc, CircuitOpenError) else "error"
    return Outcome(call.index, call.attempt, kind, None, error_info(exc), fallback)


def attempt_functions(checked: CheckedWorkflow) -> tuple[StepFunction, ...]:
    """Per step, what an attempt calls: its type's ``prepare`` answer, else its ``run``
    (worked out once per checked workflow, not once per run)."""
    return checked.derive("attempt_functions", lambda: _attempt_functions(checked))


def _attempt_functions(checked: CheckedWorkflow) -> tuple[StepFunction, ...]:
    steps = checked.spec.steps
    types = (get_step_type(s.type) for s in steps)
    return tuple(t.run if t.prepare is None else t.prepare(s, checked)
                 for s, t in zip(steps, types, strict=True))


def item_function(checked: CheckedWorkflow, step_id: str) -> StepFunction:
    """What an attempt of a map's item (``fetch[3]``) calls: its inline step's attempt
    function, worked out once per map step of a checked workflow."""
    map_id = step_id.partition("[")[0]
    return checked.derive(f"item_function:{map_id}", lambda: _item_function(checked, map_id))


def _item_function(checked: CheckedWorkflow, map_id: str) -> StepFunction:
    item = checked.spec.steps[checked.graph.index[map_id]].item
    assert item is not None
    kind = get_step_type(item.type)
    return kind.run if kind.prepare is None else kind.prepare(item, checked)


class AttemptRunner:
    """Runs the attempts of one run's steps and reports each one's outcome.

    Made once per run; ``run(call, fallback)`` is the whole body of an attempt's task.
    ``runs``: ``attempt_functions`` of the run's checked workflow."""

    __slots__ = ("_clock", "_max_output_bytes", "_report", "_runs")

    def __init__(self, runs: Sequence[StepFunction], max_output_bytes: int,
                 clock: Callable[[], float], report: Report) -> None:
        self._runs = runs
        self._max_output_bytes = max_output_bytes
        self._clock = clock
        self._report = report

    async def run(self, call: StepCall, fallback: bool) -> None:
        step = call.step
        value: JSON = None
        outcome: Reported
        guarded: CircuitBreakerSpec | None = None  # the breaker that let it through
        try:
            if call.services.trust is not None:  # the server's rules, before anything
                refused = refusal(call.run.checked, call.services.trust, step.id)
                if refused is not None:
                    raise refused
            if step.circuit_breaker is not None and not fallback:
                guarded = await self._admit(call, step.circuit_breaker)
            runs, i = self._runs, call.index
            run = runs[i] if i < len(runs) else item_function(call.run.checked, step.id)
            lookup: stepcache.CacheLookup | None = None
            awaitable: Awaitable[JSON]
            if fallback:
                awaitable = self._fallback(call)
            elif step.cache is not None:
                lookup = stepcache.CacheLookup("")
                awaitable = stepcache.through_cache(call, run, lookup, self._clock)
            else:
                awaitable = run(call)
            if step.timeout is not None:
                scope = asyncio.timeout(step.timeout)
                try:
                    async with scope:
                        value = await awaitable
                except TimeoutError:
                    if scope.expired():  # ours, not a TimeoutError raised by the step
                        call.stop()
                        raise StepTimeout(step.timeout, step=step.id) from None
                    raise
            else:
                value = await awaitable
            if value is not None:
                value = ensure_json(value, step=step.id, max_bytes=self._max_output_bytes)
            if lookup is not None and not lookup.hit:
                await stepcache.keep(call, lookup.key, value, self._clock)
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                call.stop()
                self._report(Outcome(call.index, call.attempt, "cancelled", None, None,
                                     fallback))
                if guarded is not None:  # a trial it held is let go at once
                    await self._settle(call, guarded, "cancelled", None)
                raise  # plait cancelled this attempt: never swallowed
            # raised by the step's own code, nobody cancelled the attempt: a failure
            outcome = failed(call, StepError(f"the step raised CancelledError: {exc}",
                                             step=step.id), fallback)
        except Exception as exc:  # noqa: BLE001 - the supervised step boundary
            outcome = failed(call, exc, fallback)
        else:
            # a plain tuple: the hot path (see Outcome)
            outcome = (call.index, call.attempt, "ok", value, None, fallback)
        if guarded is not None:  # told before the outcome is, so the next attempt sees it
            try:
                await self._settle(call, guarded, outcome[2], outcome[4])
            except asyncio.CancelledError:
                self._report(outcome)  # cancelled meanwhile: the outcome still stands
                raise
        report = self._report  # (a local: see LocalSource.start)
        report(outcome)

    async def _admit(self, call: StepCall, spec: CircuitBreakerSpec) -> CircuitBreakerSpec:
        """``spec`` when its breaker lets the attempt start (taking the trial if it is
        one), else CircuitOpenError."""
        holder = holder_of(call.run.run_id, call.step.id, call.attempt)
        if not await breakers_for(call.services.store).allow(spec, self._clock(), holder):
            raise CircuitOpenError(spec.key, step=call.step.id)
        return spec

    async def _settle(self, call: StepCall, spec: CircuitBreakerSpec, kind: str,
                      error: ErrorInfo | None) -> None:
        waits = error is not None and ("ApprovalRequested" in error.names
                                       or "WaitRequested" in error.names)
        await breakers_for(call.services.store).settle(
            spec, holder_of(call.run.run_id, call.step.id, call.attempt), kind, waits,
            self._clock())

    @staticmethod
    async def _fallback(call: StepCall) -> JSON:
        fb = call.step.fallback
        assert fb is not None
        if fb.call is None and fb.func is None:  # `output:` whose templates are not cheap
            output = fb.output
            return await call.rendered(lambda c: c.render(output, "fallback.output"),
                                       fields=output)
        if fb.func is not None:
            fn = fb.func
        elif call.services.trust is not None:  # defined where it is named
            fn = import_untrusted_call(fb.call or "")
        else:
            fn = import_call(fb.call or "")
        run = call.run
        # a fallback runs at most once per step and run: its plan is not kept
        plan = compile_plan(fn, step_id=call.step.id, steps=run.checked.graph.index,
                            declared=declared_keys(run.checked), error=True)
        kwargs = plan.arguments(run, call.context, error=run.step_error(call.index))
        return await invoke(fn, kwargs, run.services.executor,  # type: ignore[return-value]
                            is_async=plan.is_async)
