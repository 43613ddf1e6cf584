"""Child workflows given to ``wf.loop`` / ``wf.subworkflow`` as ``Workflow`` objects
are validated with their parent: ``wf.validate()`` and the first ``wf.run()`` list the
child's problems at the parent's step before any step runs."""

from __future__ import annotations

import pytest

from plait import DefinitionError, Workflow

CALLS: list[str] = []


def paid_call(input: dict[str, object]) -> str:
    CALLS.append("paid")
    return "draft"


def review(call: str) -> dict[str, bool]:
    return {"approved": True}


def _parent(child: Workflow, *, loop: bool = True) -> Workflow:
    wf = Workflow("writer", pools={"llm": {"concurrency": 2}})
    for i in range(3):
        wf.add_step(f"paid_{i}", paid_call, pool="llm")
    if loop:
        wf.loop("revise", workflow=child, until="{{ loop.output.review.approved }}",
                max_iterations=3, depends_on=["paid_0", "paid_1", "paid_2"])
    else:
        wf.subworkflow("revise", workflow=child, depends_on=["paid_0"])
    return wf


def _problems(wf: Workflow) -> list[str]:
    with pytest.raises(DefinitionError) as caught:
        wf.validate()
    return [str(p) for p in caught.value.problems]


def test_a_child_using_a_pool_only_its_parent_declares_fails_before_any_step_runs() -> None:
    child = Workflow("critic")  # the pool is declared in the parent only
    child.add_step("call", paid_call, pool="llm")
    child.add_step("review", review)
    wf = _parent(child)
    assert _problems(wf) == ["steps[3].workflow: steps[0].pool: unknown pool 'llm' "
                             "(declare it under `pools:`)"]
    CALLS.clear()
    with pytest.raises(DefinitionError, match=r"steps\[3\]\.workflow: steps\[0\]\.pool"):
        wf.run({}, db="memory://")
    assert CALLS == []  # not one paid call


def test_a_bad_child_template_is_located_under_the_parent_step() -> None:
    child = Workflow("critic")
    child.add_step("review", review)
    child.add_step("summary", type="transform", value="{{ steps.reviw.output }}",
                   depends_on=["review"])
    problems = _problems(_parent(child, loop=False))
    assert len(problems) == 1
    assert problems[0].startswith("steps[3].workflow: steps[1].value: ")
    assert "'reviw'" in problems[0] and "did you mean 'review'" in problems[0]


def test_a_grandchild_is_validated_too_and_a_change_is_seen_by_the_parent() -> None:
    grandchild = Workflow("inner", pools={"gpu": {"concurrency": 1}})
    grandchild.add_step("call", paid_call, pool="gpu")
    child = Workflow("middle")
    child.subworkflow("inner", workflow=grandchild)
    wf = _parent(child, loop=False)
    assert wf.validate() is wf.validate()  # checked once while nothing changes
    grandchild.add_step("more", paid_call, pool="tpu")  # changed after being handed over
    assert _problems(wf) == [
        "steps[3].workflow: steps[0].workflow: steps[1].pool: unknown pool 'tpu' "
        "(did you mean 'gpu'?)"]


def test_a_valid_child_given_as_a_workflow_runs() -> None:
    child = Workflow("critic", pools={"llm": {"concurrency": 1}})
    child.add_step("call", paid_call, pool="llm")
    child.add_step("review", review)
    result = _parent(child).run({})
    assert result.status == "completed", result.error
    assert result.steps["revise"].output == {"iterations": 1,
                                             "output": {"review": {"approved": True}}}


def test_a_workflow_is_refused_as_its_own_child_even_through_another() -> None:
    wf = Workflow("selfish")
    with pytest.raises(DefinitionError, match="cannot run itself as a child"):
        wf.subworkflow("me", workflow=wf)
    other = Workflow("other")
    wf.subworkflow("other", workflow=other)
    other.subworkflow("back", workflow=wf)
    assert any("includes itself" in p for p in _problems(wf))
