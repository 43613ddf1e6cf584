"""The CLI's renderers, in process: live progress, summaries, status lines, exit codes."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from plait.cli.output import plain_summary, status_line, step_note
from plait.cli.progress import ProgressModel, ProgressView
from plait.cli.settings import ExitCode, exit_code_for
from plait.cli.style import format_seconds
from plait.core.runstate import StepChange, StepRuntime
from plait.core.states import StepStatus as S
from plait.runtime.results import RunResult, StepResult
from plait.store.base import WriteBatch


def change(step: str, source: S, target: S, at: float, **row: object) -> StepChange:
    return StepChange(step, source, target, at, StepRuntime(target, **row))  # type: ignore[arg-type]


def render(view: ProgressView) -> str:
    out = io.StringIO()
    Console(file=out, force_terminal=True, width=120, color_system=None).print(view)
    return out.getvalue()


def test_progress_counts_running_retrying_and_failed_steps():
    model = ProgressModel(["a", "b", "c", "d", "e"])
    model.apply(WriteBatch(run_id="r", steps=[
        change("a", S.PENDING, S.QUEUED, 1.0),
        change("a", S.QUEUED, S.RUNNING, 1.0, attempts=1),
        change("a", S.RUNNING, S.COMPLETED, 2.0, attempts=1),
        change("b", S.QUEUED, S.RUNNING, 2.0, attempts=1),
        change("c", S.QUEUED, S.RUNNING, 2.0, attempts=1),
        change("c", S.RUNNING, S.QUEUED, 2.5, attempts=1, next_attempt_at=9e9),
        change("d", S.RUNNING, S.FAILED, 3.0, attempts=2, error="KeyError: 'x'\ntraceback"),
        change("e", S.PENDING, S.UPSTREAM_FAILED, 3.0),
    ]))
    snap = model.snapshot()
    assert (snap.total, snap.done, snap.completed, snap.failed, snap.not_run) == (5, 3, 1, 1, 1)
    assert [r.label for r in snap.running] == ["b"]
    assert [s for s, _, _ in snap.retrying] == ["c"]
    assert snap.failures == (("d", "KeyError: 'x'\ntraceback"),)
    text = render(ProgressView("flow v1", model))
    assert "3/5 steps done" in text
    assert "1 running" in text and "1 failed" in text and "1 not run" in text
    assert re.search(r"running\s+b\s", text)
    assert re.search(r"retrying\s+c\s+in .* after attempt 1", text)
    assert re.search(r"failed\s+d\s+KeyError: 'x'", text) and "traceback" not in text


def test_progress_lists_at_most_a_few_running_steps():
    ids = [f"s{i}" for i in range(50)]
    model = ProgressModel(ids)
    model.apply(WriteBatch(run_id="r", steps=[change(s, S.QUEUED, S.RUNNING, 1.0, attempts=1)
                                              for s in ids]))
    text = render(ProgressView("big", model))
    assert "50 running" in text and "and 42 more" in text


def result(status: str, error: str | None = None, **steps: StepResult) -> RunResult:
    return RunResult(run_id="r1", workflow="flow", version=2, fingerprint="f" * 12,
                     status=status, output={"x": 1} if status == "completed" else None,
                     error=error, started_at=10.0, finished_at=11.5, steps=dict(steps))


def step(status: str, **kw: object) -> StepResult:
    base: dict[str, object] = {"status": status, "attempts": 1, "output": None,
                               "error": None, "started_at": 10.0, "finished_at": 10.25,
                               "skip_reason": None, "fallback_used": False}
    base.update(kw)
    return StepResult(**base)  # type: ignore[arg-type]


def test_status_lines():
    assert status_line(result("completed")) == "run completed in 1.50s (workflow flow v2, run r1)"
    assert status_line(result("failed", "failed steps: a")).startswith(
        "run failed in 1.50s: failed steps: a")
    assert status_line(result("cancelled", "cancelled on request")).startswith(
        "run cancelled in 1.50s: cancelled on request")
    assert status_line(result("waiting")).startswith("run waiting in 1.50s for an approval")


def test_a_waiting_status_line_says_what_the_steps_wait_for():
    waiting = result("waiting", a=step("waiting"), b=step("waiting"), c=step("completed"))
    waiting.waits = {"a": {"kind": "event", "event": "paid"}}
    assert status_line(waiting).startswith("run waiting in 1.50s for an approval and an event")
    waiting.waits = {"a": {"kind": "event"}, "b": {"kind": "sleep"}}
    assert status_line(waiting).startswith("run waiting in 1.50s for an event and a sleep to end")
    only = result("waiting", a=step("waiting"), c=step("completed"))
    only.waits = {"a": {"kind": "child", "child_run_id": "x"}}
    assert " for a child run " in status_line(only)


def test_plain_summary_notes_and_truncation():
    res = result("completed", a=step("completed", attempts=3),
                 b=step("completed", fallback_used=True),
                 c=step("skipped", attempts=0, started_at=None, finished_at=None,
                        skip_reason="when was false: {{ x }}"),
                 d=step("failed", error="E: " + "x" * 500))
    res.output = {"big": "y" * 5000}
    text = plain_summary(res)
    lines = text.splitlines()
    assert lines[1].split() == ["a", "completed", "3", "0.250s"]
    assert lines[2].endswith("fallback used")
    assert lines[3].split()[:4] == ["c", "skipped", "0", "-"]
    assert lines[3].endswith("when was false: {{ x }}")
    assert len(step_note(res.steps["d"])) == 160
    assert lines[-1].startswith('output: {"big": "yyy') and lines[-1].endswith(
        "(truncated; use --json for all of it)")


@pytest.mark.parametrize(("status", "code"), [
    ("completed", ExitCode.OK), ("failed", ExitCode.FAILED), ("cancelled", ExitCode.FAILED),
    ("waiting", ExitCode.WAITING)])
def test_exit_codes(status, code):
    assert exit_code_for(status) == code


@pytest.mark.parametrize(("seconds", "text"), [
    (None, "-"), (0.0042, "0.004s"), (1.25, "1.25s"), (42.0, "42.0s"), (185, "3m05s"),
    (7380, "2h03m")])
def test_format_seconds(seconds, text):
    assert format_seconds(seconds) == text
