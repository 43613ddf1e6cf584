"""The cost of the PostgreSQL store's claims calls, each one round trip (issue 11).

    .venv/bin/python benchmarks/postgres_claims_speed.py [--db URL] [--repeat 200]

Per repeat, on a fresh run of 16 steps: the driver's dispatch batch (16 steps queued
then running, attempts counted, 16 tickets, NOTIFY), one worker's claim of 16, its
completion of 16 (NOTIFY), and the driver's batch that applies the 16 outcomes
(16 steps completed, 16 outcomes consumed).  Prints the median, p90 and max of each
call in milliseconds, measured around the awaited store call (so: the client's
encoding, the round trip, the server's work and its commit).

``--db``: a database to use as is; without it, a scratch database is created on the
server of ``PLAIT_TEST_DATABASE_URL`` (default postgresql://postgres@127.0.0.1:5432/test)
and dropped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from plait.core.runstate import StepChange, StepRuntime
from plait.core.states import RunStatus, StepStatus
from plait.store.base import InboxOutcome, RunChange, RunRecord, Ticket, WriteBatch
from plait.store.postgres import PostgresStore

S = StepStatus
WIDTH = 16
SERVER = os.environ.get("PLAIT_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")


def change(step: str, source: StepStatus, target: StepStatus, attempts: int) -> StepChange:
    now = time.time()
    return StepChange(step, source, target, now,
                      StepRuntime(status=target, attempts=attempts, started_at=now))


async def timed(into: list[float], call: Callable[[], Awaitable[Any]]) -> Any:
    started = time.perf_counter()
    result = await call()
    into.append((time.perf_counter() - started) * 1000)
    return result


async def one_round(store: PostgresStore, times: dict[str, list[float]]) -> None:
    run_id = uuid.uuid4().hex
    steps = [f"s{n}" for n in range(WIDTH)]
    await store.create_run(RunRecord(run_id=run_id, workflow="bench", version=1,
                                     fingerprint="0" * 12, status=RunStatus.PENDING,
                                     input={"n": 1}, created_at=time.time()), steps)
    await store.write(WriteBatch(run_id, run=RunChange(
        source=RunStatus.PENDING, target=RunStatus.RUNNING, at=time.time())))
    dispatch = WriteBatch(
        run_id, steps=[c for s in steps for c in (change(s, S.PENDING, S.QUEUED, 0),
                                                  change(s, S.QUEUED, S.RUNNING, 1))],
        dispatch=[Ticket(run_id=run_id, step_id=s, attempt=1, priority=float(n),
                         payload={"call": "bench:step", "input": {"n": n}})
                  for n, s in enumerate(steps)])
    await timed(times["dispatch 16 (write)"], lambda: store.write(dispatch))
    leases = await timed(times["claim 16"], lambda: store.claim_attempts("w1", WIDTH, 30.0))
    assert len(leases) == WIDTH
    results = [(lease.token, InboxOutcome(run_id=run_id, step_id=lease.step_id,
                                     attempt=lease.attempt, kind="ok",
                                     output={"step": lease.step_id, "n": 1}, at=time.time()))
               for lease in leases]
    done = await timed(times["complete 16"], lambda: store.complete_attempts("w1", results))
    assert all(done)
    apply = WriteBatch(run_id, steps=[change(s, S.RUNNING, S.COMPLETED, 1) for s in steps],
                       consumed=[(s, 1, False) for s in steps])
    await timed(times["apply 16 outcomes (write)"], lambda: store.write(apply))


async def measure(url: str, repeat: int) -> dict[str, list[float]]:
    store = PostgresStore(url)
    await store.open()
    times: dict[str, list[float]] = {name: [] for name in (
        "dispatch 16 (write)", "claim 16", "complete 16", "apply 16 outcomes (write)")}
    try:
        for _ in range(10):  # warm-up: connections, prepared statements, plans
            await one_round(store, {name: [] for name in times})
        for _ in range(repeat):
            await one_round(store, times)
    finally:
        await store.close()
    return times


def scratch_database() -> tuple[str, Callable[[], None]]:
    name = f"plait_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(SERVER, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    parts = urlsplit(SERVER)
    url = urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))

    def drop() -> None:
        with psycopg.connect(SERVER, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))

    return url, drop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", help="a PostgreSQL database URL (default: a scratch one)")
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    url, drop = (args.db, lambda: None) if args.db else scratch_database()
    try:
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT current_setting('server_version'), "
                               "current_setting('synchronous_commit')").fetchone()
        times = asyncio.run(measure(url, args.repeat))
    finally:
        drop()
    assert row is not None
    print(f"PostgreSQL {row[0]}, synchronous_commit={row[1]}, {args.repeat} repeats, ms:")
    print(f"{'call':<28}{'median':>8}{'p90':>8}{'max':>8}")
    for name, values in times.items():
        ordered = sorted(values)
        p90 = ordered[int(0.9 * (len(ordered) - 1))]
        print(f"{name:<28}{statistics.median(ordered):>8.2f}{p90:>8.2f}{ordered[-1]:>8.2f}")


if __name__ == "__main__":
    main()
