"""``when`` conditions the core could not judge on the event loop (templates that are
not cheap: a render never stalls the run, docs/expressions.md).

Each renders in a worker thread, in a task the run owns like an attempt's; its value
comes back to the loop, which gives it to the core (``RunState.settle_when``) in its
next turn.  Judging a ``when`` is the loop's own work, whatever runs the attempts.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import cast

from ..core import expressions
from ..core.model import JSON
from ..core.runstate import RunState
from ..core.validate import CheckedWorkflow
from ..steps import offloop
from .worksource import Spawn


class WhenJudge:
    """The run's ``when``s rendering off the loop, and the values back from them."""

    __slots__ = ("_checked", "_state", "judged", "judging")

    def __init__(self, checked: CheckedWorkflow, state: RunState) -> None:
        self._checked = checked
        self._state = state
        self.judging: dict[int, asyncio.Task[None]] = {}  # step -> its render's task
        self.judged: list[tuple[int, JSON | expressions.RenderError]] = []  # back, unsettled

    def render(self, spawn: Spawn, signal: Callable[[], None]) -> None:
        """Start rendering every ``when`` the core asked for (``RunState.when_due``);
        ``signal`` wakes the loop when one is back (or cancelled)."""
        state = self._state
        due, state.when_due = state.when_due, []
        for i in due:
            names = offloop.snapshot(state.context(i))
            self.judging[i] = spawn(self._render(i, names, signal))

    async def _render(self, i: int, names: dict[str, object],
                      signal: Callable[[], None]) -> None:
        text, stop = self._checked.spec.steps[i].when or "", expressions.Stop()
        value: JSON | expressions.RenderError
        try:
            value = cast(JSON, await offloop.in_thread(stop, expressions.render, text, names,
                                                       stop=stop))
        except asyncio.CancelledError:
            self.judging.pop(i, None)
            signal()
            raise
        except expressions.RenderError as exc:
            value = exc
        self.judged.append((i, value))
        signal()

    def settle(self, now: float) -> None:
        """Give the core every value that came back since the last call."""
        judged = self.judged[:]
        self.judged.clear()  # the same list: the loop holds it
        for i, value in judged:
            self.judging.pop(i, None)
            self._state.settle_when(i, value, now)

    def cancel(self) -> None:
        for i, task in list(self.judging.items()):
            task.cancel()
            body = task.get_coro()
            if inspect.iscoroutine(body) \
                    and inspect.getcoroutinestate(body) == inspect.CORO_CREATED:
                # cancelled before its first step, its body never runs to say so
                del self.judging[i]
