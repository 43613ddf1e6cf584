"""Streamed chat completions: an ``llm`` step (or ``ctx.llm``) with ``stream: true``.

The request asks for Server-Sent Events (``"stream": true, "stream_options":
{"include_usage": true}``, so the token usage arrives in a last chunk).  ``read_stream``
reads the events as they come, assembles the answer from their deltas (the content,
the tool calls by their ``index``, the finish reason, the usage, the model) and returns
it as the JSON body of the chat completion the same request without streaming would
have got: the step's output is then built exactly as for an answer read whole
(``llm._completion``: JSON parsing, ``response_format`` checks, tool calls, usage note).

While tokens arrive, the text so far is emitted (a history note ``{"emit": {"value":
{"content": TEXT, "call": NAME or null}, "attempt", "at"}}``, as ``ctx.emit`` stores)
by an ``Emitter``: at once when ``EMIT_EVERY_S`` passed since the last emit, else when
that interval ends (a timer of the event loop), so new text never waits longer than
``EMIT_EVERY_S`` to be emitted.  A text larger than an emit may hold is emitted as its
tail (``"cut"``: how many characters of its head were left out).

What fails the attempt (retryable, naming what went wrong): a chunk (one event) over
``MAX_EVENT_BYTES``, an event that is not a chat completion chunk (garbage), an error
event of the provider, a stream that ends before its ``data: [DONE]`` (cut, or never
terminated), more than ``MAX_STREAM_BYTES`` in all; a connection that breaks while
reading fails as any transport error does.  The emits are partial outputs only: the
step's output is stored when the whole answer was read, never from them.

A server that answers ``stream: true`` with one JSON body (it does not stream) is read
as if it had not been asked to.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import httpx

from ..core.model import JSON, JSONDict
from ..errors import StepError

MAX_EVENT_BYTES = 1 << 20  # one event of the stream (a chunk) at most
MAX_STREAM_BYTES = 64 << 20  # the whole stream at most
EMIT_EVERY_S = 0.2  # new text is emitted at most this long after it arrived
MAX_EMITTED_CHARS = 256 * 1024  # an emit's text at most (its tail, when longer)

clock: Callable[[], float] = time.monotonic  # the Emitter's clock (tests replace it)
Later = Callable[[float, Callable[[], None]], Any]  # call_later(delay, fn) -> a handle


def stream_body(body: JSONDict) -> JSONDict:
    """``body`` asking the server to stream, with the usage in its last chunk."""
    return {**body, "stream": True, "stream_options": {"include_usage": True}}


class Emitter:
    """Emits the latest text (``update``) at most ``every`` seconds apart, and never
    later than ``every`` seconds after it arrived (see the module docstring)."""

    def __init__(self, emit: Callable[[str], None], *, every: float = EMIT_EVERY_S,
                 now: Callable[[], float] | None = None, later: Later | None = None) -> None:
        self._emit = emit
        self._every = every
        self._now = now if now is not None else clock
        self._later = later
        self._last: float | None = None  # when the last emit was
        self._text = ""  # the latest text
        self._sent = ""  # the text last emitted
        self._timer: Any = None

    def update(self, text: str) -> None:
        self._text = text
        now = self._now()
        if self._last is None or now - self._last >= self._every:
            self._flush(now)
        elif self._timer is None:
            later = self._later or asyncio.get_running_loop().call_later
            self._timer = later(self._last + self._every - now, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._flush(self._now())

    def _flush(self, now: float) -> None:
        if self._text == self._sent:
            return
        self._last, self._sent = now, self._text
        self._emit(self._text)

    def close(self, *, flush: bool) -> None:
        """The stream ended (``flush``: whole; the text not emitted yet is) or
        failed: no timer is left behind."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if flush:
            self._flush(self._now())


def emitted_value(text: str, call: str | None) -> JSONDict:
    """What an emit of ``text`` holds: the text (its tail when too long)."""
    value: JSONDict = {"content": text, "call": call}
    if len(text) > MAX_EMITTED_CHARS:
        value["content"] = text[-MAX_EMITTED_CHARS:]
        value["cut"] = len(text) - MAX_EMITTED_CHARS
    return value


class _Answer:
    """The answer assembled from the chunks' deltas."""

    def __init__(self) -> None:
        self.content: list[str] = []
        self.size = 0  # characters of content
        self.calls: dict[int, JSONDict] = {}  # tool calls by their index
        self.finish: str | None = None
        self.model: str | None = None
        self.usage: JSON = None
        self.chunks = 0

    def add(self, chunk: JSONDict) -> bool:
        """Fold one chunk in; whether it brought new content."""
        self.chunks += 1
        if isinstance(chunk.get("model"), str) and self.model is None:
            self.model = chunk["model"]  # type: ignore[assignment]
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        choices = chunk.get("choices")
        if choices is None:
            choices = []
        if not isinstance(choices, list):
            raise TypeError("`choices` is not a list")
        grew = False
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            reason = choice.get("finish_reason")
            if isinstance(reason, str):
                self.finish = reason
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                raise TypeError("`delta` is not a mapping")
            text = delta.get("content")
            if isinstance(text, str) and text:
                self.content.append(text)
                self.size += len(text)
                grew = True
            elif text is not None and not isinstance(text, str):
                raise TypeError("`delta.content` is not text")
            self._add_calls(delta.get("tool_calls"))
        return grew

    def _add_calls(self, deltas: Any) -> None:
        if deltas is None:
            return
        if not isinstance(deltas, list):
            raise TypeError("`delta.tool_calls` is not a list")
        for delta in deltas:
            if not isinstance(delta, dict):
                raise TypeError("a tool call delta is not a mapping")
            index = delta.get("index", len(self.calls))
            if not isinstance(index, int):
                raise TypeError("a tool call delta's `index` is not an integer")
            call = self.calls.setdefault(index, {"id": None, "type": "function",
                                                 "function": {"name": "", "arguments": ""}})
            if isinstance(delta.get("id"), str):
                call["id"] = delta["id"]
            fn = delta.get("function") or {}
            if not isinstance(fn, dict):
                raise TypeError("a tool call delta's `function` is not a mapping")
            parts = call["function"]
            assert isinstance(parts, dict)
            for key in ("name", "arguments"):
                piece = fn.get(key)
                if isinstance(piece, str):
                    parts[key] = str(parts[key]) + piece

    @property
    def text(self) -> str:
        if len(self.content) > 1:
            self.content = ["".join(self.content)]
        return self.content[0] if self.content else ""

    def completion(self, model: JSON) -> JSONDict:
        """The chat completion the same request without streaming would have got."""
        message: JSONDict = {"role": "assistant", "content": self.text or None}
        if self.calls:
            message["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
        out: JSONDict = {"object": "chat.completion", "model": self.model or model,
                         "choices": [{"index": 0, "finish_reason": self.finish,
                                      "message": message}]}
        if self.usage is not None:
            out["usage"] = self.usage
        return out


def _events(buffer: bytearray) -> list[bytes]:
    """The complete events at the head of ``buffer`` (removed from it)."""
    out: list[bytes] = []
    while True:
        ends = [(i, len(sep)) for sep in (b"\n\n", b"\r\n\r\n", b"\r\r")
                if (i := buffer.find(sep)) >= 0]
        if not ends:
            return out
        at, size = min(ends)
        out.append(bytes(buffer[:at]))
        del buffer[:at + size]


def _data(event: bytes) -> str | None:
    """The ``data:`` of an event (its lines joined), None for a comment or no data."""
    lines = []
    for line in event.decode("utf-8", errors="replace").splitlines():
        if line.startswith("data:"):
            lines.append(line[5:].removeprefix(" "))
    return "\n".join(lines) if lines else None


class StreamFailed(StepError):
    """A streamed answer could not be read whole (retryable)."""


async def read_stream(response: httpx.Response, *, who: str, step: str, where: str,
                      model: JSON, on_text: Callable[[str], None]) -> bytes:
    """The chat completion (JSON) assembled from a streamed ``response``; ``on_text``
    gets the text so far whenever it grew.  StreamFailed naming what went wrong."""
    answer = _Answer()
    buffer = bytearray()
    total = 0

    def fail(why: str) -> StreamFailed:
        return StreamFailed(f"{who}: the streamed answer of {where} {why} "
                            f"(after {answer.chunks} chunks)", step=step)

    async for data in response.aiter_bytes():
        total += len(data)
        if total > MAX_STREAM_BYTES:
            raise fail(f"is larger than {MAX_STREAM_BYTES:,} bytes")
        buffer += data
        for event in _events(buffer):
            if len(event) > MAX_EVENT_BYTES:
                raise fail(f"sent a chunk larger than {MAX_EVENT_BYTES:,} bytes")
            text = _data(event)
            if text is None:
                continue
            if text.strip() == "[DONE]":
                return json.dumps(answer.completion(model)).encode()
            if _fold(answer, text, fail):
                on_text(answer.text)
        if len(buffer) > MAX_EVENT_BYTES:
            raise fail(f"sent a chunk larger than {MAX_EVENT_BYTES:,} bytes")
    raise fail("ended before its end (`data: [DONE]`): the stream was cut")


def _fold(answer: _Answer, text: str, fail: Callable[[str], StreamFailed]) -> bool:
    try:
        chunk = json.loads(text)
    except ValueError:
        raise fail(f"sent a chunk that is not JSON: {text[:80]!r}") from None
    if not isinstance(chunk, dict):
        raise fail(f"sent a chunk that is not a chat completion chunk: {text[:80]!r}")
    error = chunk.get("error")
    if error is not None:
        message = error.get("message") if isinstance(error, dict) else error
        raise fail(f"sent an error: {str(message)[:200]}")
    try:
        return answer.add(chunk)
    except TypeError as exc:
        raise fail(f"sent a chunk that is not a chat completion chunk ({exc})") from None
