"""Journaled calls inside a step (``ctx.run`` / ``ctx.run_sync``; docs/python-api.md).

A call's JSON result is committed to the store, keyed by (run, step, name), before the
step's code gets it; every later attempt of the step in the run (a retry, a resume
after a crash, the re-run after an approval) reads it back instead of calling again.
An attempt reads its step's stored results once, at its first journaled call (one
read, not one per call); a call not found there is made and its result stored.
What is stored is the result checked like a step output (JSON, at most the run's
``limits.max_output_bytes``) and redacted like one; the stored value is what every
attempt gets, the first included, so all of them see the same thing.  A call that
raises stores nothing.  When two attempts race on one name (a fenced zombie and its
successor) the store keeps the first value and both get it: also when the zombie
stores it after the successor's first journaled call, which then makes the call too.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import math
import random
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor
from typing import TYPE_CHECKING, Any, TypeVar

from ..core.jsoncheck import NotJSON, checked_json
from ..core.model import JSON, RetryPolicy
from ..core.retry import ErrorInfo, next_delay
from ..errors import FatalError, JournalNameReused, OutputError, StepError

if TYPE_CHECKING:
    from ..store.base import Journaled, Store

_T = TypeVar("_T")
MAX_NAME = 200  # characters of a journaled call's name (ctx.run, ctx.llm)


class CallJournal:
    """One attempt's journaled calls: the names it used, and where their results go.

    Built on the run's event loop at the attempt's first ``ctx.run``; ``run_sync``
    calls it from the sync step's thread, reaching the store through that loop."""

    __slots__ = ("_attempt", "_executor", "_loading", "_lock", "_loop", "_max_bytes",
                 "_names", "_redact", "_run_id", "_step_id", "_store", "_stored")

    def __init__(self, *, store: Store | None, run_id: str, step_id: str, attempt: int,
                 max_bytes: int | None, redact: Callable[[JSON], JSON],
                 executor: Executor | None, loop: asyncio.AbstractEventLoop | None) -> None:
        self._store, self._run_id, self._step_id = store, run_id, step_id
        self._attempt, self._max_bytes, self._redact = attempt, max_bytes, redact
        self._executor, self._loop = executor, loop
        self._names: set[str] = set()
        self._lock = threading.Lock()
        # what the step's earlier attempts stored, read at this attempt's first call
        # (on the loop): taken out name by name (a name is used once per attempt)
        self._stored: dict[str, Journaled] | None = None
        self._loading: asyncio.Future[dict[str, Journaled]] | None = None

    async def run(self, name: object, fn: Callable[..., Any], args: tuple[Any, ...],
                  kwargs: dict[str, Any], retry: RetryPolicy | None) -> JSON:
        key = self._claim(name)
        store = self._needs_store()
        found = await self._lookup(store, key)
        if found is not None:
            return found.value
        value = await self._call(fn, args, kwargs, retry)
        return await self._commit(store, key, value)

    def run_sync(self, name: object, fn: Callable[..., Any], args: tuple[Any, ...],
                 kwargs: dict[str, Any], retry: RetryPolicy | None) -> JSON:
        key = self._claim(name)
        store = self._needs_store()
        self._sync_side()
        stored = self._stored  # read already: no hop to the loop for the lookup
        found = stored.pop(key, None) if stored is not None \
            else self._on_loop(self._lookup(store, key))
        if found is not None:
            return found.value
        value = _call_sync(fn, args, kwargs, retry)
        return self._on_loop(self._commit(store, key, value))

    @property
    def store(self) -> Store:
        """The run's store (a StepError when the attempt runs without one)."""
        return self._needs_store()

    @property
    def run_id(self) -> str:
        return self._run_id

    def on_loop(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run ``coro`` on the run's event loop from a sync step's thread."""
        return self._on_loop(coro)

    def _claim(self, name: object) -> str:
        step = self._step_id
        if not isinstance(name, str) or not name or len(name) > MAX_NAME:
            shown = repr(name) if not isinstance(name, str) or len(name) <= MAX_NAME \
                else f"{len(name)} characters"
            raise FatalError(f"step {step!r}: a journaled call needs a name (non-empty "
                             f"text of at most {MAX_NAME} characters), got {shown}",
                             step=step)
        with self._lock:  # a sync step may call from several threads of its own
            if name in self._names:
                raise JournalNameReused(name, step=step)
            self._names.add(name)
        return name

    def _needs_store(self) -> Store:
        if self._store is None:
            raise StepError(f"step {self._step_id!r}: ctx.run needs the run's store, and "
                            f"this attempt runs without one", step=self._step_id)
        return self._store

    async def _lookup(self, store: Store, name: str) -> Journaled | None:
        """The result stored for ``name`` by an earlier attempt, or None.  The first
        call reads the step's whole journal; calls made together meanwhile (gather, a
        sync step's threads) wait for that one read."""
        stored = self._stored
        if stored is None:
            loading = self._loading
            if loading is None:
                loading = self._loading = asyncio.ensure_future(
                    store.journal_step(self._run_id, self._step_id))
                loading.add_done_callback(_seen)  # its error is raised to its callers
            try:  # a cancelled caller leaves the read to the others
                stored = await asyncio.shield(loading)
            except BaseException:
                if loading.done() and (loading.cancelled() or loading.exception()):
                    self._loading = None  # the next call reads again
                raise
            self._stored = stored
        return stored.pop(name, None)

    async def _commit(self, store: Store, name: str, value: object) -> JSON:
        step = self._step_id
        try:
            checked = checked_json(value, max_bytes=self._max_bytes)
        except NotJSON as exc:
            raise OutputError(f"step {step!r}: journaled call {name!r}: "
                              f"{exc.describe('result')}", step=step, path=exc.path) from None
        stored = await store.journal_put(self._run_id, self._step_id, name,
                                         self._redact(checked), self._attempt, time.time())
        return stored.value

    async def _call(self, fn: Callable[..., Any], args: tuple[Any, ...],
                    kwargs: dict[str, Any], retry: RetryPolicy | None) -> object:
        made = 0
        while True:
            made += 1
            try:
                if inspect.iscoroutinefunction(fn):
                    return await fn(*args, **kwargs)
                loop = asyncio.get_running_loop()
                result = await loop.run_in_executor(
                    self._executor, functools.partial(fn, *args, **kwargs))
                return await result if inspect.isawaitable(result) else result
            except Exception as exc:  # the call's retry policy decides
                delay = _delay(retry, made, exc)
                if delay is None:
                    raise
            await asyncio.sleep(delay)

    def _on_loop(self, coro: Coroutine[Any, Any, _T]) -> _T:
        try:
            loop = self._sync_side()
        except StepError:
            coro.close()
            raise
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def _sync_side(self) -> asyncio.AbstractEventLoop:
        """The run's loop, seen from a sync step's thread (StepError: not from one)."""
        loop = self._loop
        if loop is None or _running_here(loop):
            raise StepError(f"step {self._step_id!r}: ctx.run_sync is for sync steps "
                            f"(run in a thread); an async step awaits ctx.run",
                            step=self._step_id)
        return loop


def _seen(done: asyncio.Future[Any]) -> None:
    if not done.cancelled():
        done.exception()  # retrieved: no "never retrieved" report when every caller left


def _running_here(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _delay(retry: RetryPolicy | None, made: int, exc: Exception) -> float | None:
    """Seconds before the call's next try, or None when it is not tried again."""
    if retry is None:
        return None
    return next_delay(retry, made, _decided_by(exc), random.random())


def _decided_by(exc: Exception) -> ErrorInfo:
    """What a retry policy judges of a call's exception: its class names (as a step's
    are: ``retry_on`` / ``no_retry_on``), whether it is retryable, its retry_after."""
    names = tuple(c.__name__ for c in type(exc).__mro__
                  if c not in (object, BaseException, Exception))
    return ErrorInfo(type=names[0], message="", names=names,
                     retryable=not isinstance(exc, StepError) or exc.retryable is not False,
                     retry_after=_seconds(getattr(exc, "retry_after", None)))


def _seconds(value: object) -> float | None:
    """A finite number of seconds, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        seconds = float(value)
    except OverflowError:
        return None
    return seconds if math.isfinite(seconds) else None


def _call_sync(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
               retry: RetryPolicy | None) -> object:
    made = 0
    while True:
        made += 1
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # the call's retry policy decides
            delay = _delay(retry, made, exc)
            if delay is None:
                raise
        time.sleep(delay)
