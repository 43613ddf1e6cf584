"""The memory store's keyed records (a base of ``MemoryStore``): circuit breakers,
webhook deliveries, the step journal (``ctx.run``), token counts, run events and the
step cache.  No await inside a method: each call is one atomic step, as in the rest of
the memory store."""

from __future__ import annotations

from collections.abc import Sequence

from ..core.model import JSON, JSONDict
from ..errors import EventTaken, RunNotFound
from .base import CachedResult, Journaled, JournalEntry, RunRecord, Signal, cache_key_hash
from .json_copy import copy_json, owned_json
from .memory_journal import MemoryJournal
from .memory_tokens import MemoryTokens
from .records import TokenUsage


class MemoryKeyedMethods:
    """The keyed records' ``Store`` methods of the memory store."""

    _runs: dict[str, RunRecord]
    _breakers: dict[str, tuple[JSONDict, int]]  # key: (state, version)
    _deliveries: dict[tuple[str, str], tuple[str, float]]  # run id, at
    _journal: MemoryJournal
    _tokens: MemoryTokens
    _signals: dict[tuple[str, str], Signal]
    _cache: dict[tuple[str, str, str], CachedResult]

    # ------------------------------------------------------------------ breakers
    # (no await: each call is one transaction)

    async def get_breaker(self, key: str) -> tuple[JSONDict | None, int]:
        found = self._breakers.get(key)
        if found is None:
            return None, 0
        return copy_json(found[0]), found[1]

    async def put_breaker(self, key: str, state: JSONDict, version: int) -> bool:
        owned = owned_json(state, f"the state of circuit breaker {key!r}")
        stored = self._breakers.get(key)
        if (stored[1] if stored is not None else 0) != version:
            return False
        self._breakers[key] = (owned, version + 1)
        return True

    # ------------------------------------------------------------------ webhook deliveries

    async def claim_delivery(self, hook: str, delivery_id: str, run_id: str, at: float,
                             forget_before: float) -> str:
        old = [k for k, (_, when) in self._deliveries.items() if when < forget_before]
        for key in old:
            del self._deliveries[key]
        return self._deliveries.setdefault((hook, delivery_id), (run_id, at))[0]

    async def forget_delivery(self, hook: str, delivery_id: str, run_id: str) -> None:
        stored = self._deliveries.get((hook, delivery_id))
        if stored is not None and stored[0] == run_id:
            del self._deliveries[(hook, delivery_id)]

    # ------------------------------------------------------------------ step journal

    async def journal_get(self, run_id: str, step_id: str, name: str) -> Journaled | None:
        return self._journal.get(run_id, step_id, name)

    async def journal_step(self, run_id: str, step_id: str) -> dict[str, Journaled]:
        return self._journal.step(run_id, step_id)

    async def journal_put(self, run_id: str, step_id: str, name: str, value: JSON,
                          attempt: int, at: float) -> Journaled:
        if run_id not in self._runs:
            raise RunNotFound(run_id)
        return self._journal.put(run_id, step_id, name, value, attempt, at)

    async def journal(self, run_id: str) -> list[JournalEntry]:
        if run_id not in self._runs:
            raise RunNotFound(run_id)
        return self._journal.entries(run_id)

    # ------------------------------------------------------------------ token budgets

    async def add_llm_tokens(self, run_id: str, step_id: str, usage: TokenUsage,
                             ancestors: Sequence[str] = ()) -> int:
        usage.checked()
        if run_id not in self._runs:
            raise RunNotFound(run_id)
        return self._tokens.add(run_id, step_id, usage, ancestors, self._runs)

    async def llm_tokens(self, run_id: str) -> int:
        if run_id not in self._runs:
            raise RunNotFound(run_id)
        return self._tokens.count(run_id)

    # ------------------------------------------------------------------ run events

    async def event_put(self, run_id: str, name: str, data: JSON, at: float) -> Signal:
        if run_id not in self._runs:
            raise RunNotFound(run_id)
        standing = self._signals.get((run_id, name))
        if standing is not None:
            raise EventTaken(run_id, name, standing.at)
        owned = owned_json(data, f"the data of event {name!r}")
        self._signals[(run_id, name)] = Signal(name=name, data=owned, at=at)
        return Signal(name=name, data=copy_json(owned), at=at)

    async def event_get(self, run_id: str, name: str) -> Signal | None:
        found = self._signals.get((run_id, name))
        return None if found is None else Signal(name=name, data=copy_json(found.data),
                                                 at=found.at)

    # ------------------------------------------------------------------ step cache

    async def get_cached(self, workflow: str, step_id: str, key: str,
                         since: float) -> CachedResult | None:
        found = self._cache.get((workflow, step_id, cache_key_hash(key)))
        if found is None or found.created_at < since:
            return None
        return CachedResult(output=copy_json(found.output), run_id=found.run_id,
                            created_at=found.created_at)

    async def put_cached(self, workflow: str, step_id: str, key: str, output: JSON,
                         run_id: str, created_at: float) -> None:
        owned = owned_json(output, f"the cached result of step {step_id!r}")
        slot = (workflow, step_id, cache_key_hash(key))
        stored = self._cache.get(slot)
        if stored is None or created_at >= stored.created_at:
            self._cache[slot] = CachedResult(output=owned, run_id=run_id,
                                             created_at=created_at)
