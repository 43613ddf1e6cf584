"""The counting of live progress (``cli.progress.ProgressModel``) over a run that grows:
a map stores its items, a ``workflow`` step runs a child run, a ``loop`` step runs one
child run per iteration, and a child run has a child of its own."""

from __future__ import annotations

import dataclasses

from plait.cli.progress import ProgressModel, Snapshot
from plait.core.child_ids import child_run_id
from plait.core.runstate import StepChange, StepRuntime
from plait.core.states import RunStatus
from plait.core.states import StepStatus as S
from plait.definitions import check_definition
from plait.store.base import RunRecord, WriteBatch

TOP = "top-run"
FLOW = ["topics", "research", "sub", "again", "end"]


def change(step: str, source: S, target: S, at: float = 1.0, **row: object) -> StepChange:
    return StepChange(step, source, target, at, StepRuntime(target, **row))  # type: ignore[arg-type]


def run_of(run_id: str, parent: str | None) -> RunRecord:
    return RunRecord(run_id=run_id, workflow="w", version=1, fingerprint="f" * 12,
                     status=RunStatus.PENDING, input={}, created_at=0.0,
                     parent_run_id=parent)


def started(step: str) -> list[StepChange]:
    return [change(step, S.PENDING, S.QUEUED), change(step, S.QUEUED, S.RUNNING, attempts=1)]


def ended(step: str, target: S = S.COMPLETED) -> list[StepChange]:
    return [change(step, S.RUNNING, target, attempts=1)]


CHILD = check_definition({"name": "child", "steps": [
    {"id": "a", "type": "transform", "value": 1},
    {"id": "inner", "type": "workflow", "workflow": "leaf", "depends_on": ["a"]}]})
LEAF = check_definition({"name": "leaf", "steps": [{"id": "x", "type": "transform",
                                                    "value": 1}]})


class Recorder:
    """Applies batches and checks after each one that nothing counts past the total."""

    def __init__(self) -> None:
        self.model = ProgressModel(FLOW, TOP)

    def batch(self, run_id: str, *changes: list[StepChange],
              new: tuple[str, ...] = ()) -> Snapshot:
        self.model.apply(WriteBatch(run_id=run_id, steps=[c for cs in changes for c in cs],
                                    new_steps=[(s, 9 + k) for k, s in enumerate(new)]))
        snap = self.model.snapshot()
        assert 0 <= snap.done <= snap.total
        assert snap.completed + snap.failed + snap.skipped + snap.not_run == snap.done
        return snap


def test_a_map_grows_the_total_and_its_items_count_once_each():
    rec = Recorder()
    assert rec.model.snapshot().total == 5
    rec.batch(TOP, started("topics"), ended("topics"), started("research"))
    items = tuple(f"research[{i}]" for i in range(3))
    snap = rec.batch(TOP, [change("research", S.RUNNING, S.WAITING, attempts=1)],
                     *(started(i) for i in items), new=items)
    assert (snap.total, snap.done, snap.running_count) == (8, 1, 3)
    snap = rec.batch(TOP, *(ended(i) for i in items),
                     [change("research", S.WAITING, S.COMPLETED, attempts=1)])
    assert (snap.total, snap.done, snap.completed) == (8, 5, 5)
    snap = rec.batch(TOP, ended("research"))  # a repeated end is not counted twice
    assert snap.done == 5


def test_child_runs_are_shown_under_the_step_that_started_them():
    rec = Recorder()
    rec.batch(TOP, started("sub"), started("again"))
    child = child_run_id(TOP, "sub", "0")
    rec.model.watch(run_of(child, TOP), CHILD)
    snap = rec.batch(child, started("a"), ended("a"), started("inner"))
    grandchild = child_run_id(child, "inner", "0")
    rec.model.watch(run_of(grandchild, child), LEAF)
    snap = rec.batch(grandchild, started("x"))
    assert (snap.total, snap.done, snap.running_count) == (5, 0, 2)
    lines = [(r.label, r.depth, r.note) for r in snap.running]
    assert lines[:3] == [("sub", 0, "2 child runs: 1/3 steps done"),
                         ("sub > inner", 1, ""), ("sub > inner > x", 1, "")]
    for iteration in range(3):  # a loop: one child run per iteration
        looped = child_run_id(TOP, "again", str(iteration))
        rec.model.watch(run_of(looped, TOP), LEAF)
        rec.batch(looped, started("x"), ended("x"))
    snap = rec.batch(grandchild, ended("x"))
    assert [(r.label, r.note) for r in snap.running if r.depth == 0] == [
        ("sub", "2 child runs: 2/3 steps done"), ("again", "3 child runs: 3/3 steps done")]
    snap = rec.batch(TOP, ended("sub"), ended("again"), started("end"), ended("end"))
    assert (snap.total, snap.done, snap.running) == (5, 3, ())


def test_runs_that_are_not_children_of_the_run_are_not_counted():
    rec = Recorder()
    rec.batch(TOP, started("sub"))
    stranger = run_of("someone-else", "another-parent")
    rec.model.watch(stranger, LEAF)
    rec.model.watch(dataclasses.replace(stranger, parent_run_id=TOP), LEAF)  # no step's
    snap = rec.batch("someone-else", started("x"), ended("x"))
    assert (snap.total, snap.done) == (5, 0)
    assert [r.label for r in snap.running] == ["sub"]


def test_a_running_steps_latest_partial_output_is_shown_until_it_ends():
    from plait.cli.progress import EMIT_WIDTH, ProgressView

    rec = Recorder()
    rec.batch(TOP, started("topics"))

    def emit(value: object, run_id: str = TOP) -> Snapshot:
        rec.model.apply(WriteBatch(run_id=run_id, notes=[
            ("topics", {"emit": {"value": value, "attempt": 1, "at": 1.0}})]))
        return rec.model.snapshot()

    assert emit({"content": "Hello", "call": None}).running[0].emitted == "Hello"
    snap = emit({"content": "Hello, world\nline two\nthree\nfour " + "x" * 200})
    lines = snap.running[0].emitted.splitlines()
    assert lines[:2] == ["line two", "three"]  # the last lines, the longest cut
    assert lines[2].startswith("…") and len(lines[2]) == EMIT_WIDTH
    assert emit({"done": 1}).running[0].emitted == '{"done":1}'  # ctx.emit values too
    assert emit("other run", run_id="another").running[0].emitted == '{"done":1}'
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(ProgressView("run", rec.model))
    assert '{"done":1}' in console.export_text()
    snap = rec.batch(TOP, ended("topics"))
    assert snap.running == ()
    rec.batch(TOP, [change("topics", S.COMPLETED, S.RUNNING, attempts=2)])
    assert rec.model.snapshot().running[0].emitted == ""  # a new attempt starts bare
