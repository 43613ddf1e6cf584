"""The benchmark of definitions written at run time validates and stores real
definitions: each size is stored as a new version of bench.execute.  No timing is
asserted."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import written_definition  # noqa: E402

from plait import Workflow  # noqa: E402
from plait.store import open_store  # noqa: E402


def test_the_generated_definitions_are_valid_and_each_repeat_is_a_new_version(
        tmp_path: Path) -> None:
    assert len(Workflow.from_dict(written_definition.generated(30, 0)).spec.steps) == 30
    db = f"sqlite:///{tmp_path / 'b.db'}"
    rows = asyncio.run(written_definition.measure(db, [3, 12], repeats=2))
    assert set(rows) == {"3", "12"} and rows["12"]["min_ms"] <= rows["12"]["max_ms"]

    async def latest() -> int:
        store = open_store(db)
        await store.open()
        try:
            return (await store.get_workflow("bench.execute")).version
        finally:
            await store.close()

    assert asyncio.run(latest()) == 6  # 2 sizes x (a warm-up + 2 repeats)
