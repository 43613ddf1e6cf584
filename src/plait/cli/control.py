"""Commands that act on a stored run: ``plait approve`` and ``plait cancel``.

Both record what was asked in the store first (a decision, a cancel request); the
process executing the run acts on it.  When no process executes the run (it waits for
a person, was detached but not started yet, or its process died), this process does:
``approve`` continues the run in the foreground like ``plait resume``; ``cancel``
records the cancellation at once.
"""

from __future__ import annotations

import asyncio
import getpass
import time

from rich.text import Text

from ..core.model import JSON
from ..core.states import FINAL_RUN_STATES, RunStatus, StepStatus
from ..errors import DecisionTaken, RunError, RunNotFound
from ..runtime.engine import Engine, owner_alive
from ..store.base import RunRecord, Store
from . import output
from .session import Refusal, continue_run, guarded, runnable_definition
from .settings import ExitCode
from .views import RunView

CANCEL_REASON = "cancelled on request (plait cancel)"
HANDOFF_WAIT_S = 10.0  # how long approve waits for another executor to apply a decision
HANDOFF_POLL_S = 0.1


def current_user() -> str:
    """Who decides, when ``--by`` is not given: the OS user."""
    try:
        return getpass.getuser()
    except (OSError, KeyError, ImportError):  # no user name in the environment or passwd
        return "unknown"


def executor(run: RunRecord, engine: Engine) -> str | None:
    """The live process executing ``run``, other than this one, or None."""
    owner = run.owner
    if run.status in FINAL_RUN_STATES or owner is None or owner == engine.worker:
        return None
    return owner if owner_alive(owner) else None


# ------------------------------------------------------------------ approve


async def approve_command(run_id: str, step: str, *, approved: bool, by: str | None,
                          data: JSON, db: str, view: RunView) -> ExitCode:
    """``plait approve``: record the decision (who, when, data), then continue the run
    here like ``plait resume`` (exit codes as run), unless another live process
    executes it: that process applies the decision and continues the run (exit 0).
    When a decision is stored already (by anyone), it stands: exit 1 naming it."""
    who = by or current_user()

    async def body(store: Store) -> ExitCode:
        engine = Engine(store)
        try:
            try:
                await engine.approve(run_id, step, approved=approved, by=who, data=data)
            except RunNotFound:
                raise
            except DecisionTaken as exc:  # SPEC 8: the first decision stands
                raise Refusal(str(exc), ExitCode.FAILED) from exc
            except RunError as exc:
                raise Refusal(f"nothing recorded: {exc}") from exc
            verb = "approved" if approved else "rejected"
            view.notices().print(Text(f"step {step} of run {run_id} {verb} by {who}",
                                      "green" if approved else "yellow"))
            return await _continue(engine, run_id, step, view)
        finally:
            engine.close()

    return await guarded(db, body, err=view.err)


async def _continue(engine: Engine, run_id: str, step: str, view: RunView) -> ExitCode:
    owner = await _applied_elsewhere(engine, run_id, step)
    if owner is None:
        run = await engine.store.get_run(run_id)
        try:
            checked = await runnable_definition(engine, run)
        except Refusal as exc:
            text = Text("the decision is recorded, but the run cannot continue here:\n",
                        "yellow")
            raise Refusal(text + _as_text(exc.message), exc.code) from exc
        try:
            return await continue_run(engine, checked, run, view)
        except RunError:
            owner = await _applied_elsewhere(engine, run_id, step)
            if owner is None:
                raise
    result = await engine.result(run_id)
    applied = result.steps[step].status != "waiting"
    view.handed_off(result, f"run {run_id} is executed by {owner}, which "
                    + ("applied the decision and continues the run" if applied else
                       "applies the decision the next time it looks (within seconds)"))
    return ExitCode.OK


async def _applied_elsewhere(engine: Engine, run_id: str, step: str) -> str | None:
    """The live process executing the run, once it has applied the decision on
    ``step`` (or after HANDOFF_WAIT_S); None when no process executes the run (any
    more), so this one must continue it.

    Waiting closes a race: the executor may park the run (and let it go) after the
    decision was stored but without having looked at it; the run would then wait for a
    decision already taken, with nobody to apply it."""
    deadline = time.monotonic() + HANDOFF_WAIT_S
    while True:
        owner = executor(await engine.store.get_run(run_id), engine)
        if owner is None:
            return None
        steps = await engine.store.get_steps(run_id)
        waiting = any(s.step_id == step and s.status is StepStatus.WAITING for s in steps)
        if not waiting or time.monotonic() >= deadline:
            return owner
        await asyncio.sleep(HANDOFF_POLL_S)


def _as_text(message: str | Text) -> Text:
    return message if isinstance(message, Text) else output.error_text(message)


# ------------------------------------------------------------------ cancel


async def cancel_command(run_id: str, *, db: str) -> ExitCode:
    """``plait cancel``: exit 0 when the run is cancelled or its cancellation is
    requested (or it was already cancelled), 1 when it already completed or failed."""
    out = output.console()

    async def body(store: Store) -> ExitCode:
        run = await store.get_run(run_id)
        if run.status is RunStatus.CANCELLED:
            out.print(f"run {run_id} is already cancelled")
            return ExitCode.OK
        if run.status in FINAL_RUN_STATES:
            raise Refusal(f"run {run_id} already ended ({run.status}); there is nothing "
                          f"to cancel", ExitCode.FAILED)
        engine = Engine(store)
        try:
            result = await engine.cancel(run_id, reason=CANCEL_REASON)
            if result is not None:
                out.print(f"cancel requested for run {run_id}: no process was executing "
                          f"it, so it is {result.status} now")
                return ExitCode.OK
            owner = (await store.get_run(run_id)).owner
        finally:
            engine.close()
        out.print(f"cancel requested for run {run_id}: {owner} executes it and stops it "
                  f"within about a second")
        return ExitCode.OK

    return await guarded(db, body)

