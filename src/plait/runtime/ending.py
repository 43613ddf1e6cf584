"""The end of a run: its output, rendered, and its move to the final status.

The core says how the run ends (``RunState.finish``: the status and why) once it is
done, or at once when the run's own task is cancelled (Ctrl-C); what is left here is
rendering the run's ``output`` (its template, else the sinks' outputs), off the event
loop when its templates are not cheap, and redacting it.
"""

from __future__ import annotations

from collections.abc import Callable

from ..core import expressions
from ..core.jsoncheck import ensure_json
from ..core.model import JSON
from ..core.runstate import RunState
from ..core.states import RunStatus
from ..core.validate import CheckedWorkflow
from ..errors import OutputError
from ..steps import offloop
from ..steps.secrets import Secrets
from ..store.base import RunChange, RunRecord


async def final_change(checked: CheckedWorkflow, state: RunState, run: RunRecord, *,
                       secrets: Secrets, clock: Callable[[], float],
                       refused: Exception | None = None) -> RunChange:
    """The run's move to its final status, with its output or error.  ``refused``:
    the rules of the engine refuse the definition."""
    end = state.finish(refused=None if refused is None else str(refused))
    output: JSON = None
    if end.status is RunStatus.COMPLETED:
        template = checked.spec.output
        try:
            if template is not None and not expressions.is_cheap(template):
                output = await _rendered_output(checked, state, template)
            else:
                output = run_output(checked, state)
        except (expressions.RenderError, OutputError) as exc:
            end = state.finish(output_error=str(exc))
    return RunChange(source=run.status, target=end.status, at=clock(),
                     output=secrets.redact(output), error=end.error)


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
