"""What ``plait show`` adds from a run's history notes: the token usage each ``llm``
attempt recorded (``{"usage": {...}}``), shown with its attempt, and the steps completed
from the step cache (``{"cache": {"hit": true}}``)."""

from __future__ import annotations

from collections.abc import Sequence

from ..core.model import JSON, JSONDict
from ..store.base import EventRecord


def usage_by_attempt(events: Sequence[EventRecord]) -> dict[tuple[str, int], JSONDict]:
    """(step, attempt) -> {"prompt_tokens", "completion_tokens", "total_tokens"}."""
    out: dict[tuple[str, int], JSONDict] = {}
    for event in events:
        usage = event.data.get("usage") if event.kind == "note" else None
        if event.step_id is None or not isinstance(usage, dict):
            continue
        attempt = usage.get("attempt")
        if isinstance(attempt, int):
            out[(event.step_id, attempt)] = {
                k: usage.get(k) for k in ("prompt_tokens", "completion_tokens",
                                          "total_tokens")}
    return out


def add_usage(shown: JSONDict, events: Sequence[EventRecord]) -> JSONDict:
    """``plait show --json``: every attempt entry gets ``usage`` (null but for llm
    attempts that got a completion)."""
    usage = usage_by_attempt(events)
    attempts = shown.get("attempts")
    if isinstance(attempts, list):
        for entry in attempts:
            if isinstance(entry, dict):
                key = (str(entry.get("step")), entry.get("attempt"))
                found: JSON = usage.get(key) if isinstance(key[1], int) else None  # type: ignore[arg-type]
                entry["usage"] = found
    return shown


def cache_hits(events: Sequence[EventRecord]) -> frozenset[str]:
    """The steps whose result came from the step cache."""
    return frozenset(e.step_id for e in events
                     if e.kind == "note" and e.step_id is not None
                     and isinstance(hit := e.data.get("cache"), dict)
                     and hit.get("hit") is True)


def add_history(shown: JSONDict, events: Sequence[EventRecord]) -> JSONDict:
    """``plait show --json``: ``usage`` on attempts, ``cached`` on steps."""
    add_usage(shown, events)
    hits = cache_hits(events)
    steps = shown.get("steps")
    if isinstance(steps, dict):
        for step_id, entry in steps.items():
            if isinstance(entry, dict):
                entry["cached"] = step_id in hits
    return shown
