"""The step journal of the memory store (``Store.journal_get`` / ``journal_step`` /
``journal_put`` / ``journal``): each run's journaled call results, in the order they were stored."""

from __future__ import annotations

from ..core.model import JSON
from .base import Journaled, JournalEntry
from .json_copy import copy_json, owned_json


class MemoryJournal:
    """Run id -> (step id, name) -> the stored result (dicts keep insertion order)."""

    def __init__(self) -> None:
        self._runs: dict[str, dict[tuple[str, str], Journaled]] = {}

    def get(self, run_id: str, step_id: str, name: str) -> Journaled | None:
        found = self._runs.get(run_id, {}).get((step_id, name))
        return None if found is None else _copy(found)

    def step(self, run_id: str, step_id: str) -> dict[str, Journaled]:
        return {name: _copy(j) for (step, name), j in self._runs.get(run_id, {}).items()
                if step == step_id}

    def put(self, run_id: str, step_id: str, name: str, value: JSON, attempt: int,
            at: float) -> Journaled:
        entries = self._runs.setdefault(run_id, {})
        stored = entries.get((step_id, name))
        if stored is None:
            owned = owned_json(value, f"the journaled call {name!r} of step {step_id!r}")
            stored = entries[(step_id, name)] = Journaled(value=owned, attempt=attempt,
                                                          at=at)
        return _copy(stored)

    def entries(self, run_id: str) -> list[JournalEntry]:
        return [JournalEntry(step=step, name=name, attempt=j.attempt, at=j.at)
                for (step, name), j in self._runs.get(run_id, {}).items()]


def _copy(stored: Journaled) -> Journaled:
    return Journaled(value=copy_json(stored.value), attempt=stored.attempt, at=stored.at)
