"""``GET /api/runs/{id}`` in pages: a run of more than 2,000 steps is read 2,000 step
entries at a time (with their attempts and logs) through the ``steps_next`` cursor; a
smaller run is the one document it always was."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient

from plait.core.states import RunStatus, StepStatus
from plait.rundoc.journal import add_journal
from plait.rundoc.llm_calls import add_llm, roll_up
from plait.rundoc.records import LogRecord, add_child_runs, add_waiting, child_runs, show_json
from plait.server.run_pages import STEPS_PER_PAGE, run_page
from plait.store.base import AttemptRecord, RunRecord, StepRecord

from .conftest import HELLO, Client, error_of, register, wait_status

ITEMS = 2_100
MAP: dict[str, Any] = {
    "name": "wide-map",
    "input": {"type": "object", "properties": {"xs": {"type": "array"}}},
    "steps": [{"id": "m", "type": "map", "over": "{{ input.xs }}",
               "step": {"type": "transform", "value": "{{ item }}"}},
              {"id": "after", "type": "transform", "depends_on": ["m"], "value": 1}],
}


def _start(client: TestClient, workflow: str, input: Any) -> str:
    response = client.post("/api/runs", json={"workflow": workflow, "input": input})
    assert response.status_code == 201, response.text
    return str(response.json()["run_id"])


def _unpaged(client: TestClient, run_id: str) -> bytes:
    """The document as the route encoded it before pages: every step in one (and the
    run's ``continuation``)."""
    store = client.app.state.runtime.store  # type: ignore[attr-defined]

    async def read() -> bytes:
        run = await store.get_run(run_id)
        events = await store.get_events(run_id)
        steps = await store.get_steps(run_id)
        value = show_json(run, steps, await store.get_attempts(run_id),
                          LogRecord.from_events(events))
        definition = (await store.get_workflow(run.workflow, run.version)).definition
        add_child_runs(value, await child_runs(store, run, definition))
        value["continuation"] = None  # no decision left unapplied (runtime.continuation)
        add_waiting(value, events)
        add_journal(value, await store.journal(run_id))
        add_llm(value, events, await roll_up(store, run, events,
                                             [s.step_id for s in steps], definition))
        return bytes(JSONResponse(value).body)

    assert client.portal is not None
    return client.portal.call(read)


def test_a_run_under_the_page_size_is_one_document_as_before(make_client: Client) -> None:
    client = make_client()
    register(client, HELLO)
    run_id = _start(client, "hello", {"n": 1})
    wait_status(client, run_id, ("completed",))
    response = client.get(f"/api/runs/{run_id}")
    assert response.status_code == 200
    assert "steps_next" not in response.json()
    assert response.content == _unpaged(client, run_id)


def test_a_big_run_is_read_in_pages(make_client: Client) -> None:
    client = make_client()
    register(client, MAP)
    run_id = _start(client, "wide-map", {"xs": list(range(ITEMS))})
    wait_status(client, run_id, ("completed",), timeout=60)
    first = client.get(f"/api/runs/{run_id}").json()
    assert len(first["steps"]) == STEPS_PER_PAGE and first["steps_next"]
    assert list(first["steps"])[:3] == ["m", "after", "m[0]"]  # definition, then items
    second = client.get(f"/api/runs/{run_id}",
                        params={"steps_after": first["steps_next"]}).json()
    assert second["steps_next"] is None
    assert list(second["steps"])[-1] == f"m[{ITEMS - 1}]"
    for page in (first, second):
        assert {k: v for k, v in page.items() if k not in ("steps", "attempts", "logs",
                                                            "steps_next")} \
            == {k: v for k, v in first.items() if k not in ("steps", "attempts", "logs",
                                                             "steps_next")}
        assert {a["step"] for a in page["attempts"]} <= set(page["steps"])
    assert len(first["steps"]) + len(second["steps"]) == ITEMS + 2
    assert not set(first["steps"]) & set(second["steps"])
    assert second["steps"][f"m[{ITEMS - 1}]"]["output"] == ITEMS - 1
    assert len(first["attempts"]) + len(second["attempts"]) == ITEMS + 2


@pytest.mark.parametrize("cursor", ["x", "", "0", "-1", "07", "1.5", " 1", "\u0661",
                                    str(2**63), str(2**64), "9" * 400, "3000"])
def test_a_bad_cursor_is_refused_naming_the_parameter(make_client: Client,
                                                      cursor: str) -> None:
    client = make_client()
    register(client, HELLO)
    run_id = _start(client, "hello", {"n": 1})
    wait_status(client, run_id, ("completed",))
    error = error_of(client.get(f"/api/runs/{run_id}", params={"steps_after": cursor}),
                     400, "invalid_cursor")
    assert "steps_after" in error["message"] and "steps_after" in error["details"]


def _records(n: int) -> tuple[RunRecord, list[StepRecord], list[AttemptRecord],
                              list[LogRecord]]:
    run = RunRecord(run_id="r1", workflow="wf", version=1, fingerprint="f",
                    status=RunStatus.RUNNING, input={}, created_at=1.0)
    steps = [StepRecord(run_id="r1", step_id=f"s{i}", status=StepStatus.COMPLETED,
                        attempts=1, output=i) for i in range(n)]
    attempts = [AttemptRecord(run_id="r1", step_id=f"s{i}", attempt=1, fallback=False,
                              status="completed", started_at=2.0 + i, finished_at=3.0 + i)
                for i in range(n)]
    logs = [LogRecord(step=step, attempt=None, level="INFO", message="m", at=1.0)
            for step in (None, "s0", f"s{n - 1}")]
    return run, steps, attempts, logs


def test_pages_carry_their_steps_attempts_and_logs() -> None:
    run, steps, attempts, logs = _records(STEPS_PER_PAGE + 1)
    first = run_page(run, steps, attempts, logs)
    assert first["steps_next"] == str(STEPS_PER_PAGE)
    assert [log["step"] for log in first["logs"]] == [None, "s0"]
    assert len(first["attempts"]) == STEPS_PER_PAGE
    last = run_page(run, steps, attempts, logs, STEPS_PER_PAGE)
    assert list(last["steps"]) == [f"s{STEPS_PER_PAGE}"]
    assert [log["step"] for log in last["logs"]] == [f"s{STEPS_PER_PAGE}"]
    assert [a["step"] for a in last["attempts"]] == [f"s{STEPS_PER_PAGE}"]
    assert last["steps_next"] is None
    assert run_page(run, steps[:-1], attempts, logs) == show_json(run, steps[:-1],
                                                                  attempts, logs)
