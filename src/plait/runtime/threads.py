"""A thread pool for sync steps whose threads never hold up interpreter exit.

``concurrent.futures.ThreadPoolExecutor`` joins its workers at exit, so a sync step that
timed out or was cancelled (Python cannot stop a thread) would keep the process alive
until the step's function returned.  Here workers are daemon threads: an abandoned step
dies with the process, as a cancelled async step would.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

_Work = tuple[Future[Any], Callable[[], Any]]


class DaemonThreadPool(Executor):
    """Up to ``max_workers`` daemon threads, started on demand, idle ones reused."""

    def __init__(self, max_workers: int, name: str = "plait-step") -> None:
        self._max = max_workers
        self._name = name
        self._queue: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._closed = False

    def submit(self, fn: Callable[P, T], /, *args: P.args,
               **kwargs: P.kwargs) -> Future[T]:
        future: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the step thread pool is shut down")
            if self._idle == 0 and self._threads < self._max:
                self._threads += 1
                threading.Thread(target=self._work, name=f"{self._name}-{self._threads}",
                                 daemon=True).start()
            else:
                self._idle -= 1 if self._idle else 0
        self._queue.put((future, lambda: fn(*args, **kwargs)))
        return future

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, call = item
            if future.set_running_or_notify_cancel():
                try:
                    result = call()
                except BaseException as exc:  # noqa: BLE001 - handed to the awaiting step
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            with self._lock:
                self._idle += 1

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._closed = True
            workers = self._threads
        for _ in range(workers):
            self._queue.put(None)


SHARED_THREADS = 64
_shared: tuple[int, DaemonThreadPool] | None = None  # (pid, pool)
_shared_lock = threading.Lock()


def shared_pool() -> DaemonThreadPool:
    """The process's pool for sync steps (``SHARED_THREADS`` threads), used by every
    engine that asks for no pool of its own: a run started by its own ``run_async``
    call reuses the threads earlier runs started.  Never shut down (its threads are
    daemons); a forked child gets a pool of its own."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared[0] != os.getpid():
            _shared = (os.getpid(), DaemonThreadPool(SHARED_THREADS))
        return _shared[1]


def shutdown_shared() -> None:
    """Tell the shared pool's idle threads to leave (at the process's exit); a thread
    still running an abandoned step leaves when that step returns."""
    global _shared
    with _shared_lock:
        found, _shared = _shared, None
    if found is not None and found[0] == os.getpid():
        found[1].shutdown(wait=False)
