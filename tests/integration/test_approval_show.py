"""What an approval asks: its ``prompt`` and ``show:`` (the content under review) are
rendered once, when the step starts waiting, stored as a ``wait`` note (bounded, secrets
redacted), and read back as the step's ``waiting`` entry (``plait show --json``, the
API's run document); ``ctx.wait_for_approval(show=...)`` the same."""

from __future__ import annotations

from typing import Any

import pytest

from plait import StepContext, Workflow
from plait.cli.records import waiting_sections
from plait.core.model import Limits
from plait.errors import DefinitionError
from plait.rundoc.records import add_waiting, show_json
from plait.runtime.engine import Engine
from plait.store import MemoryStore

from .conftest import run_with

NOTES = {"title": "v2", "changes": ["faster", "<script>x</script>"]}


def _draft() -> dict[str, Any]:
    return NOTES


def _publish(review: Any) -> str:
    return "published"


def _gated(limits: Limits | None = None, **approval: Any) -> Workflow:
    wf = Workflow("gated-show", limits=limits)
    wf.add_step("draft", _draft)  # importable: a resumed run looks them up
    wf.add_step("review", type="approval", depends_on=["draft"], **approval)
    wf.add_step("publish", _publish, depends_on=["review"])
    return wf


async def _document(store: MemoryStore, run_id: str) -> dict[str, Any]:
    run = await store.get_run(run_id)
    value = show_json(run, await store.get_steps(run_id), await store.get_attempts(run_id))
    add_waiting(value, await store.get_events(run_id))
    return value


def _wait_notes(events: Any) -> list[Any]:
    return [e.data["wait"] for e in events if e.kind == "note" and "wait" in e.data]


async def test_prompt_and_show_are_rendered_stored_and_shown(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLAIT_SECRET_TOKEN", "tok-123456789")
    store = MemoryStore()
    engine = Engine(store)
    wf = _gated(prompt="Publish {{ steps.draft.output.title }}?",
                show={"notes": "{{ steps.draft.output }}", "key": "{{ secrets.TOKEN }}"})
    result = await run_with(engine, wf)
    assert result.status == "waiting"
    value = await _document(store, result.run_id)
    assert value["steps"]["review"]["waiting"] == {
        "kind": "approval", "prompt": "Publish v2?",
        "show": {"notes": NOTES, "key": "***"},
        "event": None, "until": None, "child_run_id": None}
    assert value["steps"]["draft"]["waiting"] is None
    # the approval's open attempt waits, as its step does
    (attempt,) = [a for a in value["attempts"] if a["step"] == "review"]
    assert attempt["status"] == "waiting"
    ((title, lines),) = waiting_sections(await store.get_steps(result.run_id),
                                         await store.get_events(result.run_id))
    assert title == "waiting for approval: review"
    assert lines[0] == "prompt  Publish v2?"
    assert '        "<script>x</script>"' in lines

    # resumed: the wait is not announced again; approved: nothing waits
    await engine.resume(result.run_id)
    assert len(_wait_notes(await store.get_events(result.run_id))) == 1
    await engine.approve(result.run_id, "review", by="ada")
    done = await engine.resume(result.run_id)
    assert done.status == "completed"
    value = await _document(store, result.run_id)
    assert value["steps"]["review"]["waiting"] is None
    engine.close()


async def test_a_show_that_does_not_render_fails_the_step() -> None:
    engine = Engine(MemoryStore())
    result = await run_with(engine, _gated(show="{{ steps.draft.output.missing.deeper }}"))
    assert result.status == "failed"
    assert result.steps["review"].status == "failed"
    assert "`show`" in str(result.steps["review"].error)
    assert result.steps["publish"].status == "upstream_failed"
    engine.close()


async def test_a_show_bigger_than_an_output_may_be_fails_the_step() -> None:
    wf = _gated(Limits(max_output_bytes=1000), show="{{ 'x' * 5000 }}")
    engine = Engine(MemoryStore())
    result = await run_with(engine, wf)
    assert result.steps["review"].status == "failed"
    assert "what the approval shows" in str(result.steps["review"].error)
    engine.close()


async def _asks(ctx: StepContext) -> str:
    await ctx.wait_for_approval(prompt="Send it?", show={"to": ["ops"], "n": 2})
    return "sent"


async def test_a_python_step_shows_what_it_asks_for() -> None:
    store = MemoryStore()
    engine = Engine(store)
    wf = Workflow("py-show")
    wf.add_step("send", _asks)
    result = await run_with(engine, wf)
    assert result.status == "waiting"
    value = await _document(store, result.run_id)
    waiting = value["steps"]["send"]["waiting"]
    assert (waiting["kind"], waiting["prompt"], waiting["show"]) == \
        ("approval", "Send it?", {"to": ["ops"], "n": 2})
    engine.close()


def test_show_is_validated_with_the_step() -> None:
    definition = {"name": "bad-show", "steps": [
        {"id": "a", "type": "transform", "value": 1},
        {"id": "review", "type": "approval", "depends_on": ["a"], "prompt": 7,
         "show": {"x": "{{ steps.later.output }}", "y": "{{ oops( }}"}},
        {"id": "later", "type": "transform", "depends_on": ["review"], "value": 2}]}
    with pytest.raises(DefinitionError) as caught:
        Workflow.from_dict(definition).validate()
    assert {p.location for p in caught.value.problems} == {
        "steps[1].prompt", "steps[1].show.x", "steps[1].show.y"}
