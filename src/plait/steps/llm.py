"""The ``llm`` step type: one chat completion against an OpenAI-compatible endpoint.

Fields (every value but ``api_key_env`` may contain templates)::

    base_url         required; http(s) URL of the API, e.g. https://api.openai.com/v1
    model            required; the model name sent to the endpoint
    messages         a list of {role, content} messages ...
    prompt           ... or one text that becomes a single user message (exactly one
                     of ``messages`` and ``prompt``)
    api_key_env      required; the NAME of the environment variable holding the key
    response_format  optional: {type: text} | {type: json_object} |
                     {type: json_schema, json_schema: {name, schema: S}}
    temperature      optional number, passed through
    max_tokens       optional integer, passed through
    tools            optional: the functions the model may call, in OpenAI's shape
                     [{type: function, function: {name, description, parameters}}]
                     (checked by ``steps.llmtools``)
    stream           optional boolean: read the answer as it is generated, emitting
                     the text so far while it arrives (``steps.llmstream``); the
                     output is the same

One attempt POSTs ``{base_url}/chat/completions`` with ``{"model", "messages", ...}`` and
``Authorization: Bearer <key>``, the key read from the named environment variable when
the attempt starts.  The key is never stored, logged or shown: it is added to the values
redacted from everything stored (``steps.secrets.add_redacted``), so even a provider
that echoes it in an error message leaves only ``***`` in the history.  A variable that
is not set fails the step at once (no retry), naming the variable.

Output::

    {"content": str, "json": parsed content or null, "model": str,
     "finish_reason": str, "usage": {"prompt_tokens", "completion_tokens",
     "total_tokens"}}

``json`` is the parsed content when it is JSON (always, with a JSON response_format).
With ``tools`` (or when the model calls some anyway) the output adds ``"tool_calls":
[{"id", "name", "arguments"}]``, the arguments parsed from JSON (``steps.llmtools``).

``ctx.llm`` (``steps.llmcall``) sends the same request from a step's code, as a
journaled call: ``build_request`` and ``send`` serve both.

Failures and retries: 429, 408, 5xx and connection failures retry under the step's
retry policy, a ``Retry-After`` header setting the least delay (as for ``http``); any
other status fails at once with the status and the provider's error message.  With
``response_format`` ``json_object`` or ``json_schema`` the content must parse as JSON
(and match the schema ``S`` with JSON Schema draft 2020-12), else the attempt fails with
the reason and retries: models sometimes answer malformed JSON and a new sample usually
fixes it.  A response that is not a chat completion retries too.

The request: when an attempt is sent it leaves a history note ``{"llm_request":
{"attempt", "model", "messages", "cut"}}``: the rendered messages (``prompt`` as its one
user message), redacted like every note, and cut (``cut`` names by how much; else
null) so that the note is at most ``limits.max_output_bytes`` of JSON (and at most a
history note's bound): each message keeps the head of its content with a marker
``… [N more bytes cut]``.  ``plait show --step``, ``plait show --json``, the API and the
UI show the messages as a conversation (``rundoc.llm_calls``).

Token usage: every attempt that got a completion (also one whose JSON was refused) adds
a history note ``{"usage": {"attempt", "model", "prompt_tokens", "completion_tokens",
"total_tokens"}}`` to the step; ``plait metrics`` sums them per step and workflow.
With ``limits.max_llm_tokens`` each request is first checked against the run's token
budget and its tokens are counted in the store (``steps.budget``).

Security: the request goes through the same guarded client as ``http`` steps
(``netclient.guarded_client``): link-local and metadata addresses are refused before
connecting (see docs/security.md).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import httpx

from ..core import expressions
from ..core.model import JSON, JSONDict
from ..core.numbers import MAX_INT, shown
from ..core.trust import key_env_problem
from ..errors import FatalError, HTTPStatusError, StepError
from .budget import TokenBudget
from .context import MAX_NOTE_BYTES, StepLog
from .http import (
    _RETRYABLE_TRANSPORT,
    RETRYABLE_STATUSES,
    _check_url,
    _read_bounded,
    _shown,
    _url_problem,
    quoted_url,
    retry_after_seconds,
)
from .llmstream import Emitter, emitted_value, read_stream, stream_body
from .llmtools import has_template, tool_calls, tools_problem
from .netclient import guarded_client
from .registry import Services, StepCall
from .secrets import add_redacted
from .types import LLM_REQUEST_FIELDS

RESPONSE_FORMATS = ("text", "json_object", "json_schema")
REQUEST_FIELDS = LLM_REQUEST_FIELDS
ROLES = ("system", "user", "assistant", "tool", "developer")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")
_NOTE_HEADROOM = 4096  # of a history note's bound, for the note's other fields
_MARKER_BYTES = 48  # the most a cut marker ("… [N more bytes cut]") takes


# ------------------------------------------------------------------ the request


@dataclass(frozen=True, slots=True, kw_only=True)
class _Request:
    url: httpx.URL
    body: JSONDict
    json_mode: bool
    schema: JSONDict | None
    stream: bool = False  # read the answer as it is generated (steps.llmstream)


def _prepare(call: StepCall) -> _Request:
    config = call.step.config
    values = {name: call.render(config[name], name) for name in REQUEST_FIELDS
              if name in config}
    return build_request(values, call.step.id, f"step {call.step.id!r}")


def build_request(values: Mapping[str, JSON], step: str, who: str) -> _Request:
    """The request of ``values`` (the fields given, rendered); FatalError naming
    ``who`` and the field when one is wrong (every attempt would send it again)."""

    def fatal(message: str) -> FatalError:
        return FatalError(f"{who}: {message}", step=step)

    base = values.get("base_url")
    if not isinstance(base, str):
        raise fatal(f"`base_url` must be a URL, got {_kind(base)}")
    base = base.rstrip("/")
    problem = _url_problem(base)
    if problem is not None:
        raise fatal(f"`base_url` {quoted_url(base)}: {problem}")
    model = values.get("model")
    if not isinstance(model, str) or not model:
        raise fatal(f"`model` must be a non-empty text, got {model!r}")
    body: JSONDict = {"model": model, "messages": _messages_of(values, fatal)}
    for name in ("temperature", "max_tokens"):
        if name in values:
            problem = _number_problem(name, values[name])
            if problem is not None:
                raise fatal(f"`{name}`: {problem}")
            body[name] = values[name]
    if "tools" in values:
        found = tools_problem(values["tools"])
        if found is not None:
            raise fatal(f"`tools{found[0]}`: {found[1]}")
        body["tools"] = values["tools"]
    json_mode, schema = False, None
    if "response_format" in values:
        fmt = values["response_format"]
        problem = _format_problem(fmt)
        if problem is not None:
            raise fatal(f"`response_format`: {problem}")
        body["response_format"] = fmt
        assert isinstance(fmt, dict)
        json_mode = fmt["type"] != "text"
        if fmt["type"] == "json_schema":
            spec = cast(JSONDict, fmt["json_schema"])
            schema = cast(JSONDict, spec["schema"])
    stream = values.get("stream", False)
    if not isinstance(stream, bool):
        raise fatal(f"`stream` must be true or false, got {shown(stream)}")
    return _Request(url=httpx.URL(base + "/chat/completions"), body=body,
                    json_mode=json_mode, schema=schema, stream=stream)


def _messages_of(values: Mapping[str, JSON], fatal: Callable[[str], FatalError]) -> JSON:
    if ("prompt" in values) == ("messages" in values):
        raise fatal("give exactly one of `messages` and `prompt`")
    if "prompt" in values:
        prompt = values["prompt"]
        if not isinstance(prompt, str):
            raise fatal(f"`prompt` must be text, got {_kind(prompt)}")
        return [{"role": "user", "content": prompt}]
    messages = values["messages"]
    problem = _messages_problem(messages)
    if problem is not None:
        raise fatal(f"`messages`: {problem}")
    return messages


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _messages_problem(value: JSON, *, templates: bool = False) -> str | None:
    """What is wrong with a list of messages; ``templates``: a template stands for any
    message or role (the definition check)."""
    if not isinstance(value, list) or not value:
        return "expected a non-empty list of {role, content} messages"
    for i, message in enumerate(value):
        if templates and _templated(message):
            continue
        if not isinstance(message, dict):
            return f"[{i}]: expected a mapping with `role` and `content`"
        role = message.get("role")
        if templates and _templated(role):
            continue
        if not isinstance(role, str) or role not in ROLES:
            return f"[{i}].role: expected one of {', '.join(ROLES)}, got {role!r}"
        if "content" not in message:
            return f"[{i}]: missing `content`"
    return None


def _number_problem(name: str, value: JSON) -> str | None:
    if name == "max_tokens":
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_INT:
            return None
        return f"expected a positive integer (at most {MAX_INT:,}), got {shown(value)}"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return None
    return f"expected a number, got {value!r}"


def _format_problem(value: JSON) -> str | None:
    if not isinstance(value, dict):
        return "expected a mapping like {type: json_object}"
    kind = value.get("type")
    if kind not in RESPONSE_FORMATS:
        return f"`type` must be one of {', '.join(RESPONSE_FORMATS)}, got {kind!r}"
    if kind != "json_schema":
        return None
    spec = value.get("json_schema")
    if not isinstance(spec, dict) or not isinstance(spec.get("schema"), dict):
        return "type json_schema needs `json_schema: {schema: {...}}`"
    return _schema_problem(cast(JSONDict, spec["schema"]))


def _schema_problem(schema: JSONDict) -> str | None:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return f"json_schema.schema is not a valid JSON Schema: {exc.message}"
    return None


# ------------------------------------------------------------------ one attempt


@dataclass(frozen=True, slots=True, kw_only=True)
class Sender:
    """Who sends a request: an ``llm`` step's attempt, or a ``ctx.llm`` call of a
    step's attempt (``name``, the call's journal name, then marks its notes)."""

    step: str
    attempt: int
    who: str  # how errors name the sender: "step 'grade'", "step 'agent': ctx.llm 'turn-1'"
    services: Services
    step_log: StepLog
    max_note_bytes: int  # the run's limits.max_output_bytes
    name: str | None = None
    # the token budgets the call answers to (steps.budget); None: no store to keep them
    budget: TokenBudget | None = None

    @classmethod
    def of(cls, call: StepCall, *, name: str | None = None) -> Sender:
        step = call.step.id
        who = f"step {step!r}" if name is None else f"step {step!r}: ctx.llm {name!r}"
        limits = call.services.limits(call.run.checked.spec.limits)
        store = call.services.store
        budget = None if store is None else TokenBudget(
            store=store, run_id=call.run.run_id, limit=limits.max_llm_tokens, step=step)
        return cls(step=step, attempt=call.attempt, who=who, services=call.services,
                   step_log=call.run.step_log, max_note_bytes=limits.max_output_bytes,
                   name=name, budget=budget)

    def note(self, key: str, value: JSONDict) -> None:
        named: JSONDict = {**value, "call": self.name} if self.name is not None else value
        if key == "usage" and self.budget is not None:
            self.budget.noted(value)
        self.step_log.note(self.step, {key: named})


def api_key(name: str, sender: Sender) -> str:
    """The key from the variable ``name`` (``api_key_env``), read now (never shown)."""
    trust = sender.services.trust
    if trust is not None:  # the server's allow-list, before the variable is read
        refused = key_env_problem(name, "api_key_env", trust)
        if refused:
            raise FatalError(f"{sender.who}: {refused[0].message}", step=sender.step)
    value = os.environ.get(name)
    if not value:
        raise FatalError(f"{sender.who}: the environment variable {name} named by "
                         f"`api_key_env` is not set (it must hold the API key)",
                         step=sender.step)
    add_redacted(value)
    return value


async def run_llm(call: StepCall) -> JSON:
    request = await call.rendered(_prepare)
    key_env = call.step.config.get("api_key_env")
    assert isinstance(key_env, str)  # checked with the definition
    return await send(Sender.of(call), request, key_env)


async def send(sender: Sender, request: _Request, key_env: str) -> JSONDict:
    """POST ``request`` with the key of ``key_env``: the completion as output, or the
    error that fails the attempt (retryable when a new try may succeed).  Refused
    before anything is sent when a token budget is spent; the tokens of the answer
    are counted (``steps.budget``), also when the answer is then refused."""
    budget = sender.budget
    if budget is None:
        return await _send(sender, request, key_env)
    await budget.refuse_spent()
    try:
        return await _send(sender, request, key_env)
    finally:
        await budget.count()


async def _send(sender: Sender, request: _Request, key_env: str) -> JSONDict:
    key = api_key(key_env, sender)
    step, who = sender.step, sender.who
    sender.note("llm_request", request_note(sender, request))
    where = f"POST {_shown(request.url)}"
    client = guarded_client(sender.services.http_policy, step=step)
    headers = {"Authorization": f"Bearer {key}",
               "Accept": "text/event-stream" if request.stream else "application/json"}
    sent = stream_body(request.body) if request.stream else request.body
    try:
        async with client, client.stream("POST", request.url, headers=headers,
                                         json=sent) as response:
            if request.stream and _is_stream(response):
                body, truncated = await _read_streamed(sender, request, response,
                                                       where), False
            else:
                body, truncated = await _read_bounded(response)
    except _RETRYABLE_TRANSPORT as exc:
        raise StepError(f"{who}: {type(exc).__name__}: {exc} during {where}",
                        step=step) from exc
    except httpx.HTTPError as exc:
        raise FatalError(f"{who}: {type(exc).__name__}: {exc} during {where}",
                         step=step) from exc
    status = response.status_code
    if not 200 <= status < 300:
        retryable = status >= 500 or status in RETRYABLE_STATUSES
        delay = retry_after_seconds(response.headers.get("retry-after"), time.time())
        raise HTTPStatusError(status, _shown(request.url), retryable=retryable, step=step,
                              retry_after=delay if retryable else None,
                              body=_provider_message(body))
    if truncated:
        raise StepError(f"{who}: the response of {where} is larger than "
                        f"{len(body)} bytes", step=step)
    return _completion(sender, request, body, where)


def _is_stream(response: httpx.Response) -> bool:
    return 200 <= response.status_code < 300 and response.headers.get(
        "content-type", "").startswith("text/event-stream")


async def _read_streamed(sender: Sender, request: _Request, response: httpx.Response,
                         where: str) -> bytes:
    """The streamed answer as a chat completion's body, the text so far emitted as it
    grows (``steps.llmstream``)."""

    def emit(text: str) -> None:
        sender.step_log.note(sender.step, {"emit": {
            "value": emitted_value(text, sender.name), "attempt": sender.attempt,
            "at": time.time()}})

    emitter = Emitter(emit)
    whole = False
    try:
        body = await read_stream(response, who=sender.who, step=sender.step, where=where,
                                 model=request.body["model"], on_text=emitter.update)
        whole = True
        return body
    finally:
        emitter.close(flush=whole)


def request_note(sender: Sender, request: _Request) -> JSONDict:
    """The ``llm_request`` note of this attempt: what is sent, bounded."""
    messages, cut = bounded_messages(request.body["messages"],
                                     min(sender.max_note_bytes,
                                         MAX_NOTE_BYTES - _NOTE_HEADROOM))
    return {"attempt": sender.attempt, "model": request.body["model"],
            "messages": messages, "cut": cut}


def bounded_messages(messages: JSON, max_bytes: int) -> tuple[JSON, str | None]:
    """``messages`` within ``max_bytes`` of JSON, and what was cut (None: nothing).

    Each message keeps its role and the head of its content (a content that is not
    text is cut as its JSON text): the budget is shared fairly, a short message
    leaving its unused share to the longer ones."""
    size = _json_size(messages)
    if size <= max_bytes or not isinstance(messages, list):
        return messages, None
    contents = [_content_text(m) for m in messages]
    fixed = _json_size([{**_without_content(m), "content": ""} for m in messages])
    budget = max(0, max_bytes - fixed - _MARKER_BYTES * len(messages))
    shares = _fair_shares([len(c.encode()) for c in contents], budget)
    out: list[JSON] = []
    for message, text, share in zip(messages, contents, shares, strict=True):
        out.append({**_without_content(message), "content": _cut_text(text, share)})
    return out, (f"the messages were {size:,} bytes of JSON, over the {max_bytes:,} "
                 f"kept (limits.max_output_bytes): each content keeps its head")


def _json_size(value: JSON) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def _content_text(message: JSON) -> str:
    content = message.get("content") if isinstance(message, dict) else message
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False)


def _without_content(message: JSON) -> JSONDict:
    if not isinstance(message, dict):
        return {}
    return {k: v for k, v in message.items() if k != "content"}


def _fair_shares(sizes: list[int], budget: int) -> list[int]:
    """Bytes each of ``sizes`` keeps of ``budget``: equal shares, the unused part of
    a small one going to the others."""
    shares = [0] * len(sizes)
    left, count = budget, len(sizes)
    for i in sorted(range(len(sizes)), key=sizes.__getitem__):
        shares[i] = min(sizes[i], left // count)
        left -= shares[i]
        count -= 1
    return shares


def _cut_text(text: str, keep: int) -> str:
    """``text`` cut to ``keep`` bytes of UTF-8 (a whole character), marked."""
    data = text.encode()
    if len(data) <= keep:
        return text
    head = data[:keep].decode("utf-8", errors="ignore")
    # JSON escapes (quotes, newlines) make the text longer: keep a little less
    while head and _json_size(head) - 2 > keep:
        head = head[: max(0, len(head) - max(1, (_json_size(head) - 2 - keep)))]
    return f"{head}… [{len(data) - len(head.encode()):,} more bytes cut]"


def _provider_message(body: bytes) -> str:
    """The error message of an OpenAI-style error body, else the body's text."""
    text = body.decode("utf-8", errors="replace")
    try:
        parsed = json.loads(text)
    except ValueError:
        return text.strip()
    if isinstance(parsed, dict):
        error = parsed.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return cast(str, error["message"])
        if isinstance(error, str):
            return error
        if isinstance(parsed.get("message"), str):
            return cast(str, parsed["message"])
    return text.strip()


def _completion(sender: Sender, request: _Request, body: bytes, where: str) -> JSONDict:
    step, who = sender.step, sender.who
    try:
        data = json.loads(body, parse_constant=_reject_constant)
        choice = data["choices"][0]
        message = choice["message"]
        content = message.get("content") or ""
        if not isinstance(content, str):
            raise TypeError("message.content is not text")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise StepError(f"{who}: the response of {where} is not a chat "
                        f"completion ({type(exc).__name__}: {exc})", step=step) from None
    usage = _usage(data.get("usage"))
    model = data.get("model") if isinstance(data.get("model"), str) else request.body["model"]
    sender.note("usage", {"attempt": sender.attempt, "model": model, **usage})
    calls = tool_calls(message, step, who)
    parsed = _parse_content(content, request, step, who) if content or not calls else None
    finish = choice.get("finish_reason")
    out: JSONDict = {"content": content, "json": parsed, "model": model,
                     "finish_reason": finish if isinstance(finish, str) else "",
                     "usage": cast(JSON, usage)}
    if calls or "tools" in request.body:
        out["tool_calls"] = calls
    return out


def _usage(value: Any) -> dict[str, int]:
    usage = value if isinstance(value, dict) else {}
    out = {}
    for key in _USAGE_KEYS:
        number = usage.get(key)
        out[key] = number if isinstance(number, int) and not isinstance(number, bool) else 0
    if not out["total_tokens"]:
        out["total_tokens"] = out["prompt_tokens"] + out["completion_tokens"]
    return out


def _parse_content(content: str, request: _Request, step: str, who: str) -> JSON:
    try:
        parsed: JSON = json.loads(content, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        if request.json_mode:
            raise StepError(f"{who}: the model's answer is not JSON ({exc}); "
                            f"it begins {content[:80]!r}", step=step) from None
        return None
    if request.schema is not None:
        from jsonschema import Draft202012Validator

        errors = sorted(Draft202012Validator(request.schema).iter_errors(parsed),
                        key=lambda e: list(e.absolute_path))
        if errors:
            first = errors[0]
            path = "".join(f"[{p!r}]" if isinstance(p, str) else f"[{p}]"
                           for p in first.absolute_path) or "(the whole answer)"
            raise StepError(f"{who}: the model's answer does not match the "
                            f"response_format schema at {path}: {first.message}",
                            step=step)
    return parsed


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


# ------------------------------------------------------------------ definition checks


def _templated(value: JSON) -> bool:
    return isinstance(value, str) and expressions.is_template(value)


def check_llm(config: Mapping[str, JSON]) -> list[tuple[str, str]]:
    """Static checks of an llm step's fields; a template stands for any value."""
    out: list[tuple[str, str]] = []
    url = config.get("base_url")
    out += [(".base_url" + loc[len(".url"):], msg) for loc, msg in _check_url(url)]
    model = config.get("model")
    if model is not None and (not isinstance(model, str) or not model):
        out.append((".model", f"expected the model name as text, got {model!r}"))
    if ("messages" in config) == ("prompt" in config):
        out.append(("", "an llm step needs exactly one of `messages` or `prompt`"))
    messages = config.get("messages")
    if "messages" in config and not _templated(messages):
        problem = _messages_problem(messages, templates=True)
        if problem is not None:
            out.append((".messages", problem))
    prompt = config.get("prompt")
    if "prompt" in config and not isinstance(prompt, str):
        out.append((".prompt", f"expected text, got {type(prompt).__name__}"))
    name = config.get("api_key_env")
    if name is not None and (not isinstance(name, str) or not _ENV_NAME.fullmatch(name)):
        out.append((".api_key_env", f"expected the name of an environment variable "
                                    f"(like OPENAI_API_KEY), got {name!r}"))
    for field in ("temperature", "max_tokens"):
        value = config.get(field)
        if field in config and not _templated(value):
            problem = _number_problem(field, value)
            if problem is not None:
                out.append((f".{field}", problem))
    tools = config.get("tools")
    if "tools" in config and not _templated(tools):
        found = tools_problem(tools, templates=True)
        if found is not None:
            out.append((f".tools{found[0]}", found[1]))
    stream = config.get("stream")
    if "stream" in config and not _templated(stream) and not isinstance(stream, bool):
        out.append((".stream", f"expected true or false, got {shown(stream)}"))
    fmt = config.get("response_format")
    if "response_format" in config and not _templated(fmt) and not has_template(fmt):
        problem = _format_problem(fmt)
        if problem is not None:
            out.append((".response_format", problem))
    return out
