"""How a run ends: its final status, error and output (SPEC 1.1 ``output``).

Decided once the core says the run is done (``RunState.done``), or at once when the
run's own task is cancelled (Ctrl-C), whatever ran its attempts.
"""

from __future__ import annotations

from collections.abc import Callable

from ..core import expressions
from ..core.jsoncheck import ensure_json
from ..core.model import JSON
from ..core.runstate import RunState
from ..core.states import RunStatus, StepStatus
from ..core.validate import CheckedWorkflow
from ..errors import OutputError
from ..steps import offloop
from ..steps.secrets import Secrets
from ..store.base import RunChange, RunRecord


async def final_change(checked: CheckedWorkflow, state: RunState, run: RunRecord, *,
                       cancel_reason: str | None, secrets: Secrets,
                       clock: Callable[[], float],
                       refused: Exception | None = None) -> RunChange:
    """The run's move to its final status, with its output or error.  ``refused``:
    the rules of the engine refuse the definition (every step failed for it; steps
    allowed to fail do not make it complete, and its output is never rendered)."""
    status = state.run_status()
    output: JSON = None
    error: str | None = None
    if refused is not None and status is RunStatus.COMPLETED:
        status, error = RunStatus.FAILED, str(refused)
    if status is RunStatus.COMPLETED:
        template = checked.spec.output
        try:
            if template is not None and not expressions.is_cheap(template):
                output = await _rendered_output(checked, state, template)
            else:
                output = run_output(checked, state)
        except (expressions.RenderError, OutputError) as exc:
            status, error = RunStatus.FAILED, f"run output: {exc}"
    if status is RunStatus.FAILED and error is None:
        error = state.failure_reason or _failed_steps(checked, state)
    elif status is RunStatus.CANCELLED:
        error = cancel_reason or "cancelled"
    return RunChange(source=run.status, target=status, at=clock(),
                     output=secrets.redact(output), error=error)


def run_output(checked: CheckedWorkflow, state: RunState) -> JSON:
    """The run's output (its ``output`` template, else the sinks' outputs), within
    ``limits.max_output_bytes`` like any step's, when its templates are cheap."""
    template = checked.spec.output
    value = state.default_output() if template is None \
        else expressions.render_value(template, state.context())
    return ensure_json(value, max_bytes=checked.spec.limits.max_output_bytes)


async def _rendered_output(checked: CheckedWorkflow, state: RunState,
                           template: JSON) -> JSON:
    """``run_output`` for a template that is not cheap: it renders in a worker thread,
    so other runs of this process go on meanwhile."""
    stop = expressions.Stop()
    value = await offloop.in_thread(stop, expressions.render_value, template,
                                    state.context(), stop=stop)
    return ensure_json(value, max_bytes=checked.spec.limits.max_output_bytes)


def _failed_steps(checked: CheckedWorkflow, state: RunState) -> str:
    failed = [s.id for s, r in zip(state.steps, state.rows, strict=True)
              if r.status is StepStatus.FAILED and not s.allow_failure]
    return "failed steps: " + ", ".join(failed)


def cancel_everything(state: RunState, reason: str, now: float) -> None:
    """The run stops where it is: every step that has not ended is cancelled."""
    state.halt(reason, cancelled=True)
    for i in list(state.running):
        state.cancel_step(i, now, reason)
    state.cancel_unstarted(now, reason)
