"""Parameter binding as compiled once per checked workflow: where each
parameter's value comes from, what wins when a name means two things, defaults,
``*args``/``**kwargs``, one function shared by many steps, ``ctx.outputs`` read from the
parents, and a step started by a finishing attempt being stored before it runs."""

from __future__ import annotations

import sys
import textwrap
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from plait import StepContext, Workflow
from plait.runtime.engine import Engine
from plait.store import MemoryStore, open_store

from .conftest import RunWf, run_with, statuses

# ---------------------------------------------------------------- what wins


async def test_a_step_id_wins_over_an_input_key_of_the_same_name(run_wf: RunWf) -> None:
    wf = Workflow("step-vs-input")
    wf.add_step("city", lambda: "from the step")
    wf.add_step("use", lambda city, input: {"city": city, "input_city": input["city"]})
    result = await run_wf(wf, {"city": "from the input"})
    assert result.steps["use"].output == {"city": "from the step",
                                          "input_city": "from the input"}


async def test_a_declared_output_key_wins_over_an_input_key(run_wf: RunWf) -> None:
    wf = Workflow("state-vs-input")
    wf.add_step("classify", lambda: {"intent": "refund"}, outputs=["intent"])
    wf.add_step("route", lambda intent: intent)
    result = await run_wf(wf, {"intent": "from the input"})
    assert result.steps["route"].output == "refund"


async def test_with_wins_over_a_step_id_and_is_not_a_dependency(run_wf: RunWf) -> None:
    def use(fetch: str) -> str:
        return fetch

    wf = Workflow("with-vs-step")
    wf.add_step("fetch", lambda: "the step's output")
    wf.add_step("use", use, with_={"fetch": "{{ input.x }}"})
    assert wf.validate().spec.steps[1].depends_on == ()
    result = await run_wf(wf, {"x": "given"})
    assert result.steps["use"].output == "given"


async def test_defaults_yield_to_a_step_a_state_key_and_an_input_key(run_wf: RunWf) -> None:
    def use(a: str = "default a", n: int = -1, limit: int = 10, other: str = "kept") -> Any:
        return [a, n, limit, other]

    wf = Workflow("defaults")
    wf.add_step("a", lambda: "step a")
    wf.add_step("count", lambda: {"n": 3}, outputs=["n"])
    wf.add_step("use", use)
    result = await run_wf(wf, {"limit": 2})
    assert result.steps["use"].output == ["step a", 3, 2, "kept"]
    # the same checked workflow, another input: the input key is looked up per run
    again = await run_wf(wf, {})
    assert again.steps["use"].output == ["step a", 3, 10, "kept"]


# ---------------------------------------------------------------- *args / **kwargs


async def test_var_positional_is_left_empty_and_var_keyword_takes_with(run_wf: RunWf) -> None:
    def use(first: str, *rest: object, **extra: object) -> Any:
        return {"first": first, "rest": list(rest), "extra": extra}

    wf = Workflow("varargs")
    wf.add_step("first", lambda: "one")
    wf.add_step("use", use, with_={"colour": "blue", "size": "{{ input.size }}"})
    result = await run_wf(wf, {"size": 3, "unasked": True})
    # nothing is guessed for **extra beyond `with`; *rest gets nothing
    assert result.steps["use"].output == {"first": "one", "rest": [],
                                          "extra": {"colour": "blue", "size": 3}}


async def test_a_with_key_the_function_does_not_take_fails_the_step(run_wf: RunWf) -> None:
    def use(a: int) -> int:
        return a

    wf = Workflow("not-taken")
    wf.add_step("use", use, with_={"a": 1, "b": 2})
    result = await run_wf(wf)
    assert statuses(result) == {"use": "failed"}
    assert result.steps["use"].attempts == 1  # not retried: a definition problem
    assert "takes no parameter 'b' (given in `with`)" in (result.steps["use"].error or "")


# ---------------------------------------------------------------- shared functions


def _shared(ctx: StepContext) -> dict[str, Any]:
    return {"me": ctx.step_id, "parents": dict(ctx.outputs)}


async def test_one_function_shared_by_many_steps_sees_each_steps_parents(
        run_wf: RunWf) -> None:
    wf = Workflow("shared")
    wf.add_step("a", lambda: 1)
    wf.add_step("b", lambda: 2)
    wf.add_step("x", _shared, depends_on=["a"])
    wf.add_step("y", _shared, depends_on=["a", "b"])
    wf.add_step("z", _shared, depends_on=["x", "y"])
    result = await run_wf(wf)
    assert result.steps["x"].output == {"me": "x", "parents": {"a": 1}}
    assert result.steps["y"].output == {"me": "y", "parents": {"a": 1, "b": 2}}
    assert result.steps["z"].output == {"me": "z", "parents": {
        "x": {"me": "x", "parents": {"a": 1}},
        "y": {"me": "y", "parents": {"a": 1, "b": 2}}}}


async def test_a_shared_named_parameter_is_a_parent_for_one_step_and_input_for_its_own(
        run_wf: RunWf) -> None:
    def echo(ticket: object) -> object:
        return {"ticket": ticket}

    wf = Workflow("shared-named")
    wf.add_step("ticket", echo)  # its own name: the input's key
    wf.add_step("copy", echo)  # the step `ticket`'s output
    result = await run_wf(wf, {"ticket": "T-1"})
    assert result.steps["ticket"].output == {"ticket": "T-1"}
    assert result.steps["copy"].output == {"ticket": {"ticket": "T-1"}}


# ---------------------------------------------------------------- ctx.outputs


async def test_ctx_outputs_reads_each_parent_none_for_one_that_did_not_complete(
        run_wf: RunWf) -> None:
    seen: dict[str, Any] = {}

    def boom() -> None:
        raise RuntimeError("no")

    def join(ctx: StepContext) -> str:
        outputs = ctx.outputs
        seen.update(outputs=dict(outputs), keys=sorted(outputs), length=len(outputs),
                    has_ok="ok" in outputs, has_other="nope" in outputs,
                    same=ctx.outputs is outputs, is_mapping=isinstance(outputs, Mapping))
        return "joined"

    wf = Workflow("outputs")
    wf.add_step("ok", lambda: {"v": [1, 2]})
    wf.add_step("bad", boom, allow_failure=True, retry={"max_retries": 0})
    wf.add_step("skipped", lambda: 1, when="{{ false }}")
    wf.add_step("join", join, depends_on=["ok", "bad", "skipped"], trigger="all_done")
    result = await run_wf(wf)
    assert statuses(result) == {"ok": "completed", "bad": "failed", "skipped": "skipped",
                                "join": "completed"}
    assert seen == {"outputs": {"ok": {"v": [1, 2]}, "bad": None, "skipped": None},
                    "keys": ["bad", "ok", "skipped"], "length": 3, "has_ok": True,
                    "has_other": False, "same": True, "is_mapping": True}


async def test_ctx_of_a_sync_step_in_a_thread_and_an_unread_ctx(run_wf: RunWf) -> None:
    def sync_join(ctx: StepContext) -> Any:  # runs in a worker thread
        return {"outputs": dict(ctx.outputs), "key": ctx.idempotency_key}

    async def ignores(ctx: StepContext) -> str:  # never reads outputs or logger
        return ctx.step_id

    wf = Workflow("ctx-thread")
    wf.add_step("a", lambda: "A")
    wf.add_step("b", sync_join, depends_on=["a"])
    wf.add_step("c", ignores, depends_on=["a", "b"])
    result = await run_wf(wf)
    assert result.steps["b"].output == {"outputs": {"a": "A"}, "key": f"{result.run_id}:b"}
    assert result.steps["c"].output == "c"


def test_a_step_context_built_by_hand_is_read_only_and_compares_by_value() -> None:
    """What a user's own unit test of a step function builds."""
    ctx = StepContext(run_id="r", step_id="s", attempt=1, input={"x": 1}, state={},
                      outputs={"a": 1})
    assert ctx.idempotency_key == "r:s"
    assert ctx.outputs == {"a": 1}
    assert not ctx.cancelled
    assert ctx == StepContext(run_id="r", step_id="s", attempt=1, input={"x": 1},
                              state={}, outputs={"a": 1})
    assert "step_id='s'" in repr(ctx)
    with pytest.raises(AttributeError):
        ctx.step_id = "other"  # type: ignore[misc]


# ---------------------------------------------------------------- definitions from files


@pytest.fixture
def steps_module(tmp_path: Path) -> Iterator[str]:
    name = f"binding_steps_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent('''
        CALLS = []

        def produce():
            return {"n": 2}

        def double(produce, factor=2):
            CALLS.append(factor)
            return produce["n"] * factor

        def needs_account(account_id):
            return account_id

        def positional(a, /):
            return a

        def recover(error, produce):
            return {"recovered": error.split(":")[0], "had": produce}

        def fails(produce):
            raise RuntimeError("it broke")
    '''))
    sys.path.insert(0, str(tmp_path))
    try:
        yield name
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(name, None)


def _file_workflow(module: str, *steps: dict[str, Any]) -> Workflow:
    return Workflow.from_dict({"name": "from-file", "steps": [
        {"id": "produce", "type": "python", "call": f"{module}:produce"}, *steps]})


async def test_a_call_step_binds_like_a_python_one_on_every_run(
        run_wf: RunWf, steps_module: str) -> None:
    wf = _file_workflow(steps_module, {"id": "double", "type": "python",
                                       "call": f"{steps_module}:double",
                                       "depends_on": ["produce"]})
    checked = wf.validate()
    engine = Engine(MemoryStore())
    try:
        first = await engine.run(checked, {})
        second = await engine.run(checked, {"factor": 5})
    finally:
        engine.close()
    assert first.steps["double"].output == 4
    assert second.steps["double"].output == 10
    assert sys.modules[steps_module].CALLS == [2, 5]


async def test_a_call_step_whose_parameter_nothing_supplies_fails_naming_it(
        run_wf: RunWf, steps_module: str) -> None:
    wf = _file_workflow(steps_module, {"id": "lookup", "type": "python",
                                       "call": f"{steps_module}:needs_account"})
    result = await run_wf(wf, {"other": 1})
    assert statuses(result) == {"produce": "completed", "lookup": "failed"}
    error = result.steps["lookup"].error or ""
    assert "parameter 'account_id' of needs_account is not 'input', 'ctx', a step id" \
        in error
    assert result.steps["lookup"].attempts == 1


async def test_a_positional_only_parameter_fails_the_step_naming_it(
        run_wf: RunWf, steps_module: str) -> None:
    wf = _file_workflow(steps_module, {"id": "pos", "type": "python",
                                       "call": f"{steps_module}:positional",
                                       "retry": {"max_retries": 0}})
    result = await run_wf(wf, {"a": 1})
    assert result.steps["pos"].status == "failed"
    assert "positional-only parameter 'a' cannot be bound by name" in (
        result.steps["pos"].error or "")


async def test_a_fallback_gets_the_error_and_parent_outputs(
        run_wf: RunWf, steps_module: str) -> None:
    wf = _file_workflow(steps_module, {
        "id": "fails", "type": "python", "call": f"{steps_module}:fails",
        "depends_on": ["produce"], "retry": {"max_retries": 0},
        "fallback": {"call": f"{steps_module}:recover"}})
    result = await run_wf(wf)
    assert result.steps["fails"].status == "completed"
    assert result.steps["fails"].output == {"recovered": "RuntimeError",
                                            "had": {"n": 2}}


# ---------------------------------------------------------------- started when stored


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_a_step_started_by_its_parent_is_stored_running_before_it_runs(
        tmp_path: Path, backend: str) -> None:
    """Each step of a chain starts from its parent's completion (on the memory store,
    in the parent's own task): the store holds it running, its attempt counted, and
    its parent completed with its output, before its function is called."""
    url = f"sqlite:///{tmp_path / 'runs.db'}" if backend == "sqlite" \
        else f"memory://binding-{uuid.uuid4().hex}"
    store = open_store(url)
    await store.open()
    seen: list[tuple[str, str, int, str, object]] = []

    def step(name: str, parent: str | None) -> Any:
        async def body(ctx: StepContext) -> dict[str, str]:
            rows = {r.step_id: r for r in await store.get_steps(ctx.run_id)}
            me = rows[name]
            above = rows[parent] if parent else None
            seen.append((name, str(me.status), me.attempts,
                         str(above.status) if above else "-",
                         above.output if above else None))
            return {"done": name}
        return body

    wf = Workflow("stored-first")
    previous: str | None = None
    for name in ("s0", "s1", "s2", "s3"):
        wf.add_step(name, step(name, previous), depends_on=[previous] if previous else [])
        previous = name
    engine = Engine(store)
    try:
        result = await run_with(engine, wf)
    finally:
        engine.close()
        await store.close()
    assert result.status == "completed"
    assert seen == [("s0", "running", 1, "-", None),
                    ("s1", "running", 1, "completed", {"done": "s0"}),
                    ("s2", "running", 1, "completed", {"done": "s1"}),
                    ("s3", "running", 1, "completed", {"done": "s2"})]
