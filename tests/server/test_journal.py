"""The API's run document lists each step's journaled calls (``ctx.run``) as ``plait
show --json`` does: ``"journal": [{"name", "attempt", "at"}]`` per step."""

from __future__ import annotations

from pathlib import Path

from plait import StepContext, Workflow

from .conftest import Client


def _call(what: str) -> str:
    return what


async def journaled(ctx: StepContext) -> object:
    return [await ctx.run("first", _call, "a"), await ctx.run("second", _call, "b")]


def test_the_run_document_lists_each_steps_journal(make_client: Client,
                                                   tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    wf = Workflow("journal-api")
    wf.add_step("agent", journaled)
    wf.add_step("after", lambda agent: agent, depends_on=["agent"])
    run_id = wf.run(db=db).run_id

    client = make_client(db, worker=False)
    document = client.get(f"/api/runs/{run_id}").json()

    journal = document["steps"]["agent"]["journal"]
    assert [(j["name"], j["attempt"]) for j in journal] == [("first", 1), ("second", 1)]
    assert all(isinstance(j["at"], str) for j in journal)
    assert document["steps"]["after"]["journal"] == []
    assert client.get("/api/runs/not-a-run").status_code in (400, 404)
