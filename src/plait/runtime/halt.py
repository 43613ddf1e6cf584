"""``Halt``: cancelling what is out when a run halts (a failure under fail-fast, a
cancel request, the run's own timeout).

The core decides that the run halts and why (``RunState.stop_reason``), and starts
nothing new from then on; it asks for this with a ``CancelRunning`` effect.  What is
out is the runtime's: attempts, through the work source, and ``when`` renders.
"""

from __future__ import annotations

from collections.abc import Callable

from .when import WhenJudge


class Halt:
    """Cancels one run's attempts and renders that are out (see the module docstring)."""

    __slots__ = ("_cancel", "_out", "_whens")

    def __init__(self, out: dict[int, object], whens: WhenJudge,
                 cancel: Callable[[object], None]) -> None:
        self._out = out  # the loop's attempts out: step -> the work source's handle
        self._whens = whens
        self._cancel = cancel  # WorkSource.cancel

    def cancel_running(self) -> None:
        """Cancel every attempt out (each reports ``cancelled``) and every render."""
        cancel = self._cancel
        for handle in self._out.values():
            cancel(handle)
        self._whens.cancel()
