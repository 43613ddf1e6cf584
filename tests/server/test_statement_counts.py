"""What one request and one poll cost on PostgreSQL, in statements: pinned, so that
neither grows back unnoticed (``tests/statements.py`` counts them)."""

from __future__ import annotations

import time
import uuid

import pytest

from plait.core.states import RunStatus
from plait.errors import RunTakenOver
from plait.runtime.waiting import Watch
from plait.store.base import RunRecord
from plait.store.url import open_store
from statements import count_statements

from .conftest import HELLO, Client, register, wait_status

pytestmark = [pytest.mark.postgres, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

READ_RUN = "array_agg(step_id ORDER BY position)"  # in the one statement of read_run


def test_the_run_document_is_read_in_few_statements(make_client: Client,
                                                     pg_database: str) -> None:
    client = make_client(pg_database)
    register(client, HELLO)
    run_id = client.post("/api/runs", json={"workflow": "hello",
                                            "input": {"n": 2}}).json()["run_id"]
    wait_status(client, run_id, ("completed",), timeout=20)
    with count_statements() as counted:
        document = client.get(f"/api/runs/{run_id}")
    assert document.status_code == 200 and document.json()["output"] == "2!"
    sent = counted.of_task_running(READ_RUN)
    assert len(sent) == 1, sent  # the run, all under it and its definition: one read


async def test_a_poll_of_a_driven_run_is_one_statement(pg_database: str) -> None:
    """A driver's poll renews its lease and reads the cancel flag in one statement;
    it still notices a cancel request at once, and a lost lease."""
    store = open_store(pg_database)
    await store.open()
    try:
        run_id = uuid.uuid4().hex
        await store.create_run(RunRecord(run_id=run_id, workflow="w", version=1,
                                         fingerprint="0123456789ab", status=RunStatus.PENDING,
                                         input={}, created_at=time.time()), ["a"])
        await store.claim_run(run_id, "w1", time.time(), 30.0)
        watch = Watch(True, store, run_id, "w1", None)
        with count_statements() as counted:
            assert await watch.poll(time.time()) is False
        assert len(counted.queries()) == 1, counted.queries()
        await store.request_cancel(run_id)
        with count_statements() as counted:
            assert await watch.poll(time.time()) is True
        assert len(counted.queries()) == 1, counted.queries()
        await store.claim_run(run_id, "w2", time.time(), 30.0, dead_owner="w1")
        with pytest.raises(RunTakenOver, match=r"taken over by another process \(w2\)"):
            await watch.poll(time.time())
    finally:
        await store.close()
