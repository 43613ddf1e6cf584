"""The bounds of ``numbers`` checked on a workflow built in Python, where no loader read
its numbers (a definition file's are checked field by field as they are read)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import fields
from itertools import repeat
from operator import attrgetter, is_, is_not

from ..errors import Problem
from .durations import parse_duration
from .model import DEFAULT_RETRY, RetryPolicy, StepSpec, WorkflowSpec
from .numbers import MAX_BACKOFF, MAX_JITTER, real, whole

_Check = Callable[[object], object]


def _count(low: int) -> _Check:
    return lambda value: whole(value, low)


def _duration(value: object) -> object:
    return None if value is None else parse_duration(value)


_RETRY: tuple[tuple[str, _Check], ...] = (
    ("max_retries", _count(0)), ("initial_delay", _duration),
    ("backoff", lambda v: real(v, 1.0, MAX_BACKOFF)), ("max_delay", _duration),
    ("jitter", lambda v: real(v, 0.0, MAX_JITTER)))


def number_problems(spec: WorkflowSpec) -> list[Problem]:
    """A problem for each number of ``spec`` out of its bounds (docs/limits.md)."""
    return list(_problems(spec))


def _problems(spec: WorkflowSpec) -> Iterator[Problem]:
    top: list[tuple[str, object, _Check]] = [
        ("concurrency", spec.concurrency, _count(1)),
        ("timeout", spec.timeout, _duration), ("sla", spec.sla, _duration)]
    top += [(f"limits.{f.name}", getattr(spec.limits, f.name), _count(1))
            for f in fields(spec.limits)
            if getattr(spec.limits, f.name) is not None]  # max_llm_tokens: no bound
    top += [(f"pools.{name}.concurrency", pool.concurrency, _count(1))
            for name, pool in spec.pools.items() if pool.concurrency is not None]
    top += [(name, value, _count(1)) for name, value in (
        ("version", spec.version), ("max_runs_per_key", spec.max_runs_per_key))
        if value is not None]
    yield from _checked(top)
    yield from _step_problems(spec.steps)


def _step_problems(steps: tuple[StepSpec, ...]) -> Iterator[Problem]:
    for i in _steps_to_check(steps):
        step, where = steps[i], f"steps[{i}]"
        yield from _retry_problems(step.retry, f"{where}.retry.")
        found: list[tuple[str, object, _Check]] = [
            (f"{where}.timeout", step.timeout, _duration)]
        if step.circuit_breaker is not None:
            breaker = step.circuit_breaker
            found += [(f"{where}.circuit_breaker.failure_threshold",
                       breaker.failure_threshold, _count(1)),
                      (f"{where}.circuit_breaker.reset_after", breaker.reset_after,
                       _duration)]
        yield from _checked(found)


def _steps_to_check(steps: tuple[StepSpec, ...]) -> list[int]:
    """The steps that may have a number out of bounds (a superset), in order: those
    with a bad retry policy (steps share policies, so each distinct one is judged
    once), a timeout or a circuit breaker.  A graph built by code has none of these
    on most steps, and costs three passes at C speed."""
    flagged: set[int] = set()
    if not all(map(is_, map(_RETRY_OF, steps), repeat(DEFAULT_RETRY))):
        retries = list(map(_RETRY_OF, steps))
        policies = dict(zip(map(id, retries), retries, strict=True))
        bad = {key for key, policy in policies.items()
               if any(_retry_problems(policy, ""))}
        flagged.update(i for i, policy in enumerate(retries) if id(policy) in bad)
    if any(map(is_not, map(_TIMEOUT_OF, steps), repeat(None))) or any(
            map(is_not, map(_BREAKER_OF, steps), repeat(None))):
        flagged.update(i for i, step in enumerate(steps)
                       if step.timeout is not None or step.circuit_breaker is not None)
    return sorted(flagged)


_RETRY_OF = attrgetter("retry")
_TIMEOUT_OF = attrgetter("timeout")
_BREAKER_OF = attrgetter("circuit_breaker")


def _retry_problems(policy: RetryPolicy, where: str) -> Iterator[Problem]:
    yield from _checked([(f"{where}{name}", getattr(policy, name), check)
                         for name, check in _RETRY])


def _checked(items: list[tuple[str, object, _Check]]) -> Iterator[Problem]:
    for location, value, check in items:
        try:
            check(value)
        except (TypeError, ValueError) as exc:
            yield Problem(location=location, message=str(exc))
