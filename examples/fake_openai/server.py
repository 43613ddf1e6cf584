"""A small OpenAI-compatible chat completions server for examples and tests.

    python -m examples.fake_openai.server --port 8901      # from the repository root
    # then: base_url http://127.0.0.1:8901/v1, any key in the variable api_key_env names

``POST /v1/chat/completions`` answers deterministically from the last user message:

- no ``response_format`` (or ``type: text``): ``"echo: <the message>"``;
- ``type: json_object``: ``{"answer": "<the message>", "words": <word count>}``;
- ``type: json_schema``: a value built from the schema (objects get their properties,
  strings the message, numbers the word count, enums their first value, ...), so it
  validates against schemas of the usual kinds.

Scripted replies (``--replies FILE`` or the ``FAKE_OPENAI_REPLIES`` variable) answer
known prompts with chosen content: FILE holds a JSON list of rules
``{"match": REGEX, "reply": TEXT or JSON value}``, tried in order against the last user
message (``re.search``); the first that matches gives the content (a JSON value is sent
as JSON text), ``\\1`` / ``\\g<name>`` in its strings standing for the regex's groups.
A message no rule matches gets the answers above.  Rules depend only on the message, so
answers stay deterministic however many runs use the server.

Tools: a request with ``tools`` (and no ``tool_choice: none``) gets a deterministic
agent: it calls the listed tools in order, one per turn, turn N (the number of ``tool``
messages after the last user message) calling tool N with arguments built from its
``parameters`` schema as above (strings get the last user message); once every tool was
called, it answers ``done: `` and the tool results, joined by ``; ``.

``usage`` counts words.  A request without ``Authorization: Bearer ...`` gets a 401 in
OpenAI's error shape; with ``FAKE_OPENAI_KEY`` set, only that key is accepted.  A
message containing ``[429]`` gets one 429 with ``Retry-After: 0`` per distinct message
(then the answer), to show retries.  Standard library only.

Streaming: a request with ``"stream": true`` gets the same answer as Server-Sent
Events, as OpenAI sends them: a first chunk with the role, the content a word at a
time (a tool call's arguments in two pieces), a chunk with the finish reason, the
usage in a last chunk when ``stream_options.include_usage`` is true, then
``data: [DONE]``.  ``--chunk-delay SECONDS`` (or ``FAKE_OPENAI_CHUNK_DELAY``) waits
that long before each content chunk, to watch the text grow.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL_SUFFIX = "-fake"


Rule = tuple[re.Pattern[str], Any]


def load_replies(path: str) -> list[Rule]:
    """The rules of a replies file; ValueError naming the file and the bad rule."""
    with open(path, encoding="utf-8") as f:
        rules = json.load(f)
    if not isinstance(rules, list):
        raise ValueError(f"{path}: expected a JSON list of {{match, reply}} rules")
    loaded: list[Rule] = []
    for n, rule in enumerate(rules):
        if not isinstance(rule, dict) or not isinstance(rule.get("match"), str) \
                or "reply" not in rule:
            raise ValueError(f"{path}: rule {n} needs a string `match` and a `reply`")
        try:
            loaded.append((re.compile(rule["match"]), rule["reply"]))
        except re.error as exc:
            raise ValueError(f"{path}: rule {n}: bad regex {rule['match']!r}: {exc}") from exc
    return loaded


def _expand(value: Any, found: re.Match[str]) -> Any:
    if isinstance(value, str):
        return found.expand(value)
    if isinstance(value, list):
        return [_expand(v, found) for v in value]
    if isinstance(value, dict):
        return {k: _expand(v, found) for k, v in value.items()}
    return value


def scripted(rules: list[Rule], text: str) -> str | None:
    """The content the first matching rule gives, or None."""
    for pattern, reply in rules:
        found = pattern.search(text)
        if found:
            value = _expand(reply, found)
            return value if isinstance(value, str) else json.dumps(value)
    return None


def last_user_text(messages: list[Any]) -> tuple[str, int]:
    """The last user message's content and its index (-1: none)."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, dict) and message.get("role") == "user":
            return str(message.get("content", "")), i
    return "", -1


def tool_turn(request: dict[str, Any]) -> dict[str, Any] | None:
    """The next tool call of the deterministic agent (see the header), or None when
    every tool was called (or the request offers none)."""
    tools = request.get("tools")
    if not isinstance(tools, list) or not tools or request.get("tool_choice") == "none":
        return None
    messages = request.get("messages") or []
    text, at = last_user_text(messages)
    turn = sum(1 for m in messages[at + 1:] if isinstance(m, dict) and m.get("role") == "tool")
    if turn >= len(tools):
        return None
    function = tools[turn]["function"]
    arguments = from_schema(function.get("parameters") or {"type": "object"}, text)
    return {"id": f"call_{turn + 1}", "type": "function",
            "function": {"name": function["name"], "arguments": json.dumps(arguments)}}


def tools_done(request: dict[str, Any]) -> str | None:
    """The final answer once every offered tool was called, else None."""
    tools = request.get("tools")
    if not isinstance(tools, list) or not tools or request.get("tool_choice") == "none":
        return None
    messages = request.get("messages") or []
    _, at = last_user_text(messages)
    results = [str(m.get("content", "")) for m in messages[at + 1:]
               if isinstance(m, dict) and m.get("role") == "tool"]
    return "done: " + "; ".join(results)


def answer(request: dict[str, Any], rules: list[Rule] | None = None) -> tuple[str, str]:
    """(content, finish_reason) for a chat completion request."""
    messages = request.get("messages") or []
    text, _ = last_user_text(messages)
    done = tools_done(request)
    if done is not None:
        return done, "stop"
    content = scripted(rules or [], text)
    if content is not None:
        return content, "stop"
    fmt = request.get("response_format") or {}
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind == "json_object":
        return json.dumps({"answer": text, "words": len(text.split())}), "stop"
    if kind == "json_schema":
        schema = (fmt.get("json_schema") or {}).get("schema") or {}
        return json.dumps(from_schema(schema, text)), "stop"
    return f"echo: {text}", "stop"


def from_schema(schema: Any, text: str) -> Any:
    """A deterministic value of the usual JSON Schema shapes."""
    if not isinstance(schema, dict):
        return text
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {name: from_schema(sub, text) for name, sub in props.items()}
    if kind == "array":
        return [from_schema(schema.get("items") or {}, text)] * max(1, schema.get("minItems", 1))
    if kind in ("integer", "number"):
        value = max(len(text.split()), schema.get("minimum", 0))
        return min(value, schema.get("maximum", value))
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return text


class Handler(BaseHTTPRequestHandler):
    server_version = "fake-openai/1"
    replies: list[Rule] = []  # set by serve()/main() from --replies
    chunk_delay = 0.0  # seconds before each streamed content chunk
    limited: set[str] = set()
    lock = threading.Lock()

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, body: dict[str, Any],
              headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, kind: str,
               headers: dict[str, str] | None = None) -> None:
        self._send(status, {"error": {"message": message, "type": kind}}, headers)

    def do_POST(self) -> None:
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._error(404, f"no route {self.path}", "invalid_request_error")
            return
        auth = self.headers.get("Authorization", "")
        expected = os.environ.get("FAKE_OPENAI_KEY")
        if not auth.startswith("Bearer ") or (expected and auth[7:] != expected):
            self._error(401, "Incorrect API key provided.", "invalid_request_error")
            return
        try:
            size = int(self.headers.get("Content-Length", "0"))
            request = json.loads(self.rfile.read(size))
            if not isinstance(request, dict) or not request.get("model"):
                raise ValueError("`model` is required")
            call = tool_turn(request)
            content, finish = answer(request, self.replies) if call is None \
                else ("", "tool_calls")
        except (ValueError, TypeError, AttributeError) as exc:
            self._error(400, f"bad request: {exc}", "invalid_request_error")
            return
        last = json.dumps(request.get("messages"))
        if "[429]" in last:
            with self.lock:
                first = last not in self.limited
                self.limited.add(last)
            if first:
                self._error(429, "Rate limit reached", "rate_limit_error",
                            {"Retry-After": "0"})
                return
        prompt_tokens = sum(len(str(m.get("content", "")).split())
                            for m in request["messages"] if isinstance(m, dict))
        completion_tokens = len(content.split())
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if call is not None:
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            completion_tokens = len(call["function"]["arguments"].split())
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                 "total_tokens": prompt_tokens + completion_tokens}
        model = str(request["model"]) + MODEL_SUFFIX
        if request.get("stream") is True:
            options = request.get("stream_options")
            with_usage = isinstance(options, dict) and options.get("include_usage") is True
            self._stream(model, message, finish, usage if with_usage else None)
            return
        self._send(200, {
            "id": "chatcmpl-fake", "object": "chat.completion", "created": 0,
            "model": model,
            "choices": [{"index": 0, "finish_reason": finish,
                         "message": message}],
            "usage": usage})

    def _stream(self, model: str, message: dict[str, Any], finish: str,
                usage: dict[str, int] | None) -> None:
        """The answer as chat completion chunks (Server-Sent Events)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()

        def chunk(delta: dict[str, Any], reason: str | None = None, **extra: Any) -> None:
            body = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
                    "model": model, "choices": [{"index": 0, "delta": delta,
                                                 "finish_reason": reason}], **extra}
            self.wfile.write(f"data: {json.dumps(body)}\n\n".encode())
            self.wfile.flush()

        chunk({"role": "assistant", "content": ""})
        for piece in re.findall(r"\S+\s*|\s+", message.get("content") or ""):
            if self.chunk_delay:
                time.sleep(self.chunk_delay)
            chunk({"content": piece})
        for i, call in enumerate(message.get("tool_calls") or []):
            arguments = call["function"]["arguments"]
            half = len(arguments) // 2
            chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                   "function": {"name": call["function"]["name"],
                                                "arguments": arguments[:half]}}]})
            chunk({"tool_calls": [{"index": i, "function": {"arguments": arguments[half:]}}]})
        chunk({}, finish)
        if usage is not None:
            body = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
                    "model": model, "choices": [], "usage": usage}
            self.wfile.write(f"data: {json.dumps(body)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


def _handler(replies: str | None, chunk_delay: float = 0.0) -> type[Handler]:
    rules = load_replies(replies) if replies else []
    return type("ScriptedHandler", (Handler,), {"replies": rules, "limited": set(),
                                                "chunk_delay": chunk_delay})


def serve(host: str = "127.0.0.1", port: int = 0, replies: str | None = None,
          chunk_delay: float = 0.0) -> ThreadingHTTPServer:
    """A started server (in a daemon thread); ``server.server_address[1]`` is its port,
    ``server.shutdown()`` stops it.  ``replies``: a replies file (see above);
    ``chunk_delay``: seconds before each streamed content chunk."""
    server = ThreadingHTTPServer((host, port), _handler(replies, chunk_delay))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8901)
    parser.add_argument("--replies", default=os.environ.get("FAKE_OPENAI_REPLIES"),
                        help="a JSON file of {match, reply} rules for known prompts")
    parser.add_argument("--chunk-delay", type=float,
                        default=float(os.environ.get("FAKE_OPENAI_CHUNK_DELAY") or 0),
                        help="seconds before each streamed content chunk")
    args = parser.parse_args()
    try:
        handler = _handler(args.replies, args.chunk_delay)
    except (OSError, ValueError) as exc:
        parser.error(f"--replies: {exc}")
    server = ThreadingHTTPServer((args.host, args.port), handler)
    print(f"fake OpenAI server on http://{args.host}:{server.server_address[1]}/v1",
          flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
