"""``defaults:`` keyed by step type, and ``x-`` extension keys."""

from __future__ import annotations

from typing import Any

from plait import Workflow

from .helpers import find, load, problems_of, t, wf

LLM = {"base_url": "https://api.example.com/v1", "model": "m-1",
       "api_key_env": "EXAMPLE_KEY"}


def llm(id: str, **fields: Any) -> dict[str, Any]:
    return {"id": id, "type": "llm", "prompt": f"say {id}", **fields}


def test_defaults_by_type_reach_every_step_of_that_type_and_the_step_wins() -> None:
    checked = load(wf(llm("a"), llm("b", model="m-2"), t("c"),
                      defaults={"llm": LLM, "timeout": "5m"}))
    a, b, c = checked.spec.steps
    assert a.config == {"prompt": "say a", **LLM}
    assert b.config["model"] == "m-2" and b.config["base_url"] == LLM["base_url"]
    assert c.config == {"value": 1}  # another type takes none of them
    assert (a.timeout, c.timeout) == (300.0, 300.0)


def test_a_types_common_fields_win_over_the_defaults_for_every_step() -> None:
    checked = load(wf(llm("a"), t("b"), llm("c", retry={"max_retries": 0}), defaults={
        "retry": {"max_retries": 1, "initial_delay": "2s"}, "timeout": "5m",
        "llm": {**LLM, "timeout": "30s", "retry": {"max_retries": 5}}}))
    a, b, c = checked.spec.steps
    assert (a.timeout, a.retry.max_retries, a.retry.initial_delay) == (30.0, 5, 2.0)
    assert (b.timeout, b.retry.max_retries) == (300.0, 1)
    assert (c.retry.max_retries, c.retry.initial_delay) == (0, 2.0)


def test_headers_merge_by_name_ignoring_case_other_mappings_are_replaced() -> None:
    http = {"type": "http", "url": "https://example.com"}
    checked = load(wf(
        {"id": "a", **http},
        {"id": "b", **http, "headers": {"authorization": "Bearer b", "X-Trace": "1"},
         "params": {"q": "b"}},
        defaults={"http": {"headers": {"Authorization": "Bearer d", "Accept": "x/y"},
                           "params": {"page": "1"}}}))
    a, b = checked.spec.steps
    assert a.config["headers"] == {"Authorization": "Bearer d", "Accept": "x/y"}
    assert b.config["headers"] == {"Accept": "x/y", "authorization": "Bearer b",
                                   "X-Trace": "1"}
    assert b.config["params"] == {"q": "b"}


def test_a_maps_inline_step_takes_the_defaults_of_its_type() -> None:
    checked = load(wf({"id": "m", "type": "map", "over": [1, 2],
                       "step": {"type": "llm", "prompt": "{{ item }}"}},
                      defaults={"llm": LLM}))
    item = checked.spec.steps[0].item
    assert item is not None and item.config == {"prompt": "{{ item }}", **LLM}


def test_a_stored_map_loads_again_with_the_defaults_its_items_took() -> None:
    # what is stored is the canonical form, which has no `defaults:` left: a resumed
    # run loads it, and its map items must still get the defaults they ran with
    checked = load(wf({"id": "m", "type": "map", "over": [1, 2],
                       "step": {"type": "llm", "prompt": "{{ item }}", "timeout": "9s"}},
                      defaults={"llm": LLM, "timeout": "5m", "trigger": "all_done"}))
    again = load(checked.definition)
    item = again.spec.steps[0].item
    assert item is not None and item.config == {"prompt": "{{ item }}", **LLM}
    assert item.timeout == 9.0
    assert again.fingerprint == checked.fingerprint


def test_unknown_fields_and_types_under_defaults_are_located_with_a_suggestion() -> None:
    found = problems_of(wf(llm("a", **LLM), defaults={
        "llm": {"modle": "m", "api_key_env": "bad name"}, "lmm": {}, "htp": 3}))
    assert find(found, "defaults.llm.modle").hint == "did you mean 'model'?"
    assert "environment variable" in find(found, "defaults.llm.api_key_env").message
    assert find(found, "defaults.lmm").hint == "did you mean 'llm'?"
    assert find(found, "defaults.htp").hint == "did you mean 'http'?"
    assert not [p for p in found if p.location.startswith("steps")]  # reported once


def test_a_required_field_may_come_from_the_defaults_only() -> None:
    problems = problems_of(wf(llm("a"), defaults={"llm": {"model": "m"}}))
    missing = find(problems, "steps[0].base_url")
    assert missing.message.startswith("missing field 'base_url'")
    assert missing.hint == "set it in the step, or for every llm step under defaults.llm"


def test_defaults_of_a_type_must_be_a_mapping() -> None:
    problem = find(problems_of(wf(llm("a", **LLM), defaults={"llm": "m"})), "defaults.llm")
    assert problem.message == "expected a mapping of fields of llm steps, got str"


def test_x_keys_are_ignored_and_leave_the_fingerprint_unchanged() -> None:
    plain = load(wf(llm("a", **LLM)))
    marked = load(wf(llm("a", **LLM, **{"x-note": "mine"}), defaults={"x-team": 1},
                     **{"x-llm": LLM, "x-owner": {"team": "ml"}}))
    assert marked.definition == plain.definition
    assert marked.fingerprint == plain.fingerprint


def test_defaults_by_type_yield_the_same_canonical_form_as_repeating_them() -> None:
    repeated = load(wf(llm("a", **LLM), llm("b", **LLM)))
    once = load(wf(llm("a"), llm("b"), defaults={"llm": LLM}))
    assert once.fingerprint == repeated.fingerprint


ANCHORED = """\
name: anchored
x-llm: &llm
  type: llm
  base_url: https://api.example.com/v1
  model: m-1
  api_key_env: EXAMPLE_KEY
steps:
  - <<: *llm
    id: first
    prompt: one
  - <<: *llm
    id: second
    model: m-2
    prompt: two
"""


def test_anchors_in_an_x_key_merged_into_steps() -> None:
    steps = Workflow.from_yaml(ANCHORED).spec.steps
    assert [s.id for s in steps] == ["first", "second"]
    assert [s.config["model"] for s in steps] == ["m-1", "m-2"]
