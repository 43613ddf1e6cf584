"""What a step's code sees of its run: ``StepContext``, its logger and its cancel flag."""

from __future__ import annotations

import asyncio
import collections
import logging
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, cast

from ..core.bounds import Stop
from ..core.jsoncheck import clean_text, storable
from ..core.model import JSON, JSONDict, RetryPolicy

if TYPE_CHECKING:
    from .journal import CallJournal

_log = logging.getLogger("plait.step")

# Bounds on what one run keeps of its steps' log records between two commits: a step
# logging in a tight loop must not exhaust memory (what is dropped is counted).
MAX_PENDING_RECORDS = 10_000
MAX_MESSAGE_CHARS = 8_192
MAX_EMIT_BYTES = 1 << 20  # of one ctx.emit value as JSON text
MAX_NOTE_BYTES = 1 << 20  # of any other history note as JSON text (usage, wait, cache)
MAX_ATTEMPT_RECORDS = 1_000  # per attempt executed on a worker (AttemptLogs)


class StepLog:
    """The log records of a run's steps waiting to be stored in its history.

    Steps append from any thread (a sync step logs from its worker thread); only the run
    loop drains, putting the records in its next write batch, so no thread but the
    loop's ever touches the store.  Each record becomes a history note
    ``{"log": {"level", "message", "attempt", "at"}}`` of its step."""

    def __init__(self, redact: Callable[[str | None], str | None],
                 redacting: Callable[[], bool] | None = None) -> None:
        """``redacting``: whether ``redact`` has anything to redact at the moment (a
        secret used; ``Secrets.redacting``), so that a value is not walked and copied
        for nothing; None: always walk."""
        self.redact = redact
        self._redacting = redacting
        # the steps whose attempt took its output from the step cache (runtime.stepcache)
        self.cache_hits: set[str] = set()
        # ctx.wait_for_approval: what a step asked (step -> {prompt, timeout,
        # on_timeout}), read by the loop when the attempt ends; and the approvals the
        # loop applied (step -> decision), read by the step's next attempt
        self.wait_requests: dict[str, JSONDict] = {}
        self.decisions: dict[str, JSONDict] = {}
        self._records: collections.deque[tuple[str | None, JSONDict]] = collections.deque()
        self._dropped = 0
        # called (from any thread) when an ``emit`` note is added: whoever stores the
        # notes stores it soon, not only with the attempt's end (the run loop, a worker)
        self.on_emit: Callable[[], None] | None = None

    @property
    def pending(self) -> bool:
        return bool(self._records) or self._dropped > 0

    def add(self, step_id: str, attempt: int, level: int, message: str) -> None:
        if len(self._records) >= MAX_PENDING_RECORDS:
            self._dropped += 1  # a lost update under a race only miscounts the drops
            return
        self._records.append((step_id, {"log": log_record(attempt, level, message)}))

    def note(self, step_id: str, data: JSONDict) -> None:
        """A history note of the step (e.g. an llm attempt's token usage), stored with
        the loop's next batch; its text is redacted like a log record's."""
        if len(self._records) >= MAX_PENDING_RECORDS:
            self._dropped += 1
            return
        self._records.append((step_id, note_data(data, self.redact)))
        if "emit" in data and self.on_emit is not None:
            self.on_emit()

    def redact_json(self, value: JSON) -> JSON:
        """``value`` with every secret redacted from its text (keys and strings); the
        value itself when there is no secret to redact."""
        if self._redacting is not None and not self._redacting():
            return value
        return _redact_json(value, self.redact)  # type: ignore[no-any-return]

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


def log_record(attempt: int, level: int, message: str) -> JSONDict:
    """One ``ctx.logger`` record as history keeps it (the ``log`` of a note): a long
    message is cut, and a lone surrogate in it (a file name decoded with
    ``surrogateescape``) becomes U+FFFD, the record saying so in ``cleaned``."""
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[:MAX_MESSAGE_CHARS] + f"... ({len(message)} characters)"
    record: JSONDict = {"level": str(logging.getLevelName(level)), "message": message,
                        "attempt": attempt, "at": time.time()}
    if not message.isascii():  # (the common case is one cheap test)
        text = clean_text(message)
        if text is not message:
            record["message"], record["cleaned"] = text, "lone surrogates replaced by " \
                "U+FFFD"
    return record


def note_data(data: JSONDict, redact: Callable[[str | None], str | None]) -> JSONDict:
    """A history note as it can be stored: cleaned (``jsoncheck.storable``, at most
    ``MAX_NOTE_BYTES``), then redacted.  What was cleaned is said in the note's value,
    when it is an object, as ``cleaned``."""
    value, cleaned = storable(data, max_bytes=MAX_NOTE_BYTES)
    if not isinstance(value, dict):  # cut whole: too large
        value = {"note": value}
    if cleaned is not None and len(value) == 1:
        inner = next(iter(value.values()))
        if isinstance(inner, dict):
            inner["cleaned"] = cleaned
    return _redact_json(value, redact)  # type: ignore[no-any-return]


class AttemptLogs(StepLog):
    """The history notes of a run's attempts executed by a worker (``ctx.logger``
    records as ``{"log": record}``, and every other note: ``usage``, ``cache``,
    ``emit``, ``wait``), kept per attempt (the attempts of a run that a worker runs at
    once share its view): each attempt's notes go back with its outcome (``take``) and
    the run's driver stores them.  An attempt is ``begin``-ed before it runs; what is
    added for an attempt not (or no longer) begun is dropped (a late record of an
    attempt whose outcome went already).  At most ``MAX_ATTEMPT_RECORDS`` notes an
    attempt (they travel in one inbox row); the number dropped beyond that is told in
    a last WARNING record."""

    def __init__(self, redact: Callable[[str | None], str | None],
                 redacting: Callable[[], bool] | None = None) -> None:
        super().__init__(redact, redacting)
        self._by_attempt: dict[tuple[str, int], list[JSONDict]] = {}
        self._dropped_of: dict[tuple[str, int], int] = {}
        self._current: dict[str, int] = {}  # step -> its attempt running here

    @property
    def pending(self) -> bool:
        return False  # nothing for a run loop to drain: see ``take``

    def begin(self, step_id: str, attempt: int, decision: JSONDict | None) -> None:
        """Attempt ``attempt`` of ``step_id`` runs here; ``decision``: the approval
        the driver holds for the step (what ``ctx.wait_for_approval`` returns)."""
        self._current[step_id] = attempt
        self._by_attempt[(step_id, attempt)] = []
        if decision is not None:
            self.decisions[step_id] = decision
        else:
            self.decisions.pop(step_id, None)

    def _keep(self, key: tuple[str, int], note: JSONDict) -> None:
        notes = self._by_attempt.get(key)
        if notes is None:
            return  # not begun, or taken already
        if len(notes) >= MAX_ATTEMPT_RECORDS:
            self._dropped_of[key] = self._dropped_of.get(key, 0) + 1
            return
        notes.append(note)

    def add(self, step_id: str, attempt: int, level: int, message: str) -> None:
        self._keep((step_id, attempt), {"log": log_record(attempt, level, message)})

    def note(self, step_id: str, data: JSONDict) -> None:
        attempt = self._current.get(step_id)
        if attempt is not None:
            self._keep((step_id, attempt), note_data(data, self.redact))
            if "emit" in data and self.on_emit is not None:
                self.on_emit()

    def take_emits(self, step_id: str, attempt: int) -> list[JSONDict]:
        """The attempt's ``emit`` notes so far, forgotten here (stored while the
        attempt runs: ``Executor.emit_loop``); its other notes stay."""
        notes = self._by_attempt.get((step_id, attempt))
        if not notes:
            return []
        emits = [note for note in notes if "emit" in note]
        if emits:
            notes[:] = [note for note in notes if "emit" not in note]
        return emits

    def drain(self) -> list[tuple[str | None, JSONDict]]:
        return []

    def take(self, step_id: str, attempt: int) -> tuple[JSONDict, ...]:
        """The attempt's notes, oldest first, forgotten here (with what else the
        attempt left: its wait request, its cache hit, its decision)."""
        key = (step_id, attempt)
        notes = self._by_attempt.pop(key, [])
        dropped = self._dropped_of.pop(key, 0)
        if self._current.get(step_id) == attempt:
            del self._current[step_id]
            self.wait_requests.pop(step_id, None)
            self.decisions.pop(step_id, None)
            self.cache_hits.discard(step_id)
        if dropped:
            notes.append({"log": log_record(
                attempt, logging.WARNING, f"{dropped} step notes were dropped: an "
                f"attempt run on a worker keeps at most {MAX_ATTEMPT_RECORDS}")})
        return tuple(notes)


def _loop_here() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread (a context is built on its run's loop),
    if any."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _unchanged(value: JSON) -> JSON:
    return value


def _redact_json(value: Any, redact: Callable[[str | None], str | None]) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(k) or "": _redact_json(v, redact) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_json(v, redact) for v in value]
    return value


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


class ParentOutputs(Mapping[str, JSON]):
    """``ctx.outputs``: the outputs of a step's parents, read when asked (building a
    context copies nothing).  A parent that did not complete (skipped, failed under a
    trigger rule that lets the step run) reads as None."""

    __slots__ = ("_index", "_output_of")

    def __init__(self, index: Mapping[str, int], output_of: Callable[[int], JSON]) -> None:
        self._index, self._output_of = index, output_of  # parent id -> step index

    def __getitem__(self, key: str) -> JSON:
        return self._output_of(self._index[key])

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def __repr__(self) -> str:
        return repr(self.snapshot())

    def snapshot(self) -> dict[str, JSON]:
        """The outputs as a plain dict, read now."""
        output_of = self._output_of
        return {name: output_of(i) for name, i in self._index.items()}


class StepContext:
    """Passed to a step function that declares a ``ctx`` parameter (read-only).

    ``idempotency_key`` is the same for every attempt of a step in a run (including an
    attempt re-run after a crash), so external side effects can be deduplicated.

    ``outputs`` maps each parent step's id to its output (None for a parent that did
    not complete); it is read from the run at its first use, not when the context is
    built.

    ``logger`` records go to the run's history (``plait show`` lists them per step) with
    every secret redacted, and to the ``plait.step`` logger (stderr from WARNING up on
    the CLI).

    ``cancelled`` becomes true when the attempt is cancelled (the run is cancelled, a
    ``fail_fast`` failure stops it, the step's ``timeout`` passes).  An async step is
    interrupted at its next ``await``; a sync step runs in a thread, which Python cannot
    interrupt: its body runs on to its end unless it checks ``ctx.cancelled`` and
    returns.  Whatever it returns after that is discarded."""

    # One is built per attempt that asks for it: plain slots, nothing computed until read.
    __slots__ = ("_attempt", "_call", "_calls", "_cancel_flag", "_input", "_journal", "_key",
                 "_logger", "_loop", "_outputs", "_run_id", "_state", "_step_id", "_waited")

    def __init__(self, *, run_id: str, step_id: str, attempt: int, input: JSON,
                 state: Mapping[str, JSON], outputs: Mapping[str, JSON],
                 idempotency_key: str | None = None, journal: StepLog | None = None,
                 cancel_flag: Stop | None = None, call: Any = None) -> None:
        self._run_id, self._step_id, self._attempt = run_id, step_id, attempt
        self._input, self._state, self._outputs = input, state, outputs
        self._key, self._journal, self._cancel_flag = idempotency_key, journal, cancel_flag
        self._logger: StepLogger | None = None
        self._waited = False
        # the attempt (a steps.registry.StepCall, which imports this module: typed
        # loosely) and its loop, for ctx.run: its journal is set up at its first call
        self._call, self._loop = call, _loop_here()
        self._calls: CallJournal | None = None

    @property
    def run_id(self) -> str:
        return self._run_id

    @property
    def step_id(self) -> str:
        return self._step_id

    @property
    def attempt(self) -> int:
        return self._attempt

    @property
    def idempotency_key(self) -> str:
        key = self._key
        if key is None:
            key = self._key = f"{self._run_id}:{self._step_id}"
        return key

    @property
    def input(self) -> JSON:
        return self._input

    @property
    def state(self) -> Mapping[str, JSON]:
        return self._state

    @property
    def outputs(self) -> Mapping[str, JSON]:
        outputs = self._outputs
        if type(outputs) is ParentOutputs:
            # a plain dict from the first read on: what step code iterates fastest
            outputs = self._outputs = outputs.snapshot()
        return outputs

    @property
    def journal(self) -> StepLog | None:
        return self._journal

    @property
    def cancel_flag(self) -> Stop | None:
        return self._cancel_flag

    @property
    def logger(self) -> StepLogger:
        """Built on first use: most steps never log."""
        logger = self._logger
        if logger is None:
            logger = self._logger = StepLogger(self._journal, run_id=self._run_id,
                                               step_id=self._step_id,
                                               attempt=self._attempt)
        return logger

    @property
    def cancelled(self) -> bool:
        """True once the attempt was cancelled or timed out (poll it in long sync
        steps, and return when it is)."""
        return self._cancel_flag is not None and self._cancel_flag.requested

    # ------------------------------------------------------------ waiting, streaming

    async def wait_for_approval(self, prompt: str | None = None, *, show: JSON = None,
                                timeout: float | str | None = None,
                                on_timeout: str = "reject") -> JSONDict:
        """Wait durably for a person, as an ``approval`` step does (docs/waiting.md).

        The first time, no decision is stored: this raises ``ApprovalRequested``, the
        attempt ends (not a failure) and the step is ``waiting``; the run waits (the CLI
        exits 3) until ``plait approve RUN STEP [--reject] [--data JSON]`` (or the API,
        or ``timeout`` then ``on_timeout``) decides.  Approved: the step function runs
        again FROM THE START and this call returns ``{"approved": True, "by", "at",
        "data"}``, so code before the call runs twice: keep side effects after it, or
        make them idempotent.  Rejected: the step fails (never retried), like an
        approval step.  A step waits at most once.  ``show`` (JSON, at most 1 MiB): the
        content under review, shown with ``prompt`` wherever the decision is made."""
        return self.wait_for_approval_sync(prompt, show=show, timeout=timeout,
                                           on_timeout=on_timeout)

    def wait_for_approval_sync(self, prompt: str | None = None, *, show: JSON = None,
                               timeout: float | str | None = None,
                               on_timeout: str = "reject") -> JSONDict:
        """``wait_for_approval`` for sync steps (same semantics)."""
        from ..core.durations import parse_duration
        from ..core.jsoncheck import ensure_json
        from ..errors import ApprovalRequested, FatalError

        step = self._step_id
        if self._waited:
            raise FatalError(f"step {step!r}: a step can wait for one approval; it "
                             f"called wait_for_approval twice", step=step)
        self._waited = True
        if prompt is not None and not isinstance(prompt, str):
            raise FatalError(f"step {step!r}: wait_for_approval: `prompt` must be text, "
                             f"got {type(prompt).__name__}", step=step)
        if on_timeout not in ("reject", "approve"):
            raise FatalError(f"step {step!r}: wait_for_approval: `on_timeout` must be "
                             f"'reject' or 'approve', got {on_timeout!r}", step=step)
        try:
            seconds = None if timeout is None else parse_duration(timeout)
        except ValueError as exc:
            raise FatalError(f"step {step!r}: wait_for_approval: `timeout`: {exc}",
                             step=step) from None
        journal = self._journal
        decision = journal.decisions.get(step) if journal is not None else None
        if decision is not None:
            return {"approved": True, "by": decision.get("by"), "at": decision.get("at"),
                    "data": decision.get("data")}
        if journal is not None:
            request: JSONDict = {"kind": "approval", "prompt": prompt, "show": ensure_json(
                show, step=step, max_bytes=MAX_EMIT_BYTES), "timeout": seconds,
                                 "on_timeout": on_timeout, "attempt": self._attempt}
            journal.wait_requests[step] = request
            journal.note(step, {"wait": request})
        raise ApprovalRequested(step, prompt)

    async def wait_for_event(self, name: str, timeout: float | str | None = None) -> JSON:
        """The data of the event ``name`` sent to this run (``plait signal``), waiting
        durably for it (docs/waiting.md): when it is not there the attempt ends (not a
        failure), the step waits holding nothing and runs again from the start once it
        is; None once ``timeout`` (seconds or a duration string) has passed."""
        from . import waits

        return await waits.wait_for_event(self._journaled(), self._journal,
                                          step=self._step_id, attempt=self._attempt,
                                          name=name, timeout=timeout)

    def wait_for_event_sync(self, name: str, timeout: float | str | None = None) -> JSON:
        """``wait_for_event`` for sync steps (same semantics)."""
        calls = self._journaled()
        return calls.on_loop(self.wait_for_event(name, timeout))

    async def sleep(self, name: str, duration: float | str) -> None:
        """Wait durably ``duration`` (seconds or a duration string), counted from the
        first attempt that asked (``name`` keeps it): the step waits holding nothing and
        runs again from the start once the time has come; then this returns None."""
        from . import waits

        await waits.sleep(self._journaled(), self._journal, step=self._step_id,
                          attempt=self._attempt, name=name, duration=duration)

    def sleep_sync(self, name: str, duration: float | str) -> None:
        """``sleep`` for sync steps (same semantics)."""
        self._journaled().on_loop(self.sleep(name, duration))

    # ------------------------------------------------------------ journaled calls

    async def run(self, name: str, fn: Callable[..., Any], /, *args: Any,
                  retry: RetryPolicy | None = None, **kwargs: Any) -> JSON:
        """``fn(*args, **kwargs)`` as a journaled call (docs/python-api.md): a sync
        ``fn`` runs in a thread, an async one is awaited.  Its result, checked and
        redacted like a step output, is committed to the run's store under ``name``
        before it is returned; every later attempt of this step in this run (a retry,
        a resume after a crash, the re-run after an approval) gets the stored value at
        once, without calling ``fn``.  ``retry`` (a ``plait.Retry``) retries the call
        in place.  A call that raises stores nothing; a name used twice in one attempt
        fails the step (JournalNameReused); a result that is not JSON fails it
        (OutputError)."""
        return await self._journaled().run(name, fn, args, kwargs, retry)

    def run_sync(self, name: str, fn: Callable[..., Any], /, *args: Any,
                 retry: RetryPolicy | None = None, **kwargs: Any) -> JSON:
        """``run`` for sync steps: ``fn`` is called in the step's own thread."""
        return self._journaled().run_sync(name, fn, args, kwargs, retry)

    async def llm(self, name: str, /, *, retry: RetryPolicy | None = None,
                  **fields: Any) -> JSONDict:
        """The ``llm`` step type's request as a journaled call named ``name``
        (docs/python-api.md): ``base_url``, ``model``, ``api_key_env``, ``messages`` or
        ``prompt``, and optionally ``tools``, ``response_format``, ``temperature``,
        ``max_tokens``, ``stream`` (the text so far emitted while it arrives).
        Returns the step's output (with ``tools``, plus
        ``"tool_calls": [{"id", "name", "arguments"}]``); a later attempt gets it back
        without sending anything."""
        calls = self._model_calls()
        return cast(JSONDict, await calls.llm(self, self._call, name, fields, retry))

    def llm_sync(self, name: str, /, *, retry: RetryPolicy | None = None,
                 **fields: Any) -> JSONDict:
        """``llm`` for sync steps (same fields and semantics)."""
        calls = self._model_calls()
        return cast(JSONDict, calls.llm_sync(self, self._call, self._loop, name, fields,
                                             retry))

    def _model_calls(self) -> Any:
        calls = self._call.services.model_calls if self._call is not None else None
        if calls is None:
            from ..errors import FatalError

            raise FatalError(f"step {self._step_id!r}: ctx.llm needs the engine that runs "
                             f"the step, and this context has none", step=self._step_id)
        return calls

    def _journaled(self) -> CallJournal:
        calls = self._calls
        if calls is None:
            from .journal import CallJournal

            call, log = self._call, self._journal
            run = call.run if call is not None else None
            calls = self._calls = CallJournal(
                store=run.services.store if run is not None else None,
                run_id=self._run_id, step_id=self._step_id, attempt=self._attempt,
                max_bytes=run.checked.spec.limits.max_output_bytes if run else None,
                redact=log.redact_json if log is not None else _unchanged,
                executor=run.services.executor if run is not None else None,
                loop=self._loop)
        return calls

    def emit(self, value: JSON) -> None:
        """Store ``value`` (JSON) as a partial output of the step: a history note
        ``{"emit": {"value", "attempt", "at"}}`` with secrets redacted, shown by ``plait
        show`` and streamed by the server's event stream.  The step's output is still
        what it returns.  A value that is not JSON raises OutputError, naming its key
        path."""
        from ..core.jsoncheck import ensure_json

        checked = ensure_json(value, step=self._step_id, max_bytes=MAX_EMIT_BYTES)
        if self._journal is not None:
            self._journal.note(self._step_id, {"emit": {
                "value": checked, "attempt": self._attempt, "at": time.time()}})

    def _fields(self) -> tuple[object, ...]:
        return (self._run_id, self._step_id, self._attempt, self.idempotency_key,
                self._input, self._state, self.outputs)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StepContext):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # compared by value, like its fields

    def __repr__(self) -> str:
        return (f"StepContext(run_id={self._run_id!r}, step_id={self._step_id!r}, "
                f"attempt={self._attempt!r}, idempotency_key={self.idempotency_key!r}, "
                f"input={self._input!r}, state={self._state!r}, outputs={self.outputs!r})")


def make_context(*, run_id: str, step_id: str, attempt: int, input: JSON,
                 state: Mapping[str, JSON], outputs: Mapping[str, JSON],
                 journal: StepLog | None = None,
                 cancel_flag: Stop | None = None) -> StepContext:
    return StepContext(run_id=run_id, step_id=step_id, attempt=attempt, input=input,
                       state=state, outputs=outputs, journal=journal,
                       cancel_flag=cancel_flag)
