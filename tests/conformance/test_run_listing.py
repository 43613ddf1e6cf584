"""``list_runs`` with ``RunFilter.top_level``: only runs without a parent (what `plait
runs` and GET /api/runs list by default), or every run (child runs of ``workflow`` and
``loop`` steps too); the other filters, the limit and the cursor time apply to what is
listed."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from plait.core.states import RunStatus
from plait.store.base import RunFilter, Store

from .test_store import new_run_id, run_record

R = RunStatus
UID = Callable[[str], str]


async def _family(store: Store, wf: str) -> dict[str, str]:
    """Two parents (created at 1000 and 1003), a child of the first (1001), a grandchild
    (1002) and a child of the second (1004), all of workflow ``wf``."""
    made: dict[str, str] = {}
    for name, at, parent in (("p1", 1_000.0, None), ("c1", 1_001.0, "p1"),
                             ("g1", 1_002.0, "c1"), ("p2", 1_003.0, None),
                             ("c2", 1_004.0, "p2")):
        made[name] = new_run_id()
        record = dataclasses.replace(run_record(made[name], wf, created_at=at),
                                     parent_run_id=made[parent] if parent else None)
        await store.create_run(record, ["a"])
    return made


async def _listed(store: Store, **filter: object) -> list[str]:
    return [r.run_id for r in await store.list_runs(RunFilter(**filter))]  # type: ignore[arg-type]


async def test_top_level_lists_only_runs_without_a_parent(store: Store, uid: UID) -> None:
    wf = uid("family")
    ids = await _family(store, wf)
    assert await _listed(store, workflow=wf, top_level=True) == [ids["p2"], ids["p1"]]
    assert await _listed(store, workflow=wf) == [
        ids["c2"], ids["p2"], ids["g1"], ids["c1"], ids["p1"]]
    children = await store.list_runs(RunFilter(workflow=wf, limit=1))
    assert children[0].parent_run_id == ids["p2"]


async def test_top_level_pages_and_limits_over_the_listed_runs(store: Store,
                                                             uid: UID) -> None:
    """The limit counts listed runs only (children never use up a page), with or without
    a workflow, and ``before``/``since``/``status`` combine with it."""
    wf = uid("paged")
    ids = await _family(store, wf)
    assert await _listed(store, workflow=wf, top_level=True, limit=1) == [ids["p2"]]
    assert await _listed(store, workflow=wf, top_level=True, before=1_002.5) == [ids["p1"]]
    assert await _listed(store, workflow=wf, top_level=True, since=1_000.5) == [ids["p2"]]
    assert await _listed(store, workflow=wf, top_level=True, status=R.PENDING) == [
        ids["p2"], ids["p1"]]
    everywhere = await _listed(store, top_level=True, before=1_004.0, since=1_000.0,
                               limit=1000)
    assert ids["p1"] in everywhere and ids["p2"] in everywhere
    assert not {ids["c1"], ids["g1"], ids["c2"]} & set(everywhere)
