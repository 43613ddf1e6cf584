"""The process's shared pool for sync steps: reused across engines, and its idle threads
leave when the process exits (``plait run`` must not wait for them)."""

from __future__ import annotations

import threading

from plait.runtime import threads


def test_the_shared_pool_is_one_per_process() -> None:
    assert threads.shared_pool() is threads.shared_pool()


def test_shutting_down_the_shared_pool_lets_its_idle_threads_leave() -> None:
    pool = threads.shared_pool()
    assert pool.submit(lambda: 42).result(timeout=10) == 42
    workers = [t for t in threading.enumerate() if t.name.startswith("plait-step")]
    assert workers
    threads.shutdown_shared()
    for worker in workers:
        worker.join(timeout=10)
    assert [w for w in workers if w.is_alive()] == []
    fresh = threads.shared_pool()  # the next user gets a new pool
    assert fresh is not pool
    assert fresh.submit(lambda: 7).result(timeout=10) == 7
