"""The Python API on PostgreSQL: ``wf.run(db="postgresql://...")`` executes in the
calling process and stores everything; ``plait.connect`` shares one store (one pool)
between the concurrent runs of an event loop."""

from __future__ import annotations

import asyncio

import pytest

import plait
from plait import Workflow
from plait.store import RunFilter, open_store
from plait.store.postgres import PostgresStore

pytestmark = pytest.mark.postgres


def diamond(name: str = "pg-diamond") -> Workflow:
    wf = Workflow(name)

    @wf.step()
    async def a(input: dict[str, int]) -> dict[str, int]:
        return {"x": input["i"]}

    @wf.step()
    async def b(a: dict[str, int]) -> dict[str, int]:
        return {"b": a["x"] + 1}

    @wf.step()
    def c(a: dict[str, int]) -> dict[str, int]:
        return {"c": a["x"] * 2}

    @wf.step()
    async def d(b: dict[str, int], c: dict[str, int]) -> dict[str, int]:
        return {"d": b["b"] + c["c"]}

    return wf


def test_wf_run_with_a_postgres_url_stores_the_run(pg_database: str) -> None:
    wf = diamond("pg-sync")
    result = wf.run({"i": 3}, db=pg_database)
    assert result.status == "completed" and result.output == {"d": {"d": 10}}
    again = wf.run({"i": 4}, db=pg_database)  # a new event loop, a new store: works

    async def stored() -> tuple[list[str], list[tuple[str, str, object]]]:
        store = open_store(pg_database, read_only=True)
        await store.open()
        try:
            runs = await store.list_runs(RunFilter(workflow="pg-sync"))
            steps = await store.get_steps(result.run_id)
            return [r.run_id for r in runs], [(s.step_id, str(s.status), s.output)
                                              for s in steps]
        finally:
            await store.close()

    runs, steps = asyncio.run(stored())
    assert runs == [again.run_id, result.run_id]
    assert steps == [("a", "completed", {"x": 3}), ("b", "completed", {"b": 4}),
                     ("c", "completed", {"c": 6}), ("d", "completed", {"d": 10})]


async def test_concurrent_runs_on_one_url_share_one_store(
        pg_database: str, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[PostgresStore] = []
    real_open = PostgresStore.open

    async def counting_open(store: PostgresStore) -> None:
        opened.append(store)
        await real_open(store)

    monkeypatch.setattr(PostgresStore, "open", counting_open)
    wf = diamond("pg-shared")
    results = await asyncio.gather(*(wf.run_async({"i": i}, db=pg_database)
                                     for i in range(30)))
    assert [r.output for r in results] == [{"d": {"d": 3 * i + 1}} for i in range(30)]
    assert len(opened) == 1
    async with plait.connect(pg_database) as db:
        runs = await db.store.list_runs(RunFilter(workflow="pg-shared", limit=100))
        assert sorted(r.run_id for r in runs) == sorted(r.run_id for r in results)
        assert {(r.status, r.owner) for r in runs} == {("completed", None)}
    assert len(opened) == 2  # the last holder closed it; connect opened it again
