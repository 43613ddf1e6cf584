"""Retry decisions: pure functions of the policy, the attempt and the error."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from operator import attrgetter

from .model import JSONDict, RetryPolicy, StepSpec

MAX_RETRY_AFTER = 86_400.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorInfo:
    """What the core needs to know of an attempt's failure (built at the runtime edge)."""

    type: str  # exception class name
    message: str
    names: tuple[str, ...] = ()  # class names along the exception's MRO
    retryable: bool = True
    retry_after: float | None = None  # seconds, e.g. from an HTTP Retry-After header
    traceback: str | None = None

    def __str__(self) -> str:
        return f"{self.type}: {self.message}" if self.message else self.type

    def to_json(self, *, refused: bool = False) -> JSONDict:
        """This error as a stored JSON object (``from_json`` reads it back); ``refused``
        marks an output the step's checks refused."""
        value: JSONDict = {"type": self.type, "message": self.message,
                           "names": list(self.names), "retryable": self.retryable,
                           "retry_after": self.retry_after, "traceback": self.traceback}
        if refused:
            value["refused"] = True
        return value

    @classmethod
    def from_json(cls, value: JSONDict | None) -> ErrorInfo:
        """A stored JSON error as the core reads it (any shape a store may hold: missing
        or mistyped parts take their defaults)."""
        value = value or {}
        names = value.get("names")
        traceback = value.get("traceback")
        return cls(
            type=str(value.get("type") or "Error"), message=str(value.get("message") or ""),
            names=tuple(str(n) for n in names) if isinstance(names, list) else (),
            retryable=value.get("retryable") is not False,
            retry_after=finite_seconds(value.get("retry_after")),
            traceback=traceback if isinstance(traceback, str) else None)


def finite_seconds(value: object) -> float | None:
    """A ``retry_after`` as the core takes it: a finite number of seconds, else None
    (NaN, infinity, a bool or anything else is dropped, never stored)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        seconds = float(value)
    except OverflowError:  # an int past a float's range
        return None
    return seconds if math.isfinite(seconds) else None


def retry_delay(policy: RetryPolicy, retry_number: int, rand: float) -> float:
    """Seconds to wait before retry ``retry_number`` (1-based).

    ``min(initial_delay * backoff**(n-1), max_delay)`` plus up to ``jitter`` of it, where
    ``rand`` in [0, 1) says how much (passed in so the core stays deterministic)."""
    base = min(_grown(policy.initial_delay, policy.backoff, retry_number - 1),
               policy.max_delay)
    return base + base * policy.jitter * rand


def _grown(initial: float, backoff: float, times: int) -> float:
    """``initial * backoff**times``, infinite where the power overflows a float (a step
    with many retries): ``min`` with ``max_delay`` then gives ``max_delay``."""
    if initial == 0 or backoff == 1:
        return initial
    try:
        return initial * backoff**times
    except OverflowError:
        return math.inf


def should_retry(policy: RetryPolicy, attempts_made: int, error: ErrorInfo) -> bool:
    """True when another attempt is allowed after ``attempts_made`` attempts failed."""
    if attempts_made > policy.max_retries or not error.retryable:
        return False
    names = {*error.names, error.type, *_EVERY_ERROR}
    if policy.no_retry_on and names & _class_names(policy.no_retry_on):
        return False
    if policy.retry_on:
        return bool(names & _class_names(policy.retry_on))
    return True


# every step error is an Exception, though ErrorInfo.names leaves out these bases
_EVERY_ERROR = ("Exception", "BaseException")


def _class_names(names: tuple[str, ...]) -> set[str]:
    """The class names a policy's exception names match: a dotted path
    (``package.module.ClassName``) matches by its class name."""
    return {name.rpartition(".")[2] for name in names}


def next_delay(policy: RetryPolicy, attempts_made: int, error: ErrorInfo,
               rand: float) -> float | None:
    """Delay before the next attempt, or None when the step's retries are spent."""
    if not should_retry(policy, attempts_made, error):
        return None
    delay = retry_delay(policy, attempts_made, rand)
    if error.retry_after is not None:
        # The server said when to come back: honour it even past max_delay (bounded
        # by a day so a bogus header cannot park a step forever).
        delay = max(delay, min(error.retry_after, MAX_RETRY_AFTER))
    return delay


_EXCEPTION_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def is_exception_name(value: object) -> bool:
    """True for what may name an exception: ``ValueError``, ``package.module.Class``."""
    return isinstance(value, str) and _EXCEPTION_NAME.fullmatch(value) is not None


def policies_naming_exceptions(steps: Iterable[StepSpec]) -> dict[int, RetryPolicy]:
    """The distinct retry policies of ``steps`` that name exceptions, by ``id``
    (steps share policy objects; ids hash faster than the frozen policies do)."""
    policies = list(map(_RETRY, steps))
    distinct = dict(zip(map(id, policies), policies, strict=True))
    return {key: p for key, p in distinct.items() if p.retry_on or p.no_retry_on}


_RETRY = attrgetter("retry")
