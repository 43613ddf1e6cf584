"""``ctx.llm`` / ``ctx.llm_sync``: an ``llm`` step's request made from a step's code, as
a journaled call (docs/python-api.md).

The engine lends a ``ModelCalls`` to its steps (``Services.model_calls``): the step
context cannot import the ``llm`` type (that type imports the context), and this module
imports it only when a call is made, so that ``import plait`` stays free of httpx.

The fields are the ``llm`` step's (``base_url``, ``model``, ``api_key_env``, exactly one
of ``messages`` and ``prompt``, and optionally ``tools``, ``response_format``,
``temperature``, ``max_tokens``, ``stream``), checked as the step checks them, before the journal
is read: a bad field fails the step at once, naming the call and the field.  The
request is sent as the step sends it (``llm.send``: the same key handling, network
policy, retryable errors, ``llm_request`` and ``usage`` history notes, marked with the
call's ``name``), and its output, ``tool_calls`` included, is committed to the step's
journal under ``name`` (``ctx.run``): a later attempt of the step gets it back without
a request, and spends no tokens.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..core.jsoncheck import NotJSON, checked_json
from ..core.model import JSON, JSONDict, RetryPolicy
from ..errors import FatalError
from .context import StepContext
from .journal import MAX_NAME
from .types import LLM_FIELDS, LLM_REQUEST_FIELDS

if TYPE_CHECKING:
    from .llm import _Request



class ModelCalls:
    """What ``ctx.llm`` and ``ctx.llm_sync`` do (lent to steps by the engine)."""

    async def llm(self, ctx: StepContext, call: Any, name: object,
                  fields: Mapping[str, Any], retry: RetryPolicy | None) -> JSONDict:
        """``ctx.llm``: the completion for ``fields``, journaled under ``name``."""
        return await llm(ctx, call, name, fields, retry)

    def llm_sync(self, ctx: StepContext, call: Any, loop: asyncio.AbstractEventLoop | None,
                 name: object, fields: Mapping[str, Any],
                 retry: RetryPolicy | None) -> JSONDict:
        """``ctx.llm_sync``: ``llm`` from a sync step's thread."""
        return llm_sync(ctx, call, loop, name, fields, retry)


async def llm(ctx: StepContext, call: Any, name: object, fields: Mapping[str, Any],
              retry: RetryPolicy | None) -> JSONDict:
    """``ctx.llm``: the completion for ``fields``, journaled under ``name``."""
    from .llm import Sender, send

    request, key_env = _checked(ctx, call, name, fields)
    assert isinstance(name, str)
    sender = Sender.of(call, name=name)
    result = await ctx.run(name, send, sender, request, key_env, retry=retry)
    assert isinstance(result, dict)
    return result


def llm_sync(ctx: StepContext, call: Any, loop: asyncio.AbstractEventLoop | None,
             name: object, fields: Mapping[str, Any], retry: RetryPolicy | None) -> JSONDict:
    """``ctx.llm_sync``: ``llm`` from a sync step's thread (the request is sent on the
    run's event loop, as the step type sends it)."""
    from .llm import Sender, send

    request, key_env = _checked(ctx, call, name, fields)
    assert isinstance(name, str)
    sender = Sender.of(call, name=name)

    def sent() -> JSON:
        if loop is None:  # ctx.run_sync refuses first: no loop to reach the store
            raise FatalError(f"{sender.who}: no event loop to send the request on",
                             step=sender.step)
        return asyncio.run_coroutine_threadsafe(send(sender, request, key_env),
                                                loop).result()

    result = ctx.run_sync(name, sent, retry=retry)
    assert isinstance(result, dict)
    return result


def _checked(ctx: StepContext, call: Any, name: object,
             fields: Mapping[str, Any]) -> tuple[_Request, str]:
    """The request and the key's variable, or FatalError naming what is wrong."""
    from .llm import _ENV_NAME, build_request

    step = ctx.step_id
    if not isinstance(name, str) or not name or len(name) > MAX_NAME:
        raise FatalError(f"step {step!r}: ctx.llm needs a name (non-empty text of at "
                         f"most {MAX_NAME} characters), got {_shown(name)}", step=step)
    who = f"step {step!r}: ctx.llm {name!r}"
    if call is None:
        raise FatalError(f"{who}: ctx.llm needs the step's run, and this context has "
                         f"none", step=step)
    unknown = sorted(set(fields) - LLM_FIELDS)
    if unknown:
        raise FatalError(f"{who}: unknown field {unknown[0]!r}; the fields are "
                         f"{', '.join(sorted(LLM_FIELDS))}", step=step)
    for required in ("base_url", "model", "api_key_env"):
        if fields.get(required) is None:
            raise FatalError(f"{who}: `{required}` is required", step=step)
    key_env = fields["api_key_env"]
    if not isinstance(key_env, str) or not _ENV_NAME.fullmatch(key_env):
        raise FatalError(f"{who}: `api_key_env`: expected the name of an environment "
                         f"variable (like OPENAI_API_KEY), got {_shown(key_env)}", step=step)
    values = {k: v for k, v in fields.items() if k in LLM_REQUEST_FIELDS and v is not None}
    try:
        plain = checked_json(values)
    except NotJSON as exc:
        where = exc.short_path.lstrip(".")
        raise FatalError(f"{who}: `{where}` {exc.problem}", step=step) from None
    assert isinstance(plain, dict)
    return build_request(plain, step, who), key_env


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text):,} characters)"
