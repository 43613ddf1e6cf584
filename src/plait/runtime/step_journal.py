"""``plait retry`` and the step journal: what a new run takes over of the old run's
journaled calls (``ctx.run``; docs/python-api.md)."""

from __future__ import annotations

from ..store.base import Store


async def copy_journal(store: Store, old_run: str, new_run: str,
                       steps: frozenset[str]) -> int:
    """``plait retry``: the old run's journaled calls of ``steps`` (the steps the new
    run executes again; a map's items with their map) stored in the new run as they
    were (attempt and time kept), so its attempts get them back without calling
    again.  The number copied."""
    copied = 0
    for entry in await store.journal(old_run):
        if entry.step not in steps and entry.step.partition("[")[0] not in steps:
            continue
        found = await store.journal_get(old_run, entry.step, entry.name)
        if found is not None:
            await store.journal_put(new_run, entry.step, entry.name, found.value,
                                    found.attempt, found.at)
            copied += 1
    return copied
