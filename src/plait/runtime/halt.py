"""``Halt``: a run that stops, after a failure under fail-fast, on a cancel request, or
when the run's own timeout passes.

RunState starts nothing new once it is halting; what is out (attempts, through the
work source, and ``when`` renders) is cancelled here.  The first reason given is the
one the run ends with.
"""

from __future__ import annotations

from collections.abc import Callable

from ..core.runstate import RunState
from .when import WhenJudge


class Halt:
    """One run's halt (see the module docstring)."""

    __slots__ = ("_cancel", "_out", "_state", "_whens", "reason")

    def __init__(self, state: RunState, out: dict[int, object], whens: WhenJudge,
                 cancel: Callable[[object], None]) -> None:
        self._state = state
        self._out = out  # the loop's attempts out: step -> the work source's handle
        self._whens = whens
        self._cancel = cancel  # WorkSource.cancel
        self.reason: str | None = None  # why what was out was cancelled (the first reason)

    def stop(self, reason: str, *, cancelled: bool) -> None:
        self._state.halt(reason, cancelled=cancelled)
        self.reason = reason
        self._cancel_all(reason)

    def cancel_running(self, reason: str) -> None:
        """The run halted (a step failed under fail-fast): cancel what is out."""
        if self._out or self._whens.judging:
            self._cancel_all(reason)

    def why(self) -> str:
        return self.reason or self._state.failure_reason or "run stopped"

    def _cancel_all(self, reason: str) -> None:
        self.reason = self.reason or reason
        cancel = self._cancel
        for handle in self._out.values():
            cancel(handle)
        self._whens.cancel()
