"""The step cache (docs/caching.md): ``cache: {key: "{{ ... }}", ttl: 1h}`` on any step.

Before an attempt runs the step, its ``key`` is rendered with the step's template
context (a render error fails the step without retry, like any template error) and the
store is asked for a completed result of the same workflow name, step id and key created
within ``ttl``.  A hit is the attempt's output: the step's own code does not run, and
the step gets a history note ``{"cache": {"hit": true, "attempt", "key", "from_run",
"created_at"}}`` (``plait show --json`` and ``plait run --json`` say ``"cached": true``;
``plait metrics`` counts hits).  A miss runs the step; its output, once checked to be
JSON (and with secrets redacted, as it will be stored), is put in the cache.  Failed
attempts and fallback outputs are never cached.  The store holds the cache, so every
process on the same store shares it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass

from ..core.model import JSON
from ..errors import StepError, StoreError
from ..steps.registry import StepCall, StepFunction
from ..store.base import Store

_log = logging.getLogger("plait.cache")


@dataclass(slots=True)
class CacheLookup:
    """One attempt's cache: its rendered key and whether it was a hit."""

    key: str
    hit: bool = False


def _key_text(value: JSON) -> str:
    """A rendered key as the store keys it: text as it is, any other value as its
    canonical JSON (a number, a list of ids...)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _store(call: StepCall) -> Store:
    store = call.services.store
    if store is None:  # an engine always lends its store: a bug if not
        raise StepError(f"step {call.step.id!r}: no store to keep its cache in",
                        step=call.step.id)
    return store


async def through_cache(call: StepCall, run: StepFunction, lookup: CacheLookup | None,
                        clock: Callable[[], float]) -> JSON:
    """The attempt's output: the cached result when there is a fresh one, else what
    ``run`` returns.  ``lookup`` (when given) is filled with the key and the verdict."""
    spec = call.step.cache
    assert spec is not None
    template = spec.key
    key = _key_text(await call.rendered(lambda c: c.render(template, "cache.key"),
                                        fields=template))
    if lookup is not None:
        lookup.key = key
    store = _store(call)
    found = await store.get_cached(call.run.checked.spec.name, call.step.id, key,
                                   clock() - spec.ttl)
    if found is None:
        return await run(call)
    if lookup is not None:
        lookup.hit = True
    call.run.step_log.cache_hits.add(call.step.id)
    call.run.step_log.note(call.step.id, {"cache": {
        "hit": True, "attempt": call.attempt, "key": key, "from_run": found.run_id,
        "created_at": found.created_at}})
    return found.output


async def keep(call: StepCall, key: str, output: JSON, clock: Callable[[], float]) -> None:
    """Put a completed attempt's output (redacted as it will be stored) in the cache.
    A store that cannot keep it is logged, not fatal: the step did complete."""
    redacted = call.run.step_log.redact_json(output)
    try:
        await _store(call).put_cached(call.run.checked.spec.name, call.step.id, key,
                                      redacted, call.run_id, clock())
    except StoreError as exc:
        _log.warning("step %r of run %s: its result was not cached: %s", call.step.id,
                     call.run_id, exc)
