"""``cache: {key, ttl}`` on steps through the Python API and the CLI: a fresh
completed result of the same workflow, step and rendered key is reused without running
the step; misses, expiry, failures and fallbacks are never served from it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from plait import DefinitionError, FatalError, Workflow
from plait.cli.main import cli

pytestmark = pytest.mark.slow  # starts `plait run` processes

CALLS: list[object] = []


def double(input: dict[str, int]) -> dict[str, int]:
    CALLS.append(input)
    return {"v": input["x"] * 2}


def broken(input: object) -> object:
    CALLS.append(input)
    raise FatalError("broken on purpose")


@pytest.fixture(autouse=True)
def _calls() -> None:
    CALLS.clear()


def cached_workflow(name: str = "cache-api", ttl: object = "1h",
                    key: str = "{{ input.x }}") -> Workflow:
    wf = Workflow(name)
    wf.add_step("double", double, cache={"key": key, "ttl": ttl})
    return wf


async def test_a_second_run_with_the_same_key_reuses_the_result(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    wf = cached_workflow()

    first = await wf.run_async({"x": 2}, db=db)
    second = await wf.run_async({"x": 2}, db=db)
    other = await wf.run_async({"x": 3}, db=db)

    assert [r.steps["double"].output for r in (first, second, other)] == [
        {"v": 4}, {"v": 4}, {"v": 6}]
    assert [r.steps["double"].cached for r in (first, second, other)] == [
        False, True, False]
    assert CALLS == [{"x": 2}, {"x": 3}]  # the hit never called the function
    assert second.to_json()["steps"]["double"]["cached"] is True
    assert second.status == "completed"


async def test_an_expired_result_is_not_reused(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    wf = cached_workflow(ttl=0.2)

    await wf.run_async({"x": 1}, db=db)
    time.sleep(0.25)
    again = await wf.run_async({"x": 1}, db=db)

    assert again.steps["double"].cached is False
    assert len(CALLS) == 2


async def test_the_key_is_scoped_to_workflow_and_step(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    await cached_workflow("cache-one").run_async({"x": 1}, db=db)
    result = await cached_workflow("cache-two").run_async({"x": 1}, db=db)

    assert result.steps["double"].cached is False
    assert len(CALLS) == 2


async def test_failed_results_are_never_cached() -> None:
    from plait.store import open_store

    store = open_store("memory://")
    await store.open()
    wf = Workflow("cache-fail")
    wf.add_step("boom", broken, cache={"key": "k", "ttl": "1h"})
    try:
        from plait.runtime.engine import Engine

        engine = Engine(store)
        first = await engine.run(wf.validate(), {})
        second = await engine.run(wf.validate(), {})
    finally:
        await store.close()
    assert (first.status, second.status) == ("failed", "failed")
    assert second.steps["boom"].cached is False
    assert len(CALLS) == 2
    assert await store.get_cached("cache-fail", "boom", "k", 0) is None


async def test_a_fallback_output_is_not_cached() -> None:
    wf = Workflow("cache-fallback")
    wf.add_step("boom", broken, cache={"key": "k", "ttl": "1h"},
                fallback={"output": "plan b"})
    from plait.runtime.engine import Engine
    from plait.store import open_store

    store = open_store("memory://")
    await store.open()
    try:
        engine = Engine(store)
        first = await engine.run(wf.validate(), {})
        second = await engine.run(wf.validate(), {})
    finally:
        await store.close()
    assert first.steps["boom"].output == second.steps["boom"].output == "plan b"
    assert (first.steps["boom"].fallback_used, second.steps["boom"].cached) == (True, False)
    assert len(CALLS) == 2


async def test_a_key_that_fails_to_render_fails_the_step_without_retry() -> None:
    wf = cached_workflow(key="{{ input.missing.deeper }}")

    result = await wf.run_async({"x": 1})

    step = result.steps["double"]
    assert (step.status, step.attempts) == ("failed", 1)
    assert "cache.key" in (step.error or "")
    assert CALLS == []


def test_cache_needs_a_key_and_a_ttl() -> None:
    with pytest.raises(DefinitionError) as excinfo:
        Workflow.from_dict({"name": "bad-cache", "steps": [
            {"id": "a", "type": "transform", "value": 1, "cache": {"ttl": "1h"}},
            {"id": "b", "type": "transform", "value": 1, "cache": {"key": "k"}},
            {"id": "c", "type": "transform", "value": 1,
             "cache": {"key": "k", "ttl": "soon", "size": 3}},
            {"id": "d", "type": "transform", "value": 1, "cache": "yes"},
            {"id": "e", "type": "transform", "value": 1,
             "cache": {"key": "{{ steps.nope.output }}", "ttl": 5}},
        ]}).validate()
    found = {p.location: p.message for p in excinfo.value.problems}
    assert "a cache needs `key`" in found["steps[0].cache.key"]
    assert "a cache needs `ttl`" in found["steps[1].cache.ttl"]
    assert "expected a duration" in found["steps[2].cache.ttl"]
    assert "size" in " ".join(k + v for k, v in found.items() if k.startswith("steps[2]"))
    assert "steps[3].cache" in found
    assert any(k.startswith("steps[4].cache.key") and "nope" in v for k, v in found.items())


def test_cache_round_trips_through_to_dict() -> None:
    wf = Workflow.from_dict({"name": "rt", "steps": [
        {"id": "a", "type": "transform", "value": 1,
         "cache": {"key": "{{ input.q }}", "ttl": "2h"}}]})
    again = Workflow.from_dict(wf.to_dict())
    assert again.to_dict()["steps"][0]["cache"] == {"key": "{{ input.q }}", "ttl": 7200.0}


# ------------------------------------------------------------------ CLI, two processes


FLOW = """
name: cache-cli
steps:
  - id: fetch
    type: python
    call: cache_steps:fetch
    with: {q: "{{ input.q }}"}
    cache: {key: "q={{ input.q }}", ttl: 1h}
  - id: shout
    type: transform
    depends_on: [fetch]
    value: "{{ steps.fetch.output.upper() }}"
"""

STEPS = """
from pathlib import Path

def fetch(q):
    log = Path(__file__).with_name("calls.txt")
    log.write_text(log.read_text() + q + "\\n" if log.exists() else q + "\\n")
    return "answer for " + q
"""


def test_two_processes_share_the_cache_and_history_shows_it(tmp_path: Path) -> None:
    (tmp_path / "flow.yaml").write_text(FLOW)
    (tmp_path / "cache_steps.py").write_text(STEPS)
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    env = {k: v for k, v in os.environ.items() if k != "PLAIT_DB"}

    def run() -> dict[str, object]:
        proc = subprocess.run([sys.executable, "-m", "plait", "run", "flow.yaml", "--db", db,
                               "--input", '{"q": "tides"}', "--json"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)  # type: ignore[no-any-return]

    first, second = run(), run()

    assert (tmp_path / "calls.txt").read_text() == "tides\n"  # ran once, in the first
    assert first["steps"]["fetch"]["cached"] is False  # type: ignore[index]
    assert second["steps"]["fetch"]["cached"] is True  # type: ignore[index]
    assert second["steps"]["shout"]["cached"] is False  # type: ignore[index]
    assert second["output"] == {"shout": "ANSWER FOR TIDES"}
    runner = CliRunner()
    shown = json.loads(runner.invoke(cli, ["show", str(second["run_id"]), "--db", db,
                                           "--json"]).stdout)
    assert shown["steps"]["fetch"]["cached"] is True
    assert shown["steps"]["fetch"]["output"] == "answer for tides"
    metrics = json.loads(runner.invoke(cli, ["metrics", "--db", db, "--json"]).stdout)
    row = metrics["workflows"][0]
    assert (row["cache_hits"], row["steps"][0]["cache_hits"]) == (1, 1)
    text = runner.invoke(cli, ["metrics", "--db", db]).stdout
    assert "cache hits 1" in text
