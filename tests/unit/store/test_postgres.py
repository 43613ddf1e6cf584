"""What the PostgreSQL store does beyond the conformance suite: clear errors for a server
it cannot use, connection loss and a server that comes back, leases judged on the
database's clock, read-only connections, values PostgreSQL text cannot hold, and the
history of one run written from several processes' connections at once."""

from __future__ import annotations

import asyncio
import time
import types
import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest

import pgutil
from plait.core.runstate import StepChange, StepRuntime
from plait.core.states import RunStatus, StepStatus
from plait.errors import RunNotFound, StoreError, StoreUnreachable
from plait.store.base import RunRecord, WriteBatch
from plait.store.postgres import PostgresStore
from plait.store.sql import postgres_rows

pytestmark = pytest.mark.postgres
S = StepStatus


def new_id() -> str:
    return uuid.uuid4().hex


def record(run_id: str, **fields: object) -> RunRecord:
    values: dict[str, object] = {"input": {"n": 1}, **fields}
    return RunRecord(run_id=run_id, workflow="wf", version=1, fingerprint="0" * 12,
                     status=RunStatus.PENDING, created_at=1.0, **values)  # type: ignore[arg-type]


def queued(step: str = "a", **fields: object) -> WriteBatch:
    return WriteBatch(run_id="", steps=[StepChange(step, S.PENDING, S.QUEUED, 1.0,
                                                   StepRuntime(S.QUEUED, **fields))])  # type: ignore[arg-type]


async def opened(url: str, **kwargs: bool) -> PostgresStore:
    store = PostgresStore(url, **kwargs)
    await store.open()
    return store


@pytest.fixture
async def store(pg_database: str) -> AsyncIterator[PostgresStore]:
    s = await opened(pg_database)
    try:
        yield s
    finally:
        await s.close()


async def new_run(store: PostgresStore, steps: tuple[str, ...] = ("a", "b")) -> str:
    run_id = new_id()
    await store.create_run(record(run_id), list(steps))
    return run_id


def terminate_connections(url: str) -> int:
    """End every server process connected to the database of ``url`` (what a restart
    does to them): the count ended."""
    with psycopg.connect(pgutil.server_url(), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (pgutil.database_name(url),)).fetchone()
        return int(row[0]) if row else 0


# ---------------------------------------------------------------- servers it cannot use


async def test_a_server_that_does_not_answer_is_a_clear_error_without_the_password() -> None:
    store = PostgresStore("postgresql://ada:s3cret@127.0.0.1:1/nothing")
    started = time.monotonic()
    with pytest.raises(StoreError) as info:
        await store.open()
    message = str(info.value)
    assert message.startswith("cannot connect to PostgreSQL at "
                              "postgresql://ada:***@127.0.0.1:1/nothing:")
    assert "refused" in message.lower() and "s3cret" not in message
    assert isinstance(info.value, StoreUnreachable)  # worth trying again (plait worker)
    assert time.monotonic() - started < 5


async def test_a_database_that_does_not_exist_is_named(pg_database: str) -> None:
    missing = pgutil.database_url(pg_database, "plait_no_such_database")
    with pytest.raises(StoreError, match='cannot connect.*"plait_no_such_database" does not '
                                         'exist') as info:
        await PostgresStore(missing).open()
    assert not isinstance(info.value, StoreUnreachable)  # retrying cannot fix it


async def test_open_close_and_use_outside_them(pg_database: str) -> None:
    store = PostgresStore(pg_database)
    with pytest.raises(StoreError, match="is not open"):
        await store.get_run(new_id())
    await store.open()
    await store.open()  # again: nothing happens
    run_id = await new_run(store)
    await store.close()
    await store.close()
    with pytest.raises(StoreError, match="is not open"):
        await store.get_run(run_id)
    await store.open()  # and again: the run is still there
    assert (await store.get_run(run_id)).run_id == run_id
    await store.close()


def test_a_store_belongs_to_the_event_loop_that_opened_it(pg_database: str) -> None:
    loop = asyncio.new_event_loop()
    try:
        store = loop.run_until_complete(opened(pg_database))
        with pytest.raises(StoreError, match="belongs to the event loop that opened it"):
            asyncio.run(store.get_run(new_id()))
        loop.run_until_complete(store.close())
    finally:
        loop.close()


# ---------------------------------------------------------------- connection loss


async def test_the_pool_reconnects_after_the_server_ends_its_connections(
        store: PostgresStore) -> None:
    """What a PostgreSQL restart does to the pool's connections: every later call,
    reads and writes alike, works on new connections."""
    run_id = await new_run(store)
    await store.get_run(run_id)  # the pool holds a connection now
    assert terminate_connections(store.url) >= 1
    assert (await store.get_run(run_id)).run_id == run_id  # a read, run again
    assert terminate_connections(store.url) >= 1
    batch = queued()
    batch.run_id = run_id
    await store.write(batch)  # a write: the server said it ended the connection first
    assert [s.status for s in await store.get_steps(run_id)] == [S.QUEUED, S.PENDING]
    assert [e.seq for e in await store.get_events(run_id)] == [1, 2]  # stored once


async def test_a_server_that_goes_away_and_comes_back(pg_database: str) -> None:
    proxy = pgutil.Proxy(pg_database)
    await proxy.start()
    store = await opened(proxy.url(pg_database) + "?retry_for=20")
    try:
        run_id = await new_run(store)
        await proxy.stop()  # down, as after a crash: connections cut without a word
        reading = asyncio.ensure_future(store.get_steps(run_id))
        await asyncio.sleep(0.5)
        assert not reading.done()  # it waits for the server
        await proxy.start()
        assert [s.step_id for s in await asyncio.wait_for(reading, 20)] == ["a", "b"]
        batch = queued()
        batch.run_id = run_id
        await store.write(batch)
        assert (await store.get_steps(run_id))[0].status is S.QUEUED
    finally:
        await store.close()
        await proxy.stop()


async def test_a_write_cut_off_mid_way_is_not_repeated_and_says_so(pg_database: str) -> None:
    """Whether a write reached the server before the connection broke is unknown: it
    is not sent again (a second copy could store a change twice)."""
    proxy = pgutil.Proxy(pg_database)
    await proxy.start()
    store = await opened(proxy.url(pg_database) + "?retry_for=5")
    try:
        run_id = await new_run(store)
        await proxy.stop()
        await proxy.start()  # back at once; the pool's connection is dead meanwhile
        batch = queued()
        batch.run_id = run_id
        with pytest.raises(StoreError, match="lost the connection to PostgreSQL at "
                                             "postgresql://postgres@127.0.0.1"):
            await store.write(batch)
        await store.write(batch)  # the caller may try again: the pool has recovered
        assert (await store.get_steps(run_id))[0].status is S.QUEUED
    finally:
        await store.close()
        await proxy.stop()


async def test_a_server_that_stays_away_is_a_clear_error_after_retry_for(
        pg_database: str) -> None:
    proxy = pgutil.Proxy(pg_database)
    await proxy.start()
    store = await opened(proxy.url(pg_database) + "?retry_for=1")
    try:
        run_id = await new_run(store)
        await proxy.stop()
        started = time.monotonic()
        with pytest.raises(StoreError, match="did not answer for 1s: cannot connect"):
            await store.get_run(run_id)
        assert time.monotonic() - started < 6
    finally:
        await store.close()


# ---------------------------------------------------------------- leases


def _clock_ahead(monkeypatch: pytest.MonkeyPatch, seconds: float) -> types.SimpleNamespace:
    """This process's clock, as the store reads it, ``seconds`` ahead of real time (a
    host whose clock is wrong)."""
    clock = types.SimpleNamespace(time=lambda: time.time() + seconds)
    monkeypatch.setattr(postgres_rows, "time", clock)
    return clock


async def test_a_host_whose_clock_is_ahead_does_not_take_a_live_lease(
        store: PostgresStore, monkeypatch: pytest.MonkeyPatch) -> None:
    run_id = await new_run(store)
    assert await store.claim_run(run_id, "host-a:1", time.time(), lease=30.0) is not None
    skewed = _clock_ahead(monkeypatch, 300.0)  # by its own clock, the lease ran out
    assert await store.claim_run(run_id, "host-b:1", skewed.time(), lease=30.0) is None
    stored = await store.get_run(run_id)
    assert stored.owner == "host-a:1"
    # the lease runs out on the database's clock, whatever the hosts' clocks say
    await asyncio.sleep(0.3)
    taken = await store.claim_run(run_id, "host-b:1", skewed.time(), lease=0.2)
    assert taken is not None and taken.owner == "host-b:1"


async def test_a_host_whose_clock_is_behind_cannot_keep_a_lease_alive_longer(
        store: PostgresStore, monkeypatch: pytest.MonkeyPatch) -> None:
    run_id = await new_run(store)
    behind = _clock_ahead(monkeypatch, -300.0)
    assert await store.claim_run(run_id, "host-a:1", behind.time(), lease=0.2) is not None
    assert (await store.heartbeat(run_id, "host-a:1", behind.time())).held
    monkeypatch.undo()
    await asyncio.sleep(0.3)
    assert await store.claim_run(run_id, "host-b:1", time.time(), lease=0.2) is not None


async def test_leases_of_a_missing_run(store: PostgresStore) -> None:
    for bad in (new_id(), "not an id"):
        with pytest.raises(RunNotFound):
            await store.claim_run(bad, "h:1", 1.0, 30.0)
        with pytest.raises(RunNotFound):
            await store.heartbeat(bad, "h:1", 1.0)
        await store.release_run(bad, "h:1")  # no effect, no error


# ---------------------------------------------------------------- read-only


async def test_a_read_only_store_reads_and_the_server_refuses_its_writes(
        store: PostgresStore) -> None:
    run_id = await new_run(store)
    reader = await opened(store.url, read_only=True)
    try:
        assert (await reader.get_run(run_id)).run_id == run_id
        assert [s.step_id for s in await reader.get_steps(run_id)] == ["a", "b"]
        batch = queued()
        batch.run_id = run_id
        with pytest.raises(StoreError, match="is read-only for this connection"):
            await reader.write(batch)
        with pytest.raises(StoreError, match="read-only"):
            await reader.create_run(record(new_id()), ["a"])
    finally:
        await reader.close()
    assert [s.status for s in await store.get_steps(run_id)] == [S.PENDING, S.PENDING]


# ---------------------------------------------------------------- values


async def test_text_postgresql_cannot_hold_is_stored_with_a_replacement(
        store: PostgresStore) -> None:
    run_id = await new_run(store)
    batch = queued(error="NUL \x00 and a lone \ud800 surrogate", worker="w\x00")
    batch.run_id = run_id
    await store.write(batch)
    a = (await store.get_steps(run_id))[0]
    assert (a.error, a.worker) == ("NUL \ufffd and a lone \ufffd surrogate", "w\ufffd")


async def test_a_lone_surrogate_in_a_value_stores_nothing(store: PostgresStore) -> None:
    run_id = await new_run(store)
    batch = queued(output={"s": "x\ud800"})
    batch.run_id = run_id
    with pytest.raises(StoreError, match="not valid Unicode"):
        await store.write(batch)
    assert (await store.get_steps(run_id))[0].status is S.PENDING
    with pytest.raises(StoreError, match="not valid Unicode"):
        await store.create_run(record(new_id(), input={"s": "\udfff"}), ["a"])


async def test_a_definition_given_as_text_is_kept_as_written(store: PostgresStore) -> None:
    name = f"wf-{new_id()[:8]}"
    written = '{"name": "x",  "steps": [], "z": 1, "a": {"n": 1e308, "m": -0.0}}'
    saved = await store.save_workflow(name, written, "a" * 12, None)
    assert saved.definition_json == written
    assert (await store.get_workflow(name)).definition_json == written


# ---------------------------------------------------------------- many connections


async def test_one_run_written_through_several_pools_keeps_its_history_gapless(
        store: PostgresStore) -> None:
    run_id = await new_run(store)
    others = [await opened(store.url) for _ in range(3)]
    try:
        writers = [store, *others]
        await asyncio.gather(*(
            writers[n % 4].write(WriteBatch(run_id=run_id, notes=[(None, {"n": n})]))
            for n in range(40)))
    finally:
        for other in others:
            await other.close()
    events = await store.get_events(run_id)
    assert [e.seq for e in events] == list(range(1, 42))
    assert sorted(e.data["n"] for e in events if e.kind == "note") == list(range(40))


async def test_concurrent_first_versions_of_one_workflow_are_one_version(
        store: PostgresStore) -> None:
    name = f"wf-{new_id()[:8]}"
    others = [await opened(store.url) for _ in range(3)]
    try:
        saved = await asyncio.gather(*(
            s.save_workflow(name, {"steps": []}, "f" * 12, None)
            for s in [store, *others] for _ in range(3)))
    finally:
        for other in others:
            await other.close()
    assert {(w.version, w.fingerprint) for w in saved} == {(1, "f" * 12)}
    assert [w.version for w in await store.list_workflows() if w.name == name] == [1]
