"""What a step's code sees of its run: ``StepContext``, its logger and its cancel flag."""

from __future__ import annotations

import collections
import logging
import sys
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.bounds import Stop
from ..core.model import JSON, JSONDict

_log = logging.getLogger("plait.step")

# Bounds on what one run keeps of its steps' log records between two commits: a step
# logging in a tight loop must not exhaust memory (what is dropped is counted).
MAX_PENDING_RECORDS = 10_000
MAX_MESSAGE_CHARS = 8_192


class StepLog:
    """The log records of a run's steps waiting to be stored in its history.

    Steps append from any thread (a sync step logs from its worker thread); only the run
    loop drains, putting the records in its next write batch, so no thread but the
    loop's ever touches the store.  Each record becomes a history note
    ``{"log": {"level", "message", "attempt", "at"}}`` of its step."""

    def __init__(self, redact: Callable[[str | None], str | None]) -> None:
        self.redact = redact
        self._records: collections.deque[tuple[str | None, JSONDict]] = collections.deque()
        self._dropped = 0

    @property
    def pending(self) -> bool:
        return bool(self._records) or self._dropped > 0

    def add(self, step_id: str, attempt: int, level: int, message: str) -> None:
        if len(self._records) >= MAX_PENDING_RECORDS:
            self._dropped += 1  # a lost update under a race only miscounts the drops
            return
        if len(message) > MAX_MESSAGE_CHARS:
            message = message[:MAX_MESSAGE_CHARS] + f"... ({len(message)} characters)"
        self._records.append((step_id, {"log": {
            "level": logging.getLevelName(level), "message": message, "attempt": attempt,
            "at": time.time()}}))

    def drain(self) -> list[tuple[str | None, JSONDict]]:
        """The records added so far, oldest first (called by the run loop only)."""
        records = self._records
        out = [records.popleft() for _ in range(len(records))]  # deque ops are atomic
        if self._dropped:
            dropped, self._dropped = self._dropped, 0
            out.append((None, {"log": {
                "level": "WARNING", "attempt": None, "at": time.time(),
                "message": f"{dropped} step log records were dropped: more than "
                           f"{MAX_PENDING_RECORDS} were waiting to be stored"}}))
        return out


class StepLogger(logging.LoggerAdapter[logging.Logger]):
    """``ctx.logger``: a logger whose records are redacted (secrets, in every form),
    kept in the run's history (INFO and above, or lower when ``plait.step`` is enabled
    for it) and passed to the ``plait.step`` logger, which the CLI shows on stderr from
    WARNING up."""

    def __init__(self, journal: StepLog | None, *, run_id: str, step_id: str,
                 attempt: int) -> None:
        super().__init__(_log, {"run_id": run_id, "step_id": step_id, "attempt": attempt})
        self._journal = journal
        self._step_id, self._attempt = step_id, attempt

    def log(self, level: int, msg: object, *args: object, exc_info: Any = None,
            stack_info: bool = False, stacklevel: int = 1,
            extra: Mapping[str, object] | None = None, **kwargs: Any) -> None:
        shown = self.logger.isEnabledFor(level)
        if not shown and (level < logging.INFO or self._journal is None):
            return
        text = _message(msg, args) + _exception_text(exc_info)
        if self._journal is not None:
            text = self._journal.redact(text) or ""
            self._journal.add(self._step_id, self._attempt, level, text)
        if shown:
            # the text is already formatted and redacted: no args, no raw traceback
            self.logger.log(level, "step %s (attempt %d): %s", self._step_id,
                            self._attempt, text, extra={**(self.extra or {}), **(extra or {})},
                            stack_info=stack_info, stacklevel=stacklevel + 1)


def _message(msg: object, args: tuple[object, ...]) -> str:
    """``msg % args`` as logging would; a bad format is shown, not raised."""
    text = str(msg)
    if not args:
        return text
    # logging's "%(name)s" form: one non-empty mapping is the mapping
    values = args[0] if len(args) == 1 and isinstance(args[0], Mapping) and args[0] \
        else args
    try:
        return text % values
    except (TypeError, ValueError, KeyError) as exc:
        return f"{text} {args!r} (could not format: {exc})"


def _exception_text(exc_info: object) -> str:
    if not exc_info:
        return ""
    if isinstance(exc_info, BaseException):
        error: BaseException | None = exc_info
    elif isinstance(exc_info, tuple) and len(exc_info) == 3:
        error = exc_info[1]
    else:
        error = sys.exception()
    if error is None:
        return ""
    return "\n" + "".join(traceback.format_exception(error)).rstrip()


@dataclass(frozen=True, slots=True, kw_only=True)
class StepContext:
    """Passed to a step function that declares a ``ctx`` parameter.

    ``idempotency_key`` is the same for every attempt of a step in a run (including an
    attempt re-run after a crash), so external side effects can be deduplicated.

    ``logger`` records go to the run's history (``plait show`` lists them per step) with
    every secret redacted, and to the ``plait.step`` logger (stderr from WARNING up on
    the CLI).

    ``cancelled`` becomes true when the attempt is cancelled (the run is cancelled, a
    ``fail_fast`` failure stops it, the step's ``timeout`` passes).  An async step is
    interrupted at its next ``await``; a sync step runs in a thread, which Python cannot
    interrupt: its body runs on to its end unless it checks ``ctx.cancelled`` and
    returns.  Whatever it returns after that is discarded."""

    run_id: str
    step_id: str
    attempt: int
    idempotency_key: str
    input: JSON
    state: Mapping[str, JSON]
    outputs: Mapping[str, JSON]
    journal: StepLog | None = field(default=None, repr=False, compare=False)
    cancel_flag: Stop | None = field(default=None, repr=False, compare=False)
    _logger: StepLogger | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def logger(self) -> StepLogger:
        """Built on first use: most steps never log."""
        logger = self._logger
        if logger is None:
            logger = StepLogger(self.journal, run_id=self.run_id, step_id=self.step_id,
                                attempt=self.attempt)
            object.__setattr__(self, "_logger", logger)  # a cache, not state: frozen holds
        return logger

    @property
    def cancelled(self) -> bool:
        """True once the attempt was cancelled or timed out (poll it in long sync
        steps, and return when it is)."""
        return self.cancel_flag is not None and self.cancel_flag.requested


def make_context(*, run_id: str, step_id: str, attempt: int, input: JSON,
                 state: Mapping[str, JSON], outputs: Mapping[str, JSON],
                 journal: StepLog | None = None,
                 cancel_flag: Stop | None = None) -> StepContext:
    return StepContext(run_id=run_id, step_id=step_id, attempt=attempt,
                       idempotency_key=f"{run_id}:{step_id}", input=input, state=state,
                       outputs=outputs, journal=journal, cancel_flag=cancel_flag)
