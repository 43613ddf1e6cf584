"""``plait.connect`` and ``run_async(db=URL)``: the runs of an event loop share one
open store per URL, opened by the first holder and closed by the last."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import plait
from plait import StoreError, Workflow
from plait.store import sqlite as sqlite_module
from plait.store.base import RunFilter


def diamond() -> Workflow:
    wf = Workflow("diamond")

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


class OpenCount:
    """How many SQLite stores were opened and closed (all on one file here)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.opened = self.closed = 0
        cls = sqlite_module.SqliteStore
        real_open, real_close = cls.open, cls.close

        async def counting_open(store: sqlite_module.SqliteStore) -> None:
            self.opened += 1
            await real_open(store)

        async def counting_close(store: sqlite_module.SqliteStore) -> None:
            self.closed += 1
            await real_close(store)

        monkeypatch.setattr(cls, "open", counting_open)
        monkeypatch.setattr(cls, "close", counting_close)


async def test_concurrent_runs_on_one_url_share_one_store(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """50 runs at once with the same file spelled two ways: one store is opened for
    all of them and closed when the last ends; every run and step is stored."""
    monkeypatch.chdir(tmp_path)
    count = OpenCount(monkeypatch)
    wf = diamond()
    urls = ["sqlite:///runs.db", f"sqlite:///{tmp_path}/runs.db"]
    results = await asyncio.gather(*(wf.run_async({"i": i}, db=urls[i % 2])
                                     for i in range(50)))
    assert [r.output for r in results] == [{"d": {"d": 3 * i + 1}} for i in range(50)]
    assert (count.opened, count.closed) == (1, 1)
    async with plait.connect(urls[0]) as db:
        runs = await db.store.list_runs(RunFilter(limit=100))
        assert sorted(r.run_id for r in runs) == sorted(r.run_id for r in results)
        assert {(r.status, r.owner) for r in runs} == {("completed", None)}
        steps = await db.store.get_steps(results[7].run_id)
        assert [(s.step_id, str(s.status), s.output) for s in steps] == [
            ("a", "completed", {"x": 7}), ("b", "completed", {"b": 8}),
            ("c", "completed", {"c": 14}), ("d", "completed", {"d": 22})]


@pytest.mark.parametrize("first_out", ["first", "second"])
async def test_connect_is_reference_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            first_out: str) -> None:
    """Two holders of one URL share its store; it stays open for the one still holding
    it, whichever lets go first, and is closed when the last does."""
    count = OpenCount(monkeypatch)
    url = f"sqlite:///{tmp_path}/runs.db"
    wf = diamond()
    one = await plait.connect(url).open()
    two = await plait.connect(url).open()
    assert one.store is two.store
    assert (await wf.run_async({"i": 1}, db=one)).status == "completed"
    leaving, staying = (one, two) if first_out == "first" else (two, one)
    await leaving.close()
    assert count.closed == 0
    result = await wf.run_async({"i": 2}, db=staying)
    assert result.output == {"d": {"d": 7}}
    assert len(await staying.store.list_runs(RunFilter())) == 2
    await staying.close()
    assert (count.opened, count.closed) == (1, 1)
    async with plait.connect(url) as again:  # a new holder opens it again
        assert len(await again.store.list_runs(RunFilter())) == 2
    assert (count.opened, count.closed) == (2, 2)


async def test_a_handle_outside_its_async_with_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/runs.db"
    wf = diamond()
    handle = plait.connect(url)
    with pytest.raises(StoreError, match=r"is not open yet: use it inside `async with "
                                         r"plait.connect\("):
        await wf.run_async({"i": 1}, db=handle)
    async with handle as db:
        assert (await wf.run_async({"i": 1}, db=db)).status == "completed"
    with pytest.raises(StoreError, match=r"handle of .*runs.db is closed: use it inside "
                                         r"`async with plait.connect\("):
        await wf.run_async({"i": 2}, db=handle)
    with pytest.raises(StoreError, match="already closed"):
        await handle.open()
    async with plait.connect(url) as db:  # nothing of the refused runs was stored
        assert len(await db.store.list_runs(RunFilter())) == 1


async def test_a_handle_is_refused_in_another_event_loop(tmp_path: Path) -> None:
    """``wf.run`` starts an event loop of its own: a handle held in this one is
    refused there, naming the fix; the URL works."""
    url = f"sqlite:///{tmp_path}/runs.db"
    wf = diamond()
    async with plait.connect(url) as db:
        with pytest.raises(StoreError, match="belongs to the event loop that opened it"):
            await asyncio.to_thread(wf.run, {"i": 1}, db=db)  # type: ignore[arg-type]
        result = await asyncio.to_thread(wf.run, {"i": 1}, db=url)
        assert [r.run_id for r in await db.store.list_runs(RunFilter())] == [result.run_id]


async def test_memory_urls() -> None:
    """``memory://`` given as a URL is private to each run; a ``connect("memory://")``
    handle is one store for the runs given it; ``memory://name`` is shared by name."""
    wf = diamond()
    async with plait.connect("memory://") as one, plait.connect("memory://") as two:
        assert one.store is not two.store
        await asyncio.gather(*(wf.run_async({"i": i}, db=one) for i in range(3)))
        assert len(await one.store.list_runs(RunFilter())) == 3
        assert await two.store.list_runs(RunFilter()) == []
    name = "memory://shared-by-name-test"
    first = await wf.run_async({"i": 1}, db=name)
    async with plait.connect(name) as named:
        assert [r.run_id for r in await named.store.list_runs(RunFilter())] == [
            first.run_id]


def test_connect_refuses_a_bad_url_at_once() -> None:
    with pytest.raises(StoreError, match="unsupported store URL 'mysql://x'"):
        plait.connect("mysql://x")
    with pytest.raises(StoreError, match="bad SQLite URL"):
        plait.connect("sqlite://relative.db")
