"""``stream: true`` on ``llm`` steps and ``ctx.llm``: the answer read as Server-Sent
Events, the text so far emitted while it arrives, the output as without streaming.

respx stands in for the endpoint; its streamed bodies are async byte streams that can
stop half-way, send garbage or raise mid-stream.  The emit cadence is checked against a
fake clock (``plait.steps.llmstream.clock``) that each chunk moves on.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
import respx

from plait import DefinitionError, StepContext, Workflow
from plait.runtime.engine import Engine
from plait.steps import llmstream
from plait.steps.llmstream import Emitter
from plait.store import open_store

FAST = {"max_retries": 2, "initial_delay": 0.01, "jitter": 0}
BASE = "https://llm.test/v1"
URL = f"{BASE}/chat/completions"
SSE = {"content-type": "text/event-stream"}
WORDS = ["The ", "quick ", "brown ", "fox ", "jumps ", "over ", "the ", "lazy ", "dog."]
USAGE = {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14}


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_LLM_KEY", "sk-stream-test")


def step(**fields: object) -> dict[str, object]:
    return {"id": "ask", "type": "llm", "base_url": BASE, "model": "gpt-test",
            "api_key_env": "TEST_LLM_KEY", "prompt": "Tell me", "stream": True,
            "retry": FAST, **fields}


def event(body: object) -> bytes:
    return f"data: {json.dumps(body)}\n\n".encode()


def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
    return event({"id": "c1", "object": "chat.completion.chunk", "model": "gpt-test-0613",
                  "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def answer_events(words: list[str] = WORDS, *, usage: bool = True,
                  done: bool = True) -> list[bytes]:
    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": word}) for word in words]
    out.append(chunk({}, "stop"))
    if usage:
        out.append(event({"id": "c1", "object": "chat.completion.chunk",
                          "model": "gpt-test-0613", "choices": [], "usage": USAGE}))
    if done:
        out.append(b"data: [DONE]\n\n")
    return out


class Body(httpx.AsyncByteStream):
    """A streamed body: ``parts`` one by one (``before`` called before each), then
    ``error`` raised if given."""

    def __init__(self, parts: list[bytes], *, before: Callable[[int], None] | None = None,
                 error: Exception | None = None) -> None:
        self.parts, self.before, self.error = parts, before, error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for i, part in enumerate(self.parts):
            if self.before is not None:
                self.before(i)
            yield part
        if self.error is not None:
            raise self.error


def streamed(parts: list[bytes], **kwargs: object) -> httpx.Response:
    return httpx.Response(200, headers=SSE, stream=Body(parts, **kwargs))  # type: ignore[arg-type]


async def run_and_events(wf: Workflow) -> tuple[object, list[dict[str, object]]]:
    store = open_store("memory://")
    await store.open()
    engine = Engine(store)
    try:
        result = await engine.run(wf.validate(), {})
        events = await store.get_events(result.run_id)
    finally:
        engine.close()
        await store.close()
    notes = [e.data for e in events if e.kind == "note" and e.step_id == "ask"]
    return result, notes


def emitted(notes: list[dict[str, object]]) -> list[dict[str, object]]:
    return [n["emit"]["value"] for n in notes if "emit" in n]  # type: ignore[index]


async def test_streamed_output_is_what_it_would_be_without_streaming(
        respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(URL).mock(return_value=streamed(answer_events()))

    result, notes = await run_and_events(Workflow.from_dict(
        {"name": "stream", "steps": [step()]}))

    out = result.steps["ask"]  # type: ignore[attr-defined]
    assert (out.status, out.attempts) == ("completed", 1)
    assert out.output == {"content": "".join(WORDS), "json": None,
                          "model": "gpt-test-0613", "finish_reason": "stop",
                          "usage": USAGE}
    sent = route.calls.last.request
    body = json.loads(sent.content)
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert sent.headers["accept"] == "text/event-stream"
    assert [n["usage"]["total_tokens"] for n in notes if "usage" in n] == [14]
    texts = [v["content"] for v in emitted(notes)]
    assert texts and texts[-1] == "".join(WORDS)  # the whole text is emitted last
    assert all(b.startswith(a) and len(b) > len(a) for a, b in zip(texts, texts[1:]))
    assert all(v["call"] is None for v in emitted(notes))


async def test_text_is_emitted_at_least_every_250ms_of_the_streams_clock(
        respx_mock: respx.MockRouter, monkeypatch: pytest.MonkeyPatch) -> None:
    # chunk i arrives at 0.07 * i s of a fake clock: the emitted texts tell which
    # chunk each emit followed, so their gaps are measured on that clock
    now = [0.0]
    monkeypatch.setattr(llmstream, "clock", lambda: now[0])
    words = [f"w{i} " for i in range(40)]

    def tick(i: int) -> None:
        now[0] = 0.07 * i

    respx_mock.post(URL).mock(return_value=streamed(answer_events(words), before=tick))
    _, notes = await run_and_events(Workflow.from_dict({"name": "cadence",
                                                        "steps": [step()]}))

    prefixes = ["".join(words[:n]) for n in range(len(words) + 1)]
    # chunk 0 is the role, chunk n (1..40) brings words[:n]
    arrived = [0.07 * prefixes.index(v["content"]) for v in emitted(notes)]  # type: ignore[arg-type]
    assert arrived[0] == pytest.approx(0.07)  # the first token is emitted at once
    assert len(arrived) < len(words)  # not one emit per token
    gaps = [b - a for a, b in zip(arrived, arrived[1:])]
    assert max(gaps) <= 0.25 + 1e-9
    assert emitted(notes)[-1]["content"] == "".join(words)


def test_the_emitter_never_holds_text_longer_than_its_interval() -> None:
    now = [0.0]
    timers: list[tuple[float, Callable[[], None]]] = []
    sent: list[tuple[float, str]] = []

    class Handle:
        def cancel(self) -> None:
            timers.clear()

    def later(delay: float, fn: Callable[[], None]) -> Handle:
        timers.append((now[0] + delay, fn))
        return Handle()

    emitter = Emitter(lambda text: sent.append((now[0], text)), every=0.2,
                      now=lambda: now[0], later=later)
    emitter.update("a")  # t=0: at once
    now[0] = 0.05
    emitter.update("ab")  # held: a timer for t=0.2
    assert sent == [(0.0, "a")] and [t for t, _ in timers] == [pytest.approx(0.2)]
    now[0] = 0.2
    timers.pop()[1]()  # the timer fires with no new token: the held text goes
    assert sent[-1] == (0.2, "ab")
    now[0] = 1.0
    emitter.update("abc")  # long after: at once
    now[0] = 1.1
    emitter.update("abcd")
    emitter.close(flush=True)  # the end: what is held goes, no timer left
    assert sent[-2:] == [(1.0, "abc"), (1.1, "abcd")] and timers == []


async def test_tool_call_deltas_are_assembled(respx_mock: respx.MockRouter) -> None:
    parts = [chunk({"role": "assistant", "content": None}),
             chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                    "function": {"name": "search", "arguments": ""}}]}),
             chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"query": '}}]}),
             chunk({"tool_calls": [{"index": 1, "id": "call_2", "type": "function",
                                    "function": {"name": "fetch", "arguments": '{"n": 2}'}}]}),
             chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"heat"}'}}]}),
             chunk({}, "tool_calls"), b"data: [DONE]\n\n"]
    respx_mock.post(URL).mock(return_value=streamed(parts))
    tools = [{"type": "function", "function": {"name": "search"}},
             {"type": "function", "function": {"name": "fetch"}}]

    result, notes = await run_and_events(Workflow.from_dict(
        {"name": "tools", "steps": [step(tools=tools)]}))

    out = result.steps["ask"].output  # type: ignore[attr-defined]
    assert out["tool_calls"] == [{"id": "call_1", "name": "search",
                                  "arguments": {"query": "heat"}},
                                 {"id": "call_2", "name": "fetch", "arguments": {"n": 2}}]
    assert (out["finish_reason"], out["content"]) == ("tool_calls", "")
    # no usage chunk: counted as zero, as a completion without usage is
    assert out["usage"] == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    assert emitted(notes) == []  # no text came


async def test_a_streamed_json_answer_is_checked_against_its_schema(
        respx_mock: respx.MockRouter) -> None:
    schema = {"type": "object", "required": ["score"],
              "properties": {"score": {"type": "integer"}}}
    respx_mock.post(URL).mock(side_effect=[
        streamed(answer_events(['{"score": ', '"three"}'])),
        streamed(answer_events(['{"score"', ': 3}'])),
    ])
    fmt = {"type": "json_schema", "json_schema": {"name": "g", "schema": schema}}

    result, _ = await run_and_events(Workflow.from_dict(
        {"name": "json", "steps": [step(response_format=fmt)]}))

    out = result.steps["ask"]  # type: ignore[attr-defined]
    assert (out.status, out.attempts, out.output["json"]) == ("completed", 2, {"score": 3})


@pytest.mark.parametrize(("parts", "error", "expected"), [
    (answer_events(done=False), None, "ended before its end (`data: [DONE]`): the "
                                      "stream was cut"),
    (answer_events()[:4], httpx.RemoteProtocolError("peer closed connection"),
     "RemoteProtocolError: peer closed connection"),
    ([chunk({"content": "Hi"}), b"data: {garbage\n\n"], None, "not JSON: '{garbage'"),
    ([b"data: [1, 2]\n\n"], None, "not a chat completion chunk"),
    ([chunk({"content": "Hi"}), event({"error": {"message": "overloaded"}})], None,
     "sent an error: overloaded"),
    ([b"data: " + b"x" * (1 << 20) + b"\n\n"], None, "a chunk larger than 1,048,576 bytes"),
    ([b"data: " + b"x" * (1 << 20)], None, "a chunk larger than 1,048,576 bytes"),
], ids=["cut", "connection-broken", "garbage", "not-a-chunk", "error-event",
        "oversize-chunk", "oversize-unterminated"])
async def test_a_broken_stream_fails_the_attempt_naming_why_and_retries(
        respx_mock: respx.MockRouter, parts: list[bytes], error: Exception | None,
        expected: str) -> None:
    route = respx_mock.post(URL).mock(side_effect=lambda request: streamed(parts,
                                                                            error=error))

    result, notes = await run_and_events(Workflow.from_dict(
        {"name": "broken", "steps": [step()]}))

    out = result.steps["ask"]  # type: ignore[attr-defined]
    assert (out.status, out.attempts, route.call_count) == ("failed", 3, 3)
    assert expected in (out.error or "")
    assert out.output is None  # partial emits are never the output
    assert not [n for n in notes if "usage" in n]


async def test_a_cut_stream_retries_and_the_next_attempt_completes(
        respx_mock: respx.MockRouter) -> None:
    respx_mock.post(URL).mock(side_effect=[streamed(answer_events(done=False)),
                                           streamed(answer_events())])

    result, notes = await run_and_events(Workflow.from_dict(
        {"name": "retry", "steps": [step()]}))

    out = result.steps["ask"]  # type: ignore[attr-defined]
    assert (out.status, out.attempts, out.output["content"]) == ("completed", 2,
                                                                 "".join(WORDS))
    attempts = {n["emit"]["attempt"] for n in notes if "emit" in n}
    assert attempts == {1, 2}  # each attempt's partial text is its own


async def test_a_server_that_does_not_stream_is_read_whole(
        respx_mock: respx.MockRouter) -> None:
    respx_mock.post(URL).respond(200, json={
        "model": "gpt-test", "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": "ok"}}],
        "usage": USAGE})

    result, _ = await run_and_events(Workflow.from_dict({"name": "whole",
                                                         "steps": [step()]}))

    assert result.steps["ask"].output["content"] == "ok"  # type: ignore[attr-defined]


async def ask_streamed(ctx: StepContext) -> object:
    out = await ctx.llm("turn-1", base_url=BASE, model="gpt-test",
                        api_key_env="TEST_LLM_KEY", prompt="Tell me", stream=True)
    return out["content"]


async def test_ctx_llm_streams_and_its_emits_name_the_call(
        respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post(URL).mock(return_value=streamed(answer_events()))
    wf = Workflow("ctx-stream")
    wf.add_step("ask", ask_streamed)

    result, notes = await run_and_events(wf)

    assert result.steps["ask"].output == "".join(WORDS)  # type: ignore[attr-defined]
    assert json.loads(route.calls.last.request.content)["stream"] is True
    values = emitted(notes)
    assert values[-1] == {"content": "".join(WORDS), "call": "turn-1"}


def test_stream_must_be_a_boolean() -> None:
    with pytest.raises(DefinitionError) as info:
        Workflow.from_dict({"name": "bad", "steps": [step(stream="yes")]}).validate()
    assert "stream" in str(info.value) and "true or false" in str(info.value)
