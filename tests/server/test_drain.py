"""Shutdown drains: the runs the server executes get the grace period to end; the
rest are released unfinished, resumable."""

from __future__ import annotations

import asyncio
import time
import warnings
from pathlib import Path

import pytest

from plait.runtime.engine import Engine
from plait.server import create_app
from plait.store.shared import StoreHandle

from .conftest import register, settings, wait_status

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _slow(seconds: str) -> dict:
    return {"name": "slow", "steps": [{"id": "wait", "type": "delay", "duration": seconds},
                                      {"id": "done", "type": "transform", "value": "ok",
                                       "depends_on": ["wait"]}]}


def _start(url: str, grace: float, definition: dict) -> tuple[TestClient, str]:
    client = TestClient(create_app(url, settings=settings(), grace=grace, events_poll=0.05))
    client.__enter__()
    register(client, definition)
    run_id = client.post("/api/runs", json={"workflow": "slow"}).json()["run_id"]
    # the delay parks: the run is stored waiting, held by the server until its time
    wait_status(client, run_id, ("waiting",))
    return client, run_id


def test_a_run_that_ends_within_the_grace_period_completes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/drain.db"
    client, run_id = _start(url, 5.0, _slow("500ms"))
    client.__exit__(None, None, None)
    assert asyncio.run(_status(url, run_id)) == ("completed", None)


def test_a_run_left_after_the_grace_period_is_resumable(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/drain.db"
    client, run_id = _start(url, 0.1, _slow("1s"))
    started = time.monotonic()
    client.__exit__(None, None, None)
    assert time.monotonic() - started < 0.9
    status, owner = asyncio.run(_status(url, run_id))
    assert status == "waiting" and owner is None  # released for plait resume

    async def resume() -> str:
        async with StoreHandle(url) as held:
            engine = Engine(held.store)
            return str((await engine.resume(run_id)).status)

    assert asyncio.run(resume()) == "completed"


async def _status(url: str, run_id: str) -> tuple[str, str | None]:
    async with StoreHandle(url) as held:
        run = await held.store.get_run(run_id)
        return str(run.status), run.owner


def test_a_stored_decision_stands_over_an_api_approval(tmp_path: Path) -> None:
    """A decision recorded by another process (plait approve) while nobody executes
    the run: the API's later one is refused with 409 naming the decision that stands."""
    from .conftest import GATED, error_of

    url = f"sqlite:///{tmp_path}/decided.db"
    client = TestClient(create_app(url, settings=settings(), grace=1.0, events_poll=0.05))
    with client:
        register(client, GATED)
        run_id = client.post("/api/runs", json={"workflow": "gated"}).json()["run_id"]
        wait_status(client, run_id, ("waiting",))

    async def decide() -> None:
        async with StoreHandle(url) as held:
            await Engine(held.store).approve(run_id, "sign_off", approved=False, by="ann")

    asyncio.run(decide())
    with TestClient(create_app(url, settings=settings(), grace=1.0)) as again:
        error = error_of(again.post(f"/api/runs/{run_id}/steps/sign_off/approve",
                                    json={"approved": True}), 409, "already_decided")
        assert error["details"]["decision"]["by"] == "ann"
        assert "ann" in error["message"]
