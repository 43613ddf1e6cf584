"""Many clients at once: the API's store reads leave room for the runs the server
executes, and answers stay whole (benchmarks/server_load.py measures the speed)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from plait.server import create_app
from plait.server.runtime import API_READS, api_read_slots

from .conftest import HELLO, settings

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_api_reads_take_at_most_half_a_postgres_pool() -> None:
    assert api_read_slots("postgresql://u@h/db") == 5  # pool_max 10 by default
    assert api_read_slots("postgresql://u@h/db?pool_max=4") == 2
    assert api_read_slots("postgresql://u@h/db?pool_max=1") == 1
    assert api_read_slots("sqlite:///x.db") == API_READS
    assert api_read_slots("memory://") == API_READS


async def test_runs_complete_while_many_clients_poll(tmp_path: Any) -> None:
    app = create_app(f"sqlite:///{tmp_path}/load.db", settings=settings(), grace=2.0,
                     events_poll=0.05)
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), \
            httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        assert (await client.post("/api/workflows", json=HELLO)).status_code == 201
        runs = [(await client.post("/api/runs", json={"workflow": "hello",
                                                      "input": {"n": n}})).json()["run_id"]
                for n in range(5)]
        statuses: list[int] = []

        async def poll(i: int) -> None:
            for _ in range(6):
                if i % 5 == 0:
                    r = await client.get("/api/runs?limit=20")
                    assert len(r.json()["runs"]) == 5
                else:
                    r = await client.get(f"/api/runs/{runs[i % 5]}")
                    assert r.json()["run_id"] == runs[i % 5]
                statuses.append(r.status_code)

        await asyncio.wait_for(asyncio.gather(*(poll(i) for i in range(60))), 20)
        assert statuses == [200] * 360
        for run_id in runs:
            for _ in range(200):
                body = (await client.get(f"/api/runs/{run_id}")).json()
                if body["status"] == "completed":
                    break
                await asyncio.sleep(0.02)
            assert body["status"] == "completed" and body["output"] == f"{runs.index(run_id)}!"


async def test_api_store_reads_at_once_are_capped() -> None:
    app = create_app("memory://", settings=settings(), grace=2.0, events_poll=0.05)
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app), \
            httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        assert (await client.post("/api/workflows", json=HELLO)).status_code == 201
        run_id = (await client.post("/api/runs", json={"workflow": "hello",
                                                       "input": {"n": 1}})).json()["run_id"]
        store = app.state.runtime.store
        now, most = 0, 0

        def counted(read: Any) -> Any:
            async def wrapper(*args: Any, **kwargs: Any) -> Any:
                nonlocal now, most
                now += 1
                most = max(most, now)
                try:
                    await asyncio.sleep(0.002)  # a read that takes a while
                    return await read(*args, **kwargs)
                finally:
                    now -= 1
            return wrapper

        for name in ("get_run", "get_steps", "get_attempts", "get_events", "list_runs"):
            setattr(store, name, counted(getattr(store, name)))
        urls = [f"/api/runs/{run_id}", "/api/runs"] * 30
        answers = await asyncio.gather(*(client.get(url) for url in urls))
        assert [a.status_code for a in answers] == [200] * len(urls)
        assert 1 < most <= API_READS
