"""A small OpenAI-compatible chat completions server for examples and tests.

    python -m examples.fake_openai.server --port 8901      # from the repository root
    # then: base_url http://127.0.0.1:8901/v1, any key in the variable api_key_env names

``POST /v1/chat/completions`` answers deterministically from the last user message:

- no ``response_format`` (or ``type: text``): ``"echo: <the message>"``;
- ``type: json_object``: ``{"answer": "<the message>", "words": <word count>}``;
- ``type: json_schema``: a value built from the schema (objects get their properties,
  strings the message, numbers the word count, enums their first value, ...), so it
  validates against schemas of the usual kinds.

``usage`` counts words.  A request without ``Authorization: Bearer ...`` gets a 401 in
OpenAI's error shape; with ``FAKE_OPENAI_KEY`` set, only that key is accepted.  A
message containing ``[429]`` gets one 429 with ``Retry-After: 0`` per distinct message
(then the answer), to show retries.  Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL_SUFFIX = "-fake"


def answer(request: dict[str, Any]) -> tuple[str, str]:
    """(content, finish_reason) for a chat completion request."""
    messages = request.get("messages") or []
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    text = str(users[-1].get("content", "")) if users else ""
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
            content, finish = answer(request)
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
        self._send(200, {
            "id": "chatcmpl-fake", "object": "chat.completion", "created": 0,
            "model": str(request["model"]) + MODEL_SUFFIX,
            "choices": [{"index": 0, "finish_reason": finish,
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}})


def serve(host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """A started server (in a daemon thread); ``server.server_address[1]`` is its port,
    ``server.shutdown()`` stops it."""
    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8901)
    args = parser.parse_args()
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    print(f"fake OpenAI server on http://{args.host}:{server.server_address[1]}/v1",
          flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
