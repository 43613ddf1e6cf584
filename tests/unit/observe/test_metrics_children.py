"""Metrics roll a run's tokens up over its child runs (``loop``, ``workflow`` and map
items of those), at any depth, without counting a token twice in the total: real runs in
SQLite, usage notes written as an ``llm`` step of each child would have written them,
read through ``plait metrics``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from plait import Workflow, connect
from plait.cli.main import cli
from plait.core.child_ids import child_run_id
from plait.store.base import WriteBatch

KID = {"name": "kid", "steps": [{"id": "ask", "type": "transform", "value": 1}]}
DAD = {"name": "dad", "steps": [
    {"id": "rounds", "type": "loop", "workflow": "kid", "definition": KID,
     "until": "{{ loop.iteration >= 2 }}", "max_iterations": 5}]}
TOP = {"name": "top", "steps": [
    {"id": "start", "type": "transform", "value": 0},
    {"id": "sub", "type": "workflow", "workflow": "dad", "definition": DAD},
    {"id": "fan", "type": "map", "over": [1, 2],
     "step": {"type": "workflow", "workflow": "kid", "definition": KID}}]}


def usage(prompt: int, completion: int) -> dict[str, Any]:
    return {"usage": {"attempt": 1, "model": "m", "prompt_tokens": prompt,
                      "completion_tokens": completion, "total_tokens": prompt + completion}}


async def _store_runs(db: str) -> None:
    """One run of ``top``: its own step ``start`` used 2 tokens; ``sub``'s child ``dad``
    looped 3 times over ``kid`` (11 + 22 + 33 tokens); ``fan``'s 2 items are ``kid``
    runs (100 tokens each)."""
    async with connect(db) as held:
        result = await Workflow.from_dict(TOP).run_async({}, db=held)
        assert result.status == "completed", result.error
        top, store = result.run_id, held.store
        dad = child_run_id(top, "sub", "0")
        writes = [(top, "start", usage(1, 1))]
        writes += [(child_run_id(dad, "rounds", str(i)), "ask", usage(10 * (i + 1), i + 1))
                   for i in range(3)]
        writes += [(child_run_id(top, f"fan[{i}]", "0"), "ask", usage(100, 0))
                   for i in range(2)]
        for run_id, step, note in writes:
            await store.write(WriteBatch(run_id=run_id, notes=[(step, note)]))


@pytest.fixture
def metrics(tmp_path: Path) -> Any:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    asyncio.run(_store_runs(db))

    def run(*args: str) -> str:
        result = CliRunner().invoke(cli, ["metrics", "--db", db, *args])
        assert result.exit_code == 0, result.output
        return result.stdout

    return run


def _total(value: dict[str, Any]) -> int:
    return int(value["total_tokens"])


def test_a_parent_counts_its_child_runs_tokens_and_the_total_counts_each_once(metrics):
    report = json.loads(metrics("--json"))
    by_name = {w["workflow"]: w for w in report["workflows"]}
    kid, dad, top = by_name["kid"], by_name["dad"], by_name["top"]
    assert kid["runs"] == 5 and _total(kid) == 266 == _total(kid["tokens_with_children"])
    assert _total(dad) == 0  # its model calls happen in its loop's children
    assert dad["tokens_with_children"] == {"prompt_tokens": 60, "completion_tokens": 6,
                                           "total_tokens": 66}
    rounds = {s["step"]: s for s in dad["steps"]}["rounds"]
    assert (_total(rounds), _total(rounds["tokens_with_children"])) == (0, 66)
    assert _total(top) == 2 and _total(top["tokens_with_children"]) == 2 + 66 + 200
    steps = {s["step"]: s for s in top["steps"]}
    assert {name: _total(steps[name]["tokens_with_children"])
            for name in ("start", "sub", "fan", "fan[*]")} == {
        "start": 2, "sub": 66, "fan": 0, "fan[*]": 200}
    # every run once: not 600, the sum of the three workflows' rolled-up figures
    assert report["tokens"] == {"prompt_tokens": 261, "completion_tokens": 7,
                                "total_tokens": 268}


def test_one_workflow_reads_its_runs_descendants_for_their_tokens(metrics):
    report = json.loads(metrics("--json", "--workflow", "top"))
    assert [w["workflow"] for w in report["workflows"]] == ["top"]
    top = report["workflows"][0]
    assert _total(top["tokens_with_children"]) == 268 == _total(report["tokens"])
    assert {s["step"]: _total(s["tokens_with_children"]) for s in top["steps"]}["sub"] == 66


def test_json_shape_and_text(metrics):
    report = json.loads(metrics("--json", "--workflow", "dad"))
    assert set(report) == {"since", "runs", "tokens", "workflows", "alerts"}
    tokens = {"prompt_tokens", "completion_tokens", "total_tokens"}
    dad = report["workflows"][0]
    assert set(report["tokens"]) == tokens == set(dad["tokens_with_children"])
    assert tokens < set(dad) and tokens < set(dad["steps"][0])
    assert set(dad["steps"][0]["tokens_with_children"]) == tokens
    text = metrics("--workflow", "dad")
    assert "tokens 0 (prompt 0, completion 0)   with child runs 66 (prompt 60, " \
           "completion 6)" in text
    assert "with children" in text and "all runs read: tokens 66" in text
