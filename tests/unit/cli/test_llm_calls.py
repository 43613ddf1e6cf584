"""cli.llm_calls: the messages and tokens of a run's model calls, as plait show and the
API give them, and the roll-up to the run with its child runs (map items' too)."""

from __future__ import annotations

from typing import Any

from plait import Workflow, connect
from plait.cli.llm_calls import (
    RollUp,
    Tokens,
    add_llm,
    conversation_lines,
    roll_up,
    step_tokens,
)
from plait.core.child_ids import child_run_id
from plait.observe.tokens import parent_steps
from plait.store.base import EventRecord, WriteBatch


def note(seq: int, step: str, data: dict[str, Any]) -> EventRecord:
    return EventRecord(run_id="r", seq=seq, at=0.0, kind="note", step_id=step, data=data)


def usage(attempt: int, prompt: int, completion: int) -> dict[str, Any]:
    return {"usage": {"attempt": attempt, "model": "m", "prompt_tokens": prompt,
                      "completion_tokens": completion, "total_tokens": prompt + completion}}


def test_step_entries_get_the_latest_request_and_every_attempts_tokens() -> None:
    events = [note(1, "ask", {"llm_request": {"attempt": 1, "model": "m", "cut": None,
                                              "messages": [{"role": "user", "content": "a"}]}}),
              note(2, "ask", usage(1, 5, 1)),
              note(3, "ask", {"llm_request": {"attempt": 2, "model": "m", "cut": None,
                                              "messages": [{"role": "user", "content": "b"}]}}),
              note(4, "ask", usage(2, 5, 2))]
    value: dict[str, Any] = {"steps": {"ask": {}, "loop": {}, "other": {}}}
    rolled = RollUp(own=step_tokens(events), children={"loop": Tokens(10, 4, 14)})
    add_llm(value, events, rolled)
    assert value["steps"]["ask"]["llm"] == {"model": "m", "attempt": 2, "cut": None,
                                            "messages": [{"role": "user", "content": "b"}]}
    assert value["steps"]["ask"]["usage"] == {"prompt_tokens": 10, "completion_tokens": 3,
                                              "total_tokens": 13}
    assert value["steps"]["loop"]["llm"] is None
    assert value["steps"]["loop"]["usage"]["total_tokens"] == 14
    assert value["steps"]["other"] == {"llm": None, "usage": None}
    assert (value["llm_tokens"], value["usage"]["prompt_tokens"]) == (27, 20)


def test_the_steps_that_start_child_runs_include_map_items_of_one() -> None:
    definition = {"steps": [
        {"id": "w", "type": "workflow", "workflow": "x"},
        {"id": "l", "type": "loop", "workflow": "x", "max_iterations": 4},
        {"id": "m", "type": "map", "over": [1, 2], "step": {"type": "workflow", "workflow": "x"}},
        {"id": "t", "type": "map", "over": [1], "step": {"type": "transform", "value": 1}}]}
    ids = ["w", "l", "m", "t", "m[0]", "m[1]", "t[0]"]
    assert parent_steps(definition, ids) == [("w", 1), ("l", 4), ("m[0]", 1), ("m[1]", 1)]
    assert parent_steps(None, ids) == []


def test_conversation_lines_show_roles_the_answer_and_its_json() -> None:
    request = {"attempt": 1, "model": "m", "cut": "the messages were big",
               "messages": [{"role": "system", "content": "one\ntwo"},
                            {"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
    lines = conversation_lines(request, {"content": '{"a": 1}', "json": {"a": 1}})
    assert lines == ["messages sent (attempt 1, model m)", "  system: one", "    two",
                     '  user: [{"type": "text", "text": "hi"}]',
                     "  (cut: the messages were big)", "answer", '  assistant: {"a": 1}',
                     "answer as JSON", "  {", '    "a": 1', "  }"]


async def test_a_workflow_steps_child_run_tokens_roll_up_to_the_parent() -> None:
    """A child run's usage notes count on the parent's `workflow` step and run."""
    child = Workflow.from_dict({"name": "kid", "steps": [
        {"id": "k", "type": "transform", "value": 1}]})
    parent = Workflow.from_dict({"name": "dad", "steps": [
        {"id": "w", "type": "workflow", "workflow": "kid"}]})
    async with connect("memory://") as held:
        await child.run_async({}, db=held)  # stores `kid`
        result = await parent.run_async({}, db=held)
        store = held.store
        kid = await store.get_run(child_run_id(result.run_id, "w", "0"))
        # as an llm step of the child would have noted
        await store.write(WriteBatch(run_id=kid.run_id, notes=[("k", usage(1, 3, 4))]))
        run = await store.get_run(result.run_id)
        definition = (await store.get_workflow(run.workflow, run.version)).definition
        rolled = await roll_up(store, run, await store.get_events(run.run_id), ["w"],
                               definition)
    assert rolled.children == {"w": Tokens(3, 4, 7)}
    assert rolled.total == Tokens(3, 4, 7) == rolled.of_step("w")


def test_tool_calls_are_shown_as_name_and_arguments() -> None:
    request = {"attempt": 1, "model": "m", "cut": None, "messages": [
        {"role": "user", "content": "add 1 and 2"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "3"}]}
    output = {"content": "", "json": None, "tool_calls": [
        {"id": "c2", "name": "report", "arguments": {"sum": 3}}]}

    lines = conversation_lines(request, output)

    assert lines == ["messages sent (attempt 1, model m)", "  user: add 1 and 2",
                     "  assistant:", '    calls add({"a": 1, "b": 2})', "  tool: 3",
                     "answer", "  assistant:", '    calls report({"sum": 3})']
