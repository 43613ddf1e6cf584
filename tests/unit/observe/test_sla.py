"""SLA breaches: finished and still-going runs, how far over, the JSON shape."""

from __future__ import annotations

import json

import pytest

from plait.observe.sla import breach_of, breaches, find_breaches, render_breaches, to_json
from plait.store import open_store

from .records import T0, run


def test_a_finished_run_past_its_sla_breaches_by_the_excess():
    b = breach_of(run(start=5.0, end=75.0, sla=60.0), now=T0 + 1000)
    assert b is not None
    assert (b.elapsed, b.over, b.active) == (70.0, 10.0, False)


def test_runs_within_or_without_an_sla_do_not_breach():
    assert breach_of(run(start=0.0, end=60.0, sla=60.0), now=T0 + 1000) is None  # exactly
    assert breach_of(run(start=0.0, end=59.0, sla=60.0), now=T0 + 1000) is None
    assert breach_of(run(start=0.0, end=999.0, sla=None), now=T0 + 1000) is None


@pytest.mark.parametrize("status", ["running", "waiting"])
def test_a_run_still_going_is_measured_to_now(status):
    r = run(status=status, start=10.0, end=None, sla=30.0)
    assert breach_of(r, now=T0 + 35.0) is None
    b = breach_of(r, now=T0 + 50.0)
    assert b is not None
    assert (b.elapsed, b.over, b.active) == (40.0, 10.0, True)


def test_a_run_that_never_started_is_measured_from_creation():
    b = breach_of(run(status="pending", start=None, end=None, created=0.0, sla=5.0),
                  now=T0 + 8.0)
    assert b is not None and b.elapsed == 8.0 and b.over == 3.0


@pytest.mark.parametrize("status", ["failed", "cancelled"])
def test_failed_and_cancelled_runs_breach_too(status):
    b = breach_of(run(status=status, start=0.0, end=20.0, sla=10.0), now=T0 + 1000)
    assert b is not None and b.status == status


def test_breaches_are_sorted_worst_first():
    runs = [run("a", end=12.0, sla=10.0), run("b", end=40.0, sla=10.0),
            run("c", end=5.0, sla=10.0), run("d", status="running", end=None, sla=10.0)]
    found = find_breaches(runs, now=T0 + 25.0)
    assert [(b.run_id, b.over) for b in found] == [("b", 30.0), ("d", 15.0), ("a", 2.0)]


def test_to_json_and_text():
    found = find_breaches([run("a", workflow="nightly", end=90.0, sla=60.0)], now=T0 + 100)
    data = to_json(found, now=T0 + 100)
    json.dumps(data)
    assert data["count"] == 1
    entry = data["breaches"][0]
    assert set(entry) == {"run_id", "workflow", "version", "status", "active", "sla_s",
                          "elapsed_s", "over_s", "over_ratio", "created_at", "started_at",
                          "finished_at"}
    assert (entry["sla_s"], entry["elapsed_s"], entry["over_s"]) == (60.0, 90.0, 30.0)
    assert entry["over_ratio"] == 1.5
    assert entry["started_at"].endswith("Z") and entry["status"] == "completed"
    text = render_breaches(found)
    assert "a  nightly@1  completed  1m30s / SLA 1m00s  +30s over" in text
    assert render_breaches([]) == "no runs past their SLA\n"


async def test_breaches_reads_runs_from_a_store():
    store = open_store("memory://")
    for r in [run("late", end=100.0, sla=60.0), run("fine", end=30.0, sla=60.0),
              run("open", status="running", end=None, sla=60.0, workflow="other"),
              run("free", end=500.0)]:
        await store.create_run(r, ["a"])
    found = await breaches(store, now=T0 + 200.0)
    assert [(b.run_id, b.over) for b in found] == [("open", 140.0), ("late", 40.0)]
    only = await breaches(store, now=T0 + 200.0, workflow="wf")
    assert [b.run_id for b in only] == ["late"]
