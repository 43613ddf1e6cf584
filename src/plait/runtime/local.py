"""``LocalSource``: a run's attempts run in this process, as tasks of its TaskGroup.

The ``WorkSource`` of a run on one machine (memory and SQLite stores), and what every
run did before the seam existed: ``start`` spawns the attempt's task, whose body is
``AttemptRunner.run`` (breaker, timeout, threads, cancellation) and ends by reporting
the attempt's outcome to the loop; ``cancel`` cancels that task.

A task cancelled before its first step never runs its body (asyncio throws the
cancellation in at the start), so the runner cannot report for it: ``cancel`` does, on
the next turn of the event loop, or the loop would wait for that outcome forever.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import cast

from ..core.validate import CheckedWorkflow
from ..steps.context import StepLog
from ..steps.registry import StepCall
from .runner import AttemptRunner, attempt_functions
from .worksource import Claims, Outcome, Report, Reported, Spawn


class LocalSource:
    """Attempts as tasks the run owns (see the module docstring)."""

    __slots__ = ("_clock", "_max_output_bytes", "_report", "_run", "_runs", "_spawn")
    remote = False  # its attempts are this process's tasks

    def __init__(self, checked: CheckedWorkflow, clock: Callable[[], float]) -> None:
        self._runs = attempt_functions(checked)  # a type's `prepare` raises here, if at all
        self._max_output_bytes = checked.spec.limits.max_output_bytes
        self._clock = clock

    def open(self, spawn: Spawn, report: Report, log: StepLog) -> None:
        # (its attempts write their notes in the run's step log themselves)
        self._spawn = spawn
        self._report = report
        self._run = AttemptRunner(self._runs, self._max_output_bytes, self._clock,
                                  report).run

    def start(self, call: StepCall, fallback: bool) -> asyncio.Task[None]:
        return self._spawn(self._run(call, fallback))

    def cancel(self, handle: object) -> None:
        task = cast("asyncio.Task[None]", handle)
        task.cancel()
        body = task.get_coro()
        # (the first request only: the loop may cancel twice before the task's turn)
        if task.cancelling() == 1 and inspect.iscoroutine(body) \
                and inspect.getcoroutinestate(body) == inspect.CORO_CREATED:  # see above
            given = inspect.getcoroutinelocals(body)  # AttemptRunner.run's arguments
            call: StepCall = given["call"]
            outcome = Outcome(call.index, call.attempt, "cancelled", None, None,
                              given["fallback"])
            asyncio.get_running_loop().call_soon(self._report, outcome)

    def adopt(self, running: list[int]) -> dict[int, object]:
        """An attempt stored running died with the process that ran it: none goes on."""
        return {}

    def claims(self) -> Claims | None:  # never asked: not remote
        return None

    def applied(self, outcomes: list[Reported]) -> None:  # never called: not remote
        pass

    def reserve(self, i: int) -> bool:  # never asked: not remote
        return False

    def committed(self) -> None:  # never called: not remote
        pass

    def close(self) -> None:
        """The run's TaskGroup owns every task this source started: nothing to stop.
        The runner is dropped, and with it its hold on the loop's ``report``, so a
        finished run's objects are freed by reference counting (``runtime.gctune``)."""
        del self._report, self._run, self._spawn
