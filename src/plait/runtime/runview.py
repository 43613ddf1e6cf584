"""``RunView``: what a step attempt reads of its run (``steps.registry.RunAccess``).

Read straight from the run loop's live RunState, on the event loop, when the attempt
asks: a context, a parent's output or a parameter's value costs nothing until then.
One per run, shared by every attempt's ``StepCall``.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..core.model import JSON
from ..core.runstate import RunState
from ..core.states import StepStatus
from ..core.validate import CheckedWorkflow
from ..steps.context import ParentOutputs, StepLog
from ..steps.registry import Services, StepCall

_COMPLETED = StepStatus.COMPLETED


class RunView:
    """One run's ``RunAccess`` (see the module docstring)."""

    __slots__ = ("_declared", "_parent_index", "_rows", "_state", "checked", "input",
                 "run_id", "services", "shared_state", "step_log")

    def __init__(self, checked: CheckedWorkflow, state: RunState, run_id: str,
                 services: Services, step_log: StepLog, declared: frozenset[str],
                 parent_index: list[dict[str, int] | None]) -> None:
        self.run_id = run_id
        self.checked = checked
        self.input = state.input
        self.shared_state: Mapping[str, JSON] = state.state
        self.services = services
        self.step_log = step_log  # ctx.logger's records, stored with the loop's next batch
        self._state = state
        self._rows = state.rows
        self._declared = declared  # the shared state's keys
        # per step, its parents' ids -> their indices (``ctx.outputs``), each made on
        # first use and kept for every later run of the checked workflow
        self._parent_index = parent_index

    def template_context(self, index: int) -> dict[str, object]:
        return self._state.context(index)

    def parent_outputs(self, index: int) -> ParentOutputs:
        names = self._parent_index[index] if index < len(self._parent_index) else None
        if names is None:
            ids = self.checked.graph.ids
            names = {ids[p]: p for p in
                     self.checked.graph.parents[self._state.graph_index(index)]}
            if index < len(self._parent_index):
                self._parent_index[index] = names
        return ParentOutputs(names, self.step_output)

    def step_output(self, index: int) -> JSON:
        """A step's output; None unless it completed."""
        row = self._rows[index]
        return row.output if row.status is _COMPLETED else None

    def step_error(self, index: int) -> str | None:
        """The error a step's last attempt failed with (what its fallback is given)."""
        return self._rows[index].error

    def resolve(self, call: StepCall, name: str) -> tuple[bool, object]:
        state = self._state
        if name == "input":
            return True, state.input
        if name == "ctx":
            return True, call.context()
        if name in self.checked.graph.index and name != call.step.id:
            return True, state.steps_view[name]["output"]
        if name in self._declared:
            return True, state.state.get(name)
        if isinstance(state.input, dict) and name in state.input:
            return True, state.input[name]
        return False, None
