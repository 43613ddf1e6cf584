"""The benchmark harness measures complete, correct runs (benchmarks/).

Each workload, at a tiny size, is run by every plait step style and by the raw asyncio
floor, and its output must equal the value computed from the workload alone; the
harness's check refuses a run that skipped a step; the many-runs script runs its
diamond on the memory and SQLite stores.  No timing is asserted.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import baseline  # noqa: E402
import child  # noqa: E402
import many_runs  # noqa: E402
import plait_adapter  # noqa: E402
import workloads  # noqa: E402

TINY = {
    "chain": lambda: workloads.chain(5),
    "fanout": lambda: workloads.fanout(4),
    "random": lambda: workloads.random_layers(24, 4),
    "unbalanced": lambda: workloads.unbalanced(2, 0.002, 0.001),
    "parallel": lambda: workloads.parallel_sleeps(3, 0.001),
    "wide": lambda: workloads.wide_random(40, 80, 4),
}


def test_expected_output_counts_paths_from_the_roots() -> None:
    assert workloads.chain(5).expected_output() == {"s4": {"step": "s4", "n": 5}}
    # src (1) -> four mids (2 each) -> sink: 1 + 4 * 2
    assert workloads.fanout(4).expected_output() == {"sink": {"step": "sink", "n": 9}}


@pytest.mark.parametrize("style", ["ctx", "params", "sync"])
@pytest.mark.parametrize("name", sorted(TINY))
async def test_every_plait_style_computes_the_expected_output(name: str, style: str) -> None:
    workload = TINY[name]()
    wf = plait_adapter.build_workflow(workload, style)
    result = await plait_adapter.run_workflow(wf)
    assert result.output == workload.expected_output()
    assert all(step.status == "completed" for step in result.steps.values())
    assert len(result.steps) == workload.size


async def test_the_no_op_style_returns_none_for_every_sink() -> None:
    workload = TINY["random"]()
    wf = plait_adapter.build_workflow(workload, "noop")
    result = await plait_adapter.run_workflow(wf)
    assert result.output == plait_adapter.expected_output(workload, "noop")
    assert result.output == dict.fromkeys(workload.sinks())


async def test_the_fan_in_sink_in_params_style_takes_one_parameter_per_parent() -> None:
    workload = workloads.fanout(300)
    wf = plait_adapter.build_workflow(workload, "params")
    result = await plait_adapter.run_workflow(wf)
    assert result.output == {"sink": {"step": "sink", "n": 601}}


@pytest.mark.parametrize("threads", ["0", "1"])
@pytest.mark.parametrize("name", sorted(TINY))
async def test_the_raw_asyncio_floor_computes_the_expected_output(name: str,
                                                                  threads: str) -> None:
    workload = TINY[name]()
    adapter = baseline.BaselineAdapter(threads=threads)
    assert await adapter.arun(adapter.build(workload)) == workload.expected_output()


def test_the_harness_refuses_a_run_that_skipped_or_garbled_a_step() -> None:
    expected = workloads.fanout(3).expected_output()
    with pytest.raises(child.WrongOutput, match="missing: sink"):
        child.check_output({}, expected)
    with pytest.raises(child.WrongOutput, match="wrong: sink"):
        child.check_output({"sink": {"step": "sink", "n": 6}}, expected)
    with pytest.raises(child.WrongOutput, match="returned None"):
        child.check_output(None, expected)
    child.check_output({"sink": {"step": "sink", "n": 7}}, expected)


def test_a_child_measurement_with_the_wrong_output_records_no_time() -> None:
    # the no-op style's output ({sink: None}) against the real steps' expected value
    class NoopClaimingRealSteps(plait_adapter.PlaitAdapter):
        def expected(self, workload: workloads.Workload) -> dict[str, object]:
            return workload.expected_output()

    result: dict[str, object] = {"walls": [], "cpus": []}
    adapter = NoopClaimingRealSteps(style="noop")
    with pytest.raises(child.WrongOutput, match="wrong: s2"):
        child._measure(adapter, workloads.chain(3), repeats=1, warmup=0,
                       budget_s=float("inf"), result=result)
    assert result["walls"] == []


async def test_many_runs_checks_every_run_on_memory_and_sqlite() -> None:
    data = await many_runs.measure(runs=4, concurrency=2, chunk=2)
    assert "error" not in data
    assert {"memory, url", "sqlite, url"} <= set(data["modes"])
    assert all(m["runs"] == 4 for m in data["modes"].values())
    assert "sqlite_over_memory_url" in data
