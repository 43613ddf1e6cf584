"""What ``plait show`` adds from a run's history notes: the token usage each ``llm``
attempt recorded (``{"usage": {...}}``), shown with its attempt, the steps completed
from the step cache (``{"cache": {"hit": true}}``), and what a waiting step asks (its
``wait`` note: an approval's rendered prompt and the content under review; also read by
``plait run --json`` when the run waits)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from ..core.model import JSON, JSONDict
from ..core.timestamps import iso
from ..store.base import EventRecord

MAX_LINE = 200


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


def emits(events: Sequence[EventRecord]) -> list[JSONDict]:
    """What steps emitted (``ctx.emit``), in order: {"step", "attempt", "at", "value"}."""
    out: list[JSONDict] = []
    for event in events:
        emit = event.data.get("emit") if event.kind == "note" else None
        if isinstance(emit, dict):
            at = emit.get("at")
            out.append({"step": event.step_id, "attempt": emit.get("attempt"),
                        "at": iso(at) if isinstance(at, int | float) else None,
                        "value": emit.get("value")})
    return out


def emit_sections(events: Sequence[EventRecord]) -> list[tuple[str, list[str]]]:
    """``plait show``: per step, its emitted values, one line each (JSON, clipped)."""
    sections: dict[str, list[str]] = {}
    for entry in emits(events):
        text = json.dumps(entry["value"], ensure_ascii=False)
        if len(text) > MAX_LINE:
            text = text[:MAX_LINE] + "..."
        sections.setdefault(str(entry["step"]), []).append(
            f"{entry['at'] or '-'}  attempt {entry['attempt']}  {text}")
    return list(sections.items())


def add_history(shown: JSONDict, events: Sequence[EventRecord]) -> JSONDict:
    """``plait show --json``: ``usage`` on attempts, ``cached`` on steps, ``emits``."""
    add_usage(shown, events)
    shown["emits"] = list[JSON](emits(events))
    hits = cache_hits(events)
    steps = shown.get("steps")
    if isinstance(steps, dict):
        for step_id, entry in steps.items():
            if isinstance(entry, dict):
                entry["cached"] = step_id in hits
    return shown


WAIT_FIELDS = ("prompt", "show", "event", "until", "child_run_id")


def latest_notes(events: Sequence[EventRecord], key: str) -> dict[str, JSONDict]:
    """Step -> the mapping of its latest history note under ``key``."""
    out: dict[str, JSONDict] = {}
    for event in events:
        note = event.data.get(key) if event.kind == "note" else None
        if event.step_id is not None and isinstance(note, dict):
            out[event.step_id] = note
    return out


def wait_notes(events: Sequence[EventRecord]) -> dict[str, JSONDict]:
    """Step -> what it asked when it last started waiting (its latest ``wait`` note)."""
    return latest_notes(events, "wait")


def waiting_json(note: JSONDict | None) -> JSONDict:
    """A waiting step's ``waiting`` entry: its kind and every field, null where it
    does not apply (an approval: ``prompt`` and ``show``)."""
    note = note or {}
    kind = note.get("kind")
    out: JSONDict = {"kind": kind if isinstance(kind, str) else "approval"}
    out.update({name: note.get(name) for name in WAIT_FIELDS})
    return out


def waits_of(statuses: Mapping[str, object],
             events: Sequence[EventRecord]) -> dict[str, JSONDict]:
    """Step -> its ``waiting`` entry, for the steps (id -> status) that wait: map steps
    excepted (stored ``waiting`` while their items run, they wait for nobody)."""
    maps = {sid.rpartition("[")[0] for sid in statuses if sid.endswith("]")}
    waiting = [sid for sid, status in statuses.items()
               if status == "waiting" and sid not in maps]
    if not waiting:
        return {}
    notes = wait_notes(events)
    return {sid: waiting_json(notes.get(sid)) for sid in waiting}
