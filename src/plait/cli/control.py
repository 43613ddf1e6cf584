"""Commands that act on a stored run: ``plait approve``, ``plait signal`` and
``plait cancel``.

Both record what was asked in the store first (a decision, a cancel request); the
process executing the run acts on it.  When no process executes the run (it waits for
a person, was detached but not started yet, or its process died), this process does:
``approve`` and ``signal`` continue the run in the foreground like ``plait resume`` (on
PostgreSQL they hand the run to the workers and follow it); ``cancel`` records the cancellation at
once.  A decision that could not be applied is noted in the run's history
(``runtime.continuation``).
"""

from __future__ import annotations

import time

from rich.text import Text

from ..core.model import JSON
from ..core.states import FINAL_RUN_STATES, RunStatus
from ..errors import (
    DecisionTaken,
    DefinitionError,
    EventTaken,
    InputError,
    RunError,
    RunNotFound,
)
from ..runtime import continuation, control, signals
from ..runtime.control import Handoff, executor
from ..runtime.engine import Engine
from ..store.base import Store
from . import output
from .follow import for_workers, until_applied
from .loading import add_import_paths
from .session import Refusal, continue_run, definition_problems, guarded
from .settings import ExitCode, exit_code_for
from .views import RunScreen

CANCEL_REASON = "cancelled on request (plait cancel)"


# ------------------------------------------------------------------ approve


async def approve_command(run_id: str, step: str, *, approved: bool, by: str | None,
                          data: JSON, db: str, view: RunScreen,
                          detach: bool = False) -> ExitCode:
    """``plait approve``: record the decision (who, when, data), then see it applied.
    SQLite, memory: the run continues here like ``plait resume`` (exit codes as run;
    ``detach``: in a background ``plait resume``), unless another live process executes
    it: that process applies the decision (exit 0).  PostgreSQL: the workers continue
    it (``control.hand_to_workers``) and this process follows it like ``plait run``
    (``detach``: returns at once).  When a decision is stored already (by anyone), it
    stands: exit 1 naming it."""
    who = by or control.current_user()

    async def body(store: Store) -> ExitCode:
        engine = Engine(store)
        try:
            await _record(engine, run_id, step, approved=approved, who=who, data=data)
            verb = "approved" if approved else "rejected"
            view.notices().print(Text(f"step {step} of run {run_id} {verb} by {who}",
                                      "green" if approved else "yellow"))
            if for_workers(db):
                return await _to_workers(engine, run_id, step, view, db, detach)
            if detach and executor(await store.get_run(run_id), engine) is None:
                return await _in_background(engine, run_id, view, db)
            return await _continue(engine, run_id, step, view)
        finally:
            engine.close()

    return await guarded(db, body, err=view.err)


async def _record(engine: Engine, run_id: str, step: str, *, approved: bool, who: str,
                  data: JSON) -> None:
    """Store the decision; Refusal when it cannot be (exit 1 when one stands already,
    with how to go on when the run is stuck, else 2)."""
    try:
        await engine.approve(run_id, step, approved=approved, by=who, data=data)
    except RunNotFound:
        raise
    except DecisionTaken as exc:  # the first decision stands
        raise Refusal(str(exc) + await _stuck_hint(engine.store, run_id),
                      ExitCode.FAILED) from exc
    except RunError as exc:
        raise Refusal(f"nothing recorded: {exc}") from exc


async def _stuck_hint(store: Store, run_id: str) -> str:
    """A second line for a refused decision when the standing one was never applied."""
    run = await store.get_run(run_id)
    entry = continuation.stuck(run, await store.get_steps(run_id),
                               await store.get_events(run_id), now=time.time())
    return "" if entry is None else "\n" + continuation.stuck_text(entry)


async def _to_workers(engine: Engine, run_id: str, step: str, view: RunScreen, db: str,
                      detach: bool) -> ExitCode:
    """PostgreSQL: the parked run is made claimable and the workers woken; then follow
    it (exit codes as run), or return at once.  ``step``: the decided step ("" after
    an event)."""
    await control.hand_to_workers(engine, run_id, step or None)
    if detach:
        view.submitted(await engine.store.get_run(run_id))
        return ExitCode.OK
    result = await until_applied(engine, run_id, step, view, db)
    view.finish(result)
    return exit_code_for(result.status)


async def _in_background(engine: Engine, run_id: str, view: RunScreen, db: str) -> ExitCode:
    """SQLite ``--detach``: a background ``plait resume`` applies the decision."""
    from .detach import start_resume

    run = await engine.store.get_run(run_id)
    try:
        started = start_resume(run, db, None)
    except OSError as exc:
        raise Refusal(f"the decision is recorded, but no background process could be "
                      f"started ({exc}); continue the run with "
                      f"`{continuation.resume_hint(run_id)}`", ExitCode.FAILED) from exc
    view.detached(run, started)
    return ExitCode.OK


async def _continue(engine: Engine, run_id: str, step: str, view: RunScreen) -> ExitCode:
    add_import_paths(None)  # python steps import from the current directory too
    try:
        done = await control.continue_noted(
            engine, run_id, step, lambda checked, run: continue_run(engine, checked, run,
                                                                    view))
    except DefinitionError as exc:
        run = await engine.store.get_run(run_id)
        text = Text(f"decision recorded, could not continue here; continue it with: "
                    f"{continuation.resume_hint(run_id)} (where its python steps "
                    f"import)\n", "yellow")
        raise Refusal(text + definition_problems(exc, run)) from exc
    if not isinstance(done, Handoff):
        return done
    result = await engine.result(run_id)
    applied = result.steps[step].status != "waiting"
    view.handed_off(result, f"run {run_id} is executed by {done.owner}, which "
                    + ("applied the decision and continues the run" if applied else
                       "applies the decision the next time it looks (within seconds)"))
    return ExitCode.OK


# ------------------------------------------------------------------ signal


async def signal_command(run_id: str, name: str, *, data: JSON, db: str, view: RunScreen,
                         detach: bool = False) -> ExitCode:
    """``plait signal``: store event ``name`` of the run, then see the run go on, as
    ``plait approve`` does after a decision.  When an event of that name is stored
    already (by anyone), it stands: exit 1.  A bad name or data, an unknown or finished
    run: exit 2, nothing stored."""

    async def body(store: Store) -> ExitCode:
        engine = Engine(store)
        try:
            try:
                await engine.signal(run_id, name, data)
            except EventTaken as exc:
                raise Refusal(str(exc), ExitCode.FAILED) from exc
            except (InputError, RunError) as exc:
                if isinstance(exc, RunNotFound):
                    raise
                raise Refusal(f"nothing stored: {exc}") from exc
            view.notices().print(Text(f"event {name} sent to run {run_id}", "green"))
            if for_workers(db):
                return await _to_workers(engine, run_id, "", view, db, detach)
            if detach and executor(await store.get_run(run_id), engine) is None:
                return await _in_background(engine, run_id, view, db)
            return await _continue_after_event(engine, run_id, view)
        finally:
            engine.close()

    return await guarded(db, body, err=view.err)


async def _continue_after_event(engine: Engine, run_id: str, view: RunScreen) -> ExitCode:
    add_import_paths(None)  # python steps import from the current directory too
    try:
        done = await signals.continue_after_event(
            engine, run_id, lambda checked, run: continue_run(engine, checked, run, view))
    except DefinitionError as exc:
        run = await engine.store.get_run(run_id)
        text = Text(f"event stored, could not continue here; continue it with: "
                    f"{continuation.resume_hint(run_id)} (where its python steps "
                    f"import)\n", "yellow")
        raise Refusal(text + definition_problems(exc, run)) from exc
    if isinstance(done, Handoff):
        view.handed_off(await engine.result(run_id), f"run {run_id} is executed by "
                        f"{done.owner}, which takes the event in")
        return ExitCode.OK
    if done is None:
        result = await engine.result(run_id)
        view.finish(result)
        return exit_code_for(result.status)
    return done


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

