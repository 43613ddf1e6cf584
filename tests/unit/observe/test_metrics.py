"""Metrics: exact percentiles, per-workflow and per-step numbers, the JSON shape."""

from __future__ import annotations

import asyncio
import json

import pytest

import plait
from plait import StepContext, Workflow
from plait.definitions import check_definition
from plait.observe.metrics import (
    MetricsReport,
    collect,
    compute,
    percentile,
    render_metrics,
    since_cutoff,
)
from plait.runtime.engine import Engine
from plait.store import open_store

from .records import T0, attempt, history, run, step

# ------------------------------------------------------------------------ percentiles


@pytest.mark.parametrize(("q", "expected"), [(0.0, 1.0), (0.5, 5.5), (0.95, 9.55),
                                             (0.99, 9.91), (1.0, 10.0)])
def test_percentile_interpolates_linearly_between_closest_ranks(q: float, expected: float):
    values = [float(v) for v in (7, 3, 10, 1, 5, 2, 9, 4, 8, 6)]  # order does not matter
    assert percentile(values, q) == pytest.approx(expected)


def test_percentile_of_small_samples():
    assert percentile([4.0], 0.99) == 4.0
    assert percentile([1.0, 2.0], 0.5) == 1.5
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.95) == pytest.approx(3.85)
    assert percentile([], 0.5) is None


def test_percentile_refuses_a_quantile_outside_0_1():
    with pytest.raises(ValueError, match="between 0 and 1"):
        percentile([1.0], 95)


# ------------------------------------------------------------------------ compute


def _histories():
    """Five runs of ``wf`` (completed, failed, completed via fallback, cancelled, running)
    and one of ``other``; every number below is worked out by hand in the tests."""
    return [
        history(run("r1", end=10.0),
                [step("fetch", start=0, end=4, attempts=3, run_id="r1"),
                 step("parse", start=4, end=6, run_id="r1")],
                [attempt("fetch", 1, "failed", 0, 1, run_id="r1"),
                 attempt("fetch", 2, "failed", 1.5, 2.5, run_id="r1"),
                 attempt("fetch", 3, "completed", 3, 4, run_id="r1"),
                 attempt("parse", 1, "completed", 4, 6, run_id="r1")]),
        history(run("r2", status="failed", end=20.0),
                [step("fetch", "failed", start=0, end=5, attempts=2, run_id="r2"),
                 step("parse", "upstream_failed", start=None, end=None, attempts=0,
                      run_id="r2")],
                [attempt("fetch", 1, "failed", 0, 2, run_id="r2"),
                 attempt("fetch", 2, "failed", 3, 5, run_id="r2")]),
        history(run("r3", end=30.0),
                [step("fetch", start=0, end=2, attempts=1, fallback_used=True, run_id="r3"),
                 step("parse", start=2, end=5, run_id="r3")],
                [attempt("fetch", 1, "failed", 0, 2, run_id="r3"),
                 attempt("fetch", 1, "completed", 2, 2, fallback=True, run_id="r3"),
                 attempt("parse", 1, "completed", 2, 5, run_id="r3")]),
        history(run("r4", status="cancelled", end=40.0),
                [step("fetch", "cancelled", start=0, end=1, run_id="r4"),
                 step("parse", "pending", start=None, end=None, attempts=0, run_id="r4")],
                [attempt("fetch", 1, "cancelled", 0, 1, run_id="r4")]),
        history(run("r5", status="running", end=None),
                [step("fetch", "running", start=0, end=None, run_id="r5")],
                [attempt("fetch", 1, "running", 0, None, run_id="r5")]),
        history(run("o1", workflow="other", end=3.0),
                [step("only", start=0, end=3, run_id="o1")],
                [attempt("only", 1, "completed", 0, 3, run_id="o1")]),
    ]


def test_workflow_metrics():
    report = compute(_histories())
    assert [w.workflow for w in report.workflows] == ["other", "wf"]
    wf = report.workflow("wf")
    assert wf is not None
    assert (wf.runs, wf.completed, wf.failed, wf.cancelled, wf.active) == (5, 2, 1, 1, 1)
    assert wf.success_rate == 0.5  # 2 completed of 4 finished; the running one is left out
    assert wf.duration.count == 4
    assert wf.duration.p50 == pytest.approx(25.0)
    assert wf.duration.p95 == pytest.approx(38.5)
    assert wf.duration.p99 == pytest.approx(39.7)
    assert (wf.duration.mean, wf.duration.max) == (25.0, 40.0)
    assert wf.retries_per_run == pytest.approx(3 / 5)
    assert wf.fallbacks == 1
    assert report.runs == 6


def test_step_metrics_count_executions_retries_and_fallbacks():
    wf = compute(_histories()).workflow("wf")
    assert wf is not None
    assert [s.step for s in wf.steps] == ["fetch", "parse"]
    fetch = wf.step("fetch")
    assert fetch is not None
    assert (fetch.executions, fetch.completed, fetch.failures, fetch.cancelled) == (5, 2, 1, 1)
    assert fetch.success_rate == 0.5
    assert (fetch.attempts, fetch.retries, fetch.fallbacks) == (8, 3, 1)
    assert fetch.retries_per_execution == pytest.approx(0.6)
    parse = wf.step("parse")
    assert parse is not None
    assert (parse.executions, parse.success_rate, parse.retries_per_execution) == (2, 1.0, 0.0)


def test_step_durations_include_retries_and_attempt_durations_exclude_fallbacks():
    wf = compute(_histories()).workflow("wf")
    assert wf is not None
    fetch = wf.step("fetch")
    assert fetch is not None
    # step spans of the finished executions: 4, 5, 2, 1
    assert fetch.duration.count == 4
    assert fetch.duration.p50 == pytest.approx(3.0)
    assert fetch.duration.p95 == pytest.approx(4.85)
    assert fetch.duration.p99 == pytest.approx(4.97)
    # finished, non-fallback attempts: 1, 1, 1, 2, 2, 2, 1 (the running one has no end)
    assert fetch.attempt_duration.count == 7
    assert fetch.attempt_duration.p50 == pytest.approx(1.0)
    assert fetch.attempt_duration.p95 == pytest.approx(2.0)
    assert fetch.attempt_duration.mean == pytest.approx(10 / 7)
    parse = wf.step("parse")
    assert parse is not None
    assert (parse.duration.p50, parse.duration.p95, parse.duration.p99) == pytest.approx(
        (2.5, 2.95, 2.99))


def test_no_runs_gives_an_empty_report():
    report = compute([])
    assert report == MetricsReport()
    assert report.to_json() == {"since": None, "runs": 0, "workflows": [], "tokens": {
        "prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}
    assert render_metrics(report) == "no runs\n"


def test_rates_are_none_when_nothing_finished():
    report = compute([history(run(status="running", end=None),
                              [step("a", "running", end=None)],
                              [attempt("a", 1, "running", 0, None)])])
    wf = report.workflows[0]
    assert wf.success_rate is None
    assert wf.duration.p95 is None
    a = wf.step("a")
    assert a is not None and a.success_rate is None and a.duration.count == 0


# ------------------------------------------------------------------------ JSON and text


def test_to_json_has_the_documented_keys_and_is_json():
    data = compute(_histories(), since=T0).to_json()
    json.dumps(data)  # serialisable as is
    assert set(data) == {"since", "runs", "tokens", "workflows"}
    assert data["since"] == "2023-11-14T22:13:20Z"  # ISO-8601 UTC, like every JSON time
    wf = data["workflows"][1]
    assert set(wf) == {"workflow", "runs", "completed", "failed", "cancelled", "active",
                       "success_rate", "duration_s", "compute_s", "retries_per_run",
                       "fallbacks", "steps",
                       "cache_hits", "prompt_tokens", "completion_tokens", "total_tokens",
                       "tokens_with_children"}
    assert set(wf["duration_s"]) == {"count", "mean", "p50", "p95", "p99", "max"}
    assert set(wf["steps"][0]) == {
        "step", "executions", "completed", "failures", "cancelled", "success_rate",
        "duration_s", "attempt_duration_s", "compute_s", "attempts", "retries",
        "retries_per_execution",
        "fallbacks", "cache_hits", "prompt_tokens", "completion_tokens", "total_tokens",
        "tokens_with_children"}
    assert wf["duration_s"]["p95"] == pytest.approx(38.5)


def test_render_metrics_shows_workflows_and_step_rows():
    text = render_metrics(compute(_histories()))
    assert "wf: 5 runs (2 completed, 1 failed, 1 cancelled, 1 active)" in text
    assert "success 50.0%" in text
    lines = text.splitlines()
    fetch = next(line for line in lines if line.strip().startswith("fetch"))
    assert fetch.split() == ["fetch", "5", "50.0%", "3s", "4.85s", "4.97s", "1s", "2s",
                             "0.60", "1", "1"]
    header = next(line for line in lines if line.strip().startswith("step"))
    assert "p95" in header and "retries/exec" in header


def test_since_cutoff_reads_durations():
    assert since_cutoff("1h", now=10_000.0) == 6_400.0
    assert since_cutoff(30, now=100.0) == 70.0
    with pytest.raises(ValueError, match="duration"):
        since_cutoff("yesterday", now=0.0)


# ------------------------------------------------------------------------ over real runs


def _flaky(ctx: StepContext):
    if ctx.attempt < 3:
        raise RuntimeError("not yet")
    return ctx.attempt


def _broken(input):
    raise RuntimeError("always")


def _plain(input):
    return 1


async def test_collect_reads_real_runs_from_a_store():
    wf = Workflow("metrics-real")
    wf.add_step("first", _plain)
    wf.add_step("flaky", _flaky, depends_on=["first"],
                retry=plait.Retry(max_retries=2, initial_delay=0.01, jitter=0))
    wf.add_step("rescued", _broken, depends_on=["first"],
                retry=plait.Retry(max_retries=1, initial_delay=0.01, jitter=0),
                fallback={"output": 0})
    other = Workflow("metrics-other")
    other.add_step("lonely", _plain)
    store = open_store("memory://")
    engine = Engine(store)
    for _ in range(2):
        assert (await engine.run(wf.validate(), {})).status == "completed"
    await engine.run(other.validate(), {})

    report = await collect(store, workflow="metrics-real")
    assert [w.workflow for w in report.workflows] == ["metrics-real"]
    real = report.workflows[0]
    assert (real.runs, real.completed, real.success_rate) == (2, 2, 1.0)
    assert real.retries_per_run == 3.0  # flaky: 2 retries, rescued: 1 retry
    flaky, rescued = real.step("flaky"), real.step("rescued")
    assert flaky is not None and rescued is not None
    assert (flaky.executions, flaky.retries_per_execution, flaky.fallbacks) == (2, 2.0, 0)
    assert flaky.attempt_duration.count == 6
    assert (rescued.retries, rescued.fallbacks, rescued.success_rate) == (2, 2, 1.0)
    assert rescued.attempt_duration.count == 4  # the fallbacks are not attempts
    assert real.duration.p50 is not None and real.duration.p50 > 0

    assert {w.workflow for w in (await collect(store)).workflows} == {
        "metrics-real", "metrics-other"}
    assert (await collect(store, since=T0 * 10)).workflows == ()


# ------------------------------------------------------------------------ maps and waits


def test_map_items_fold_into_one_row_beside_their_map_step():
    r = run("m1", end=5.0)
    steps = [step("research", start=0, end=4, run_id="m1")] + [
        step(f"research[{i}]", start=1, end=2 + i, attempts=1 + (i == 2), run_id="m1")
        for i in range(3)]
    attempts = [attempt("research", 1, "completed", 0, 4, run_id="m1")] + [
        attempt(f"research[{i}]", 1, "completed", 1, 2 + i, run_id="m1") for i in range(3)]
    report = compute([history(r, steps, attempts)])
    rows = report.workflows[0].steps
    assert [s.step for s in rows] == ["research", "research[*]"]
    items = rows[1]
    assert (items.executions, items.attempts, items.retries) == (3, 4, 1)
    assert items.duration.max == pytest.approx(3.0)
    assert "research[*]" in render_metrics(report) and "research[0]" not in render_metrics(report)


async def test_compute_time_leaves_out_waits_on_a_map_and_an_approval(tmp_path):
    """A SQLite run of a map of three python items, an approval decided after 0.4 s and
    one more python step: the wall time holds the wait, compute time does not."""
    checked = check_definition({"name": "waits-metrics", "steps": [
        {"id": "research", "type": "map", "over": [0.05, 0.05, 0.05],
         "step": {"type": "python", "call": "unit.observe.records:nap",
                  "with": {"seconds": "{{ item }}"}}},
        {"id": "gate", "type": "approval", "depends_on": ["research"]},
        {"id": "after", "type": "python", "call": "unit.observe.records:nap",
         "with": {"seconds": 0.05}, "depends_on": ["gate"]}]})
    store = open_store(f"sqlite:///{tmp_path}/m.db")
    await store.open()
    try:
        engine = Engine(store)
        waiting = await engine.run(checked, {})
        assert waiting.status == "waiting"
        await asyncio.sleep(0.4)
        await engine.approve(waiting.run_id, "gate", by="tester")
        assert (await engine.resume(waiting.run_id, checked)).status == "completed"
        report = await collect(store, workflow="waits-metrics")
    finally:
        await store.close()
    wf = report.workflows[0]
    assert [s.step for s in wf.steps] == ["research", "gate", "after", "research[*]"]
    wall, busy = wf.duration.max, wf.compute.max
    assert wall is not None and busy is not None
    assert wall >= 0.5 and 0.09 <= busy <= wall - 0.35  # items side by side, then after
    gate, items, research = wf.step("gate"), wf.step("research[*]"), wf.step("research")
    assert gate is not None and items is not None and research is not None
    assert gate.duration.max is not None and gate.duration.max >= 0.4
    assert gate.compute.max == 0.0  # its one attempt is the wait
    assert (items.executions, items.compute.count) == (3, 3)
    assert items.compute.p50 is not None and items.compute.p50 >= 0.04
    assert research.compute.max is not None and research.compute.max < 0.04  # not its items
    data = report.to_json()["workflows"][0]
    assert data["compute_s"]["count"] == 1 and data["steps"][3]["step"] == "research[*]"
