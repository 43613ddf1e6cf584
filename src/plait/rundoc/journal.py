"""The run document's journaled calls (``ctx.run``): each step entry's ``journal``, and
the sections ``plait show`` prints."""

from __future__ import annotations

from collections.abc import Sequence

from ..core.model import JSON, JSONDict
from ..core.timestamps import iso
from ..store.base import JournalEntry


def add_journal(value: JSONDict, entries: Sequence[JournalEntry]) -> None:
    """``plait show --json`` and the API's run document: every step entry gains
    ``"journal"``, its journaled calls in the order stored: ``[{"name", "attempt",
    "at"}]`` (``at`` in ISO 8601, UTC).  Values are not shown (they may be large)."""
    steps = value.get("steps")
    if not isinstance(steps, dict):
        return
    by_step: dict[str, list[JSON]] = {}
    for e in entries:
        by_step.setdefault(e.step, []).append(
            {"name": e.name, "attempt": e.attempt, "at": iso(e.at)})
    for step_id, entry in steps.items():
        if isinstance(entry, dict):
            entry["journal"] = by_step.get(step_id, [])


def journal_sections(entries: Sequence[JournalEntry]) -> list[tuple[str, list[str]]]:
    """``plait show``: per step, one line per journaled call (time, attempt, name)."""
    sections: dict[str, list[str]] = {}
    for e in entries:
        sections.setdefault(e.step, []).append(f"{iso(e.at)}  attempt {e.attempt}  "
                                               f"{e.name}")
    return list(sections.items())
