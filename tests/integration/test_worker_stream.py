"""A streamed ``llm`` step on ``plait worker``: the text so far reaches the store while
the attempt runs, not only with its outcome, whether the attempt is a ticket another
worker claims (a step with a pool) or runs eagerly on the driving worker."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
import respx

from plait.core.states import RunStatus, StepStatus
from plait.definitions import check_definition
from plait.store.base import Store
from plait.store.records import RunFilter

from .conftest import run_on_two_workers

WAIT_S = 30.0  # a bound on waiting, never a claim about speed
BASE = "https://llm.test/v1"


def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
    body = {"model": "gpt-test", "choices": [{"index": 0, "delta": delta,
                                              "finish_reason": finish}]}
    return f"data: {json.dumps(body)}\n\n".encode()


class HeldStream(httpx.AsyncByteStream):
    """Sends "Hello, ", waits for ``gates[0]``, sends "world", waits for ``gates[1]``,
    then ends the answer."""

    def __init__(self, gates: list[asyncio.Event]) -> None:
        self.gates = gates

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield chunk({"role": "assistant", "content": "Hello, "})
        await self.gates[0].wait()
        yield chunk({"content": "world"})
        await self.gates[1].wait()
        yield chunk({}, "stop")
        yield b'data: {"choices": [], "usage": {"prompt_tokens": 2, ' \
              b'"completion_tokens": 2, "total_tokens": 4}}\n\n'
        yield b"data: [DONE]\n\n"


async def emits_of(store: Store, run_id: str) -> list[dict[str, object]]:
    return [e.data["emit"] for e in await store.get_events(run_id)
            if e.kind == "note" and "emit" in e.data]


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgresql",
                                                          marks=pytest.mark.postgres)],
                         indirect=True)
@pytest.mark.parametrize("ticket", [True, False], ids=["ticket", "eager"])
async def test_a_partial_answer_is_stored_while_the_attempt_runs(
        store: Store, respx_mock: respx.MockRouter, monkeypatch: pytest.MonkeyPatch,
        ticket: bool) -> None:
    monkeypatch.setenv("TEST_LLM_KEY", "sk-worker-stream")
    gates = [asyncio.Event(), asyncio.Event()]
    respx_mock.post(f"{BASE}/chat/completions").mock(
        side_effect=lambda request: httpx.Response(
            200, headers={"content-type": "text/event-stream"},
            stream=HeldStream(gates)))  # type: ignore[arg-type]
    step: dict[str, object] = {"id": "ask", "type": "llm", "base_url": BASE,
                               "model": "gpt-test", "api_key_env": "TEST_LLM_KEY",
                               "prompt": "greet", "stream": True}
    definition: dict[str, object] = {"name": f"wf-{uuid.uuid4().hex[:8]}", "steps": [step]}
    if ticket:  # a step with a pool always gets a ticket (claimed by a worker)
        definition["pools"] = {"llm": {"concurrency": 1}}
        step["pool"] = "llm"
    checked = check_definition(definition)
    running = asyncio.create_task(run_on_two_workers(store, checked, WAIT_S))
    try:
        for text, gate in zip(["Hello, ", "Hello, world"], gates, strict=True):
            # each text is stored while the attempt is held (running), then it goes on
            run_id, seen = await stored_emit(store, checked.name, text, running)
            steps = {s.step_id: s for s in await store.get_steps(run_id)}
            assert steps["ask"].status == StepStatus.RUNNING
            assert seen["value"] == {"content": text, "call": None}
            gate.set()
    finally:
        for gate in gates:
            gate.set()
    run_id, status = await running
    assert status == RunStatus.COMPLETED
    emits = await emits_of(store, run_id)
    assert [e["value"]["content"] for e in emits] == ["Hello, ", "Hello, world"]  # type: ignore[index]
    output = {s.step_id: s for s in await store.get_steps(run_id)}["ask"].output
    assert output["content"] == "Hello, world"  # type: ignore[index]


async def stored_emit(store: Store, workflow: str, text: str,
                      running: asyncio.Task[object]) -> tuple[str, dict[str, object]]:
    """The run and its emit of ``text``, once stored (the workers still running)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while True:
        assert loop.time() < deadline, f"no partial answer {text!r} was stored"
        assert not running.done()
        for run in await store.list_runs(RunFilter(workflow=workflow)):
            for emit in await emits_of(store, run.run_id):
                if emit["value"]["content"] == text:  # type: ignore[index]
                    return run.run_id, emit
        await asyncio.sleep(0.02)
