"""A circuit breaker's half-open trial on ``plait worker`` processes (PostgreSQL): the
worker running the trial is killed (SIGKILL) or drained (SIGTERM) in the middle of it,
and the breaker still lets a later trial through, which closes it.

The breaker is stored open, its ``reset_after`` already passed, so the run's first
attempt is the trial.  The step (``ledger_steps:nap``) hangs in its first attempt and
returns at once in its retry: the retry is the later trial.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from cluster_harness import Cluster, WorkerProc, read_ledger, show, submit, wait_final

from plait.core.guards import CircuitBreaker
from plait.core.model import CircuitBreakerSpec
from plait.store.url import open_store

pytestmark = pytest.mark.postgres

DEADLINE_S = 30.0


def flow(tmp_path: Path, spec: CircuitBreakerSpec) -> Path:
    path = tmp_path / "trial.json"
    path.write_text(json.dumps({"name": f"trial-{uuid.uuid4().hex[:8]}", "steps": [{
        "id": "nap", "type": "python", "call": "ledger_steps:nap", "with": {"seconds": 60},
        "retry": {"max_retries": 1, "initial_delay": "10ms"},
        "circuit_breaker": {"key": spec.key, "failure_threshold": 1,
                            "reset_after": spec.reset_after}}]}))
    return path


def breaker(db: str, spec: CircuitBreakerSpec,
            opened_at: float | None = None) -> CircuitBreaker:
    """The stored state of ``spec``'s breaker; first stored open at ``opened_at``
    when one is given."""
    async def go() -> CircuitBreaker:
        store = open_store(db)
        await store.open()
        try:
            if opened_at is not None:
                state = CircuitBreaker(spec)
                state.record_failure(opened_at)
                assert await store.put_breaker(spec.key, state.to_json(), 0)
            found, _ = await store.get_breaker(spec.key)
            return CircuitBreaker.from_json(spec, found)
        finally:
            await store.close()
    return asyncio.run(go())


def wait_for(condition: Callable[[], bool], what: str, cluster: Cluster) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}\n{cluster.tails()}")
        time.sleep(0.05)


@pytest.fixture
def cluster(pg_database: str, tmp_path: Path) -> Iterator[Cluster]:
    found = Cluster(db=pg_database, directory=tmp_path, concurrency=2,
                    extra=("--grace", "200ms"))
    try:
        yield found
    finally:
        found.stop()


class Trial(NamedTuple):
    run_id: str
    spec: CircuitBreakerSpec
    worker: WorkerProc  # the one running it


def trial_taken(cluster: Cluster, reset_after: float) -> Trial:
    """A run whose first attempt took the stored-open breaker's trial and hangs in it,
    on one of the cluster's two workers."""
    spec = CircuitBreakerSpec(key=f"svc-{uuid.uuid4().hex[:8]}", failure_threshold=1,
                              reset_after=reset_after)
    breaker(cluster.db, spec, opened_at=time.time() - reset_after - 1)
    cluster.start(2)
    (run_id,) = submit(cluster.db, flow(cluster.directory, spec), [{}], cluster.ledger)
    wait_for(lambda: any(e.run == run_id for e in read_ledger(cluster.ledger)),
             "the trial to start", cluster)
    (body,) = read_ledger(cluster.ledger)
    held = breaker(cluster.db, spec)
    assert (held.state, held.holder) == ("half_open", f"{run_id}/nap#1")
    return Trial(run_id, spec, cluster.by_pid(body.pid))


def closed_by_the_retry(cluster: Cluster, run_id: str, spec: CircuitBreakerSpec) -> None:
    assert wait_final(cluster.db, [run_id], DEADLINE_S,
                      describe=cluster.tails) == {run_id: "completed"}
    shown = show(cluster.db, run_id, cluster.ledger)
    assert [(a["attempt"], a["status"]) for a in shown["attempts"]] == [
        (1, "failed"), (2, "completed")], shown["attempts"]
    assert shown["output"]["nap"]["attempt"] == 2
    assert breaker(cluster.db, spec).state == "closed"


def test_a_trial_on_a_killed_worker_is_let_go_after_reset_after(cluster: Cluster) -> None:
    """The trial's lease (1s) runs out before the killed worker's attempt lease (2s)
    does, so the retry finds it free; nothing else lets it go (the stored state still
    names the dead trial when the worker is gone)."""
    run_id, spec, worker = trial_taken(cluster, reset_after=1.0)
    cluster.kill(worker.index)
    worker.proc.wait(timeout=10)
    assert breaker(cluster.db, spec).holder == f"{run_id}/nap#1"
    closed_by_the_retry(cluster, run_id, spec)  # on the other worker


def test_a_trial_on_a_drained_worker_is_let_go_at_once(cluster: Cluster) -> None:
    """Draining cancels the hanging attempt after its grace; the cancel lets the trial
    go, so the retry gets one long before the 60s lease would run out."""
    run_id, spec, worker = trial_taken(cluster, reset_after=60.0)
    cluster.kill(worker.index, signal.SIGTERM)
    assert worker.proc.wait(timeout=DEADLINE_S) == 0
    # let go (open), or already closed by the retry on the other worker
    assert breaker(cluster.db, spec).holder is None
    closed_by_the_retry(cluster, run_id, spec)  # on the other worker
