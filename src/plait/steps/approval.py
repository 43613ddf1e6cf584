"""The ``approval`` step: the run waits for a person (docs/waiting.md).

The run loop parks an approval step in ``waiting`` (no task, no concurrency slot).  A
decision (``plait approve RUN STEP [--reject] [--data JSON]``, the API or the UI) is
stored as a note in the run's history: who, when, approved or rejected, and optional
data.  Approved: the step completes with ``{"approved": true, "by", "at", "data"}``.
Rejected: the step fails (never retried) and its dependants are upstream_failed.

``prompt`` (a template yielding text) says what to decide; ``show`` (any JSON with
templates, rendered like a transform's ``value``) is the content under review.  Both are
rendered once, when the step starts waiting, and stored with it
(``runtime.approvals``), so ``plait show``, the API, the UI and the
``approval_waiting`` notification all show the same text.

``timeout`` (the step's usual field) bounds the wait, counted from when the step started
waiting; then ``on_timeout`` decides: ``reject`` (default) or ``approve``.  The deadline
is applied by whichever process holds the run: at once while the run executes, or when
it is next resumed or approved.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..core.model import JSON
from ..errors import FatalError
from .registry import StepCall, StepType, register_step_type

ON_TIMEOUT = ("reject", "approve")


async def run_approval(call: StepCall) -> JSON:
    raise FatalError(f"step {call.step.id!r}: approval steps are parked by the run loop, "
                     f"not run", step=call.step.id)


def _check(config: Mapping[str, JSON]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    prompt = config.get("prompt")
    if prompt is not None and not isinstance(prompt, str):
        out.append((".prompt", "expected text"))
    choice = config.get("on_timeout")
    if choice is not None and choice not in ON_TIMEOUT:
        out.append((".on_timeout", f"expected 'reject' or 'approve', got {choice!r}"))
    return out


def register_approval() -> None:
    register_step_type(StepType(name="approval", run=run_approval,
                                fields=frozenset({"prompt", "show", "on_timeout"}), check=_check,
                                literal_fields=frozenset({"on_timeout"}), parks=True,
                                only_waits=True))
