"""What a driven run's poll and ``GET /api/runs/{id}`` cost on PostgreSQL: statements
and latency.

    PLAIT_TEST_DATABASE_URL=postgresql://... python benchmarks/run_reads.py [--steps 100]
        [--requests 200] [--db postgresql|sqlite]

On a fresh database at PLAIT_TEST_DATABASE_URL's server, in this process: a server
with a worker (``create_app``, driven by FastAPI's TestClient) runs a workflow of
``--steps`` transform steps to completion; then a server without a worker (nothing
else talks to the database meanwhile) answers ``GET /api/runs/{id}`` ``--requests``
times.  Reported: the SQL statements one request sends (every statement goes through
``psycopg.AsyncCursor.execute``, counted while the request runs), the latency of the
request (p50, p95, as the client sees it, TestClient included), and the statements one
poll of a driven run sends (``runtime.waiting.Watch.poll`` on a claimed run: the lease
renewed, the cancel flag read).  ``--db sqlite``: the same on a SQLite file in a
temporary directory, latency only (its statements are not counted).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
import uuid
import warnings
from typing import Any

import psycopg

from plait.runtime.waiting import Watch
from plait.server import ServerSettings, create_app
from plait.store.url import open_store

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

SENT: list[str] = []
_original = psycopg.AsyncCursor.execute


async def _counting(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
    SENT.append(query if isinstance(query, str) else repr(query))
    return await _original(self, query, *args, **kwargs)


psycopg.AsyncCursor.execute = _counting  # type: ignore[method-assign]


def fresh_pg(url: str) -> str:
    name = f"bench_reads_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return url.rsplit("/", 1)[0] + "/" + name


def settings() -> ServerSettings:
    return ServerSettings(allowed_hostnames=("testserver",))


def run_to_completion(db: str, steps: int) -> str:
    definition = {"name": "reads", "steps": [
        {"id": f"s{i}", "type": "transform", "value": {"i": i, "text": "x" * 40},
         **({"depends_on": [f"s{i - 1}"]} if i else {})} for i in range(steps)]}
    with TestClient(create_app(db, settings=settings(), worker=True)) as client:
        client.post("/api/workflows", json=definition).raise_for_status()
        run_id: str = client.post("/api/runs", json={"workflow": "reads"}).json()["run_id"]
        deadline = time.monotonic() + 120
        while client.get(f"/api/runs/{run_id}").json()["status"] != "completed":
            if time.monotonic() > deadline:
                raise SystemExit("the run did not complete in 120 s")
            time.sleep(0.05)
    return run_id


def read_document(db: str, run_id: str, requests: int) -> dict[str, Any]:
    with TestClient(create_app(db, settings=settings(), worker=False)) as client:
        for _ in range(20):  # warm-up: pool, statement cache
            client.get(f"/api/runs/{run_id}").raise_for_status()
        SENT.clear()
        client.get(f"/api/runs/{run_id}").raise_for_status()
        statements = len(SENT)
        times = []
        for _ in range(requests):
            start = time.perf_counter()
            client.get(f"/api/runs/{run_id}").raise_for_status()
            times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return {"statements": statements, "p50_ms": round(statistics.median(times), 2),
            "p95_ms": round(times[int(len(times) * 0.95) - 1], 2)}


async def poll_statements(db: str, run_id: str) -> int:
    store = open_store(db)
    await store.open()
    try:
        await store.claim_run(run_id, "bench", time.time(), 30.0)
        watch = Watch(True, store, run_id, "bench", None)
        await watch.poll(time.time())  # warm-up
        SENT.clear()
        await watch.poll(time.time())
        return len(SENT)
    finally:
        await store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--db", choices=("postgresql", "sqlite"), default="postgresql")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.db == "sqlite":
            db = f"sqlite:///{tmp}/reads.db"
        else:
            base = os.environ.get("PLAIT_TEST_DATABASE_URL")
            if not base:
                raise SystemExit("set PLAIT_TEST_DATABASE_URL (a PostgreSQL server)")
            db = fresh_pg(base)
        run_id = run_to_completion(db, args.steps)
        report: dict[str, Any] = {"db": args.db, "steps": args.steps,
                                  "get_run": read_document(db, run_id, args.requests)}
        if args.db == "postgresql":
            report["poll_statements"] = asyncio.run(poll_statements(db, run_id))
        else:
            del report["get_run"]["statements"]
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
