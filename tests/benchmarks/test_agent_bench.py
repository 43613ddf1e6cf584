"""The journal and agent-loop benchmarks measure complete, correct runs (plait only: the
peers' venv is not needed).  journal_cost at a tiny size on memory and SQLite; the
agent loop's overhead child and one kill -9 + resume on SQLite, which must repeat no
completed call and return the loop's output.  No timing is asserted."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import agent_calls  # noqa: E402
import agent_loop  # noqa: E402
import journal_cost  # noqa: E402


def test_journal_cost_measures_journaled_and_plain_runs(tmp_path: Path) -> None:
    urls = {"memory": "memory://", "sqlite": f"sqlite:///{tmp_path / 'j.db'}"}
    rows = asyncio.run(journal_cost.measure(urls, n=5, repeats=2))
    assert set(rows) == {"memory", "sqlite"}
    assert rows["sqlite"]["repeats"] == 2 and rows["sqlite"]["target_us"] == 150.0
    assert len(rows["memory"]["samples_us"]) == 2
    assert rows["memory"]["floor_us_median"] is None
    sqlite = rows["sqlite"]  # its floors: measured in the same repeats, as ratios too
    assert len(sqlite["floor_samples_us"]) == len(sqlite["floor_read_samples_us"]) == 2
    assert sqlite["floor_ratio_min"] <= sqlite["floor_ratio_median"] <= sqlite["floor_ratio_max"]
    assert "| sqlite |" in journal_cost.markdown({
        "date": "d", "machine": "m", "load_average": "l", "n": 5, "repeats": 2,
        "rows": list(rows.values())})


def test_the_bare_loop_returns_the_expected_output() -> None:
    assert asyncio.run(agent_calls.bare_loop(3)) == agent_calls.expected_output(3) \
        == {"turns": 3, "total": 6}


@pytest.mark.slow
def test_plait_agent_loop_overhead_child_checks_its_output(tmp_path: Path) -> None:
    engine = agent_loop.Engine("plait (SQLite)", "plait", "sqlite", sys.executable)
    got = agent_loop.child(engine, "overhead", "--db", engine.db(tmp_path, "t", None),
                           "--repeats", "1", "--warmup", "0")
    assert len(got["bare"]) == len(got["engine"]) == 1


@pytest.mark.slow
def test_plait_resumes_after_kill_without_repeating_a_completed_call(tmp_path: Path) -> None:
    engine = agent_loop.Engine("plait (SQLite)", "plait", "sqlite", sys.executable)
    one = agent_loop.crash_once(engine, engine.db(tmp_path, "crash", None),
                                tmp_path / "calls.log", "agent-crash-test")
    assert one["completed_before_kill"] == 10  # five turns: model and tool calls
    assert one["repeated"] == []
    assert one["in_flight_made_again"] == ["model-6"]
