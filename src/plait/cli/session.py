"""The commands that execute runs: ``plait run``, ``resume`` and ``retry``, and the
shared pieces every command that opens a store uses (``opened_store``, ``guarded``).

The work is the runtime's: this module opens the store, hands the engine a listener
for progress, turns the first Ctrl-C into a cancellation the engine records (the run
ends ``cancelled`` with its running steps cancelled) and the second into an immediate
stop, and maps errors to the exit codes of docs/cli.md.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..core.model import JSON
from ..core.states import FINAL_RUN_STATES, StepStatus
from ..core.validate import CheckedWorkflow
from ..errors import (
    DefinitionError,
    InputError,
    PlaitError,
    RunError,
    RunNotFound,
    StoreError,
    StoreUnreachable,
)
from ..runtime import control
from ..runtime.engine import Engine
from ..runtime.notify import announce
from ..runtime.results import RunResult
from ..store.base import RunRecord, StepRecord, Store
from ..store.memory import MemoryStore
from ..store.shared import StoreHandle
from ..store.url import missing_database, shown_url
from . import output
from .follow import for_workers, until_settled
from .loading import add_import_paths, load_target, stored_reference
from .settings import CONNECT_WAIT_ENV, DB_ENV, ExitCode, connect_wait, exit_code_for
from .views import RunScreen

if TYPE_CHECKING:
    from rich.text import Text

MAX_LISTED_REUSED = 8  # step ids named in the notice of `plait retry`
CONNECT_FIRST_DELAY_S = 0.25  # between tries to reach a store's server, doubling
CONNECT_MAX_DELAY_S = 1.0

Work = Callable[[], Coroutine[Any, Any, RunResult]]


class Refusal(Exception):
    """A command cannot do what it was asked: ``message`` goes to stderr and the
    command exits with ``code``."""

    def __init__(self, message: str | Text, code: ExitCode = ExitCode.USAGE) -> None:
        super().__init__(str(message))
        self.message = message
        self.code = code


# ------------------------------------------------------------------ stores


@asynccontextmanager
async def opened_store(url: str, *, create: bool = True, read_only: bool = False,
                       wait: float | None = None) -> AsyncIterator[Store]:
    """The store of ``url``, opened.  Commands that only read or change existing runs
    pass ``create=False``: a SQLite file that does not exist then stays missing and
    the command sees an empty store (no runs).  Commands that only read pass
    ``read_only``: they work on a database they cannot write.  A server that cannot
    be reached is tried again for ``wait`` seconds (default ``$PLAIT_CONNECT_WAIT``),
    then StoreUnreachable."""
    if not create and missing_database(url) is not None:
        yield MemoryStore(url)
        return
    # the shared store of the URL (plait.connect): one per file for the whole command
    held = await _open_handle(url, read_only, connect_wait() if wait is None else wait)
    try:
        yield held.store
    finally:
        await held.close()


async def _open_handle(url: str, read_only: bool, wait: float) -> StoreHandle:
    """An open handle of ``url``, trying again (backing off) while its server cannot
    be reached, for up to ``wait`` seconds."""
    deadline = time.monotonic() + wait
    delay = CONNECT_FIRST_DELAY_S
    while True:
        try:
            return await StoreHandle(url, read_only=read_only).open()
        except StoreUnreachable as exc:
            left = deadline - time.monotonic()
            if left <= 0:
                tried = f"tried for {wait:g}s" if wait > 0 else "tried once"
                raise StoreUnreachable(f"{exc} ({tried}; ${CONNECT_WAIT_ENV} sets how "
                                       f"long)") from exc
            await asyncio.sleep(min(delay, left))
            delay = min(delay * 2, CONNECT_MAX_DELAY_S)


async def guarded(db: str, body: Callable[[Store], Awaitable[ExitCode]], *,
                  err: TextIO | None = None, create: bool = False,
                  read_only: bool = False) -> ExitCode:
    """Run ``body`` with the store of ``db`` open; what goes wrong becomes a message on
    stderr and an exit code, never a traceback: an unknown run, a store that cannot be
    used (unreadable, corrupt, newer schema) or a stored definition that cannot be
    loaded exit 2, a store whose server cannot be reached (once ``opened_store`` gave
    up, or later) exits 4, a Refusal with its code, any other plait error 1."""
    try:
        async with opened_store(db, create=create, read_only=read_only) as store:
            return await body(store)
    except (Refusal, PlaitError) as exc:
        message, code = _failure(exc, db)
    output.console(err, stderr=err is None).print(message, end="")
    return code


def _failure(exc: Refusal | PlaitError, db: str) -> tuple[Text, ExitCode]:
    """What ``guarded`` says about ``exc`` (rich is loaded only now) and its exit code."""
    if isinstance(exc, Refusal):
        message = exc.message
        return output.error_text(message) if isinstance(message, str) else message, exc.code
    if isinstance(exc, RunNotFound):
        return output.error_text(f"{exc} in {shown_url(db)}{_missing_hint(db)}"), \
            ExitCode.USAGE
    if isinstance(exc, StoreUnreachable):
        where = shown_url(db)
        message = str(exc) if where in str(exc) else f"{where}: {exc}"
        return output.error_text(message, heading="store unreachable"), \
            ExitCode.UNREACHABLE
    if isinstance(exc, StoreError):
        return output.error_text(f"store {shown_url(db)}: {exc}"), ExitCode.USAGE
    if isinstance(exc, DefinitionError):  # a stored definition this plait cannot load
        return output.problems_text(exc, "stored definition"), ExitCode.USAGE
    return output.error_text(str(exc)), ExitCode.FAILED


def _missing_hint(db: str) -> str:
    path = missing_database(db)
    if path is None:
        return ""
    return (f" (the database {path} does not exist: run plait in the directory the run "
            f"was started from, or give --db / ${DB_ENV})")


# ------------------------------------------------------------------ plait run


async def run_command(target: str, input: JSON, *, db: str, view: RunScreen,
                      detach: bool = False) -> ExitCode:
    """``plait run``: its exit code (docs/cli.md; problems are written to ``view.err``).
    With ``detach`` the run is stored and handed to a background ``plait resume``; on
    PostgreSQL the workers execute it (``follow``)."""

    async def body(store: Store) -> ExitCode:
        try:
            checked = (await load_target(target, store)).validate()
        except DefinitionError as exc:
            raise Refusal(output.problems_text(exc, target)) from exc
        engine = Engine(store)
        try:
            run = await _submit(engine, checked, input, target)
            if not stored_reference(target):
                await control.remember_source(store, run.run_id, Path(target))
            if for_workers(db):  # the workers execute it, never this process
                await announce(store, run.run_id)
                if detach:
                    view.submitted(run)
                    return ExitCode.OK
                return await _follow(engine, run, view, db)
            if detach:
                from .detach import start_resume

                definition = None if stored_reference(target) else Path(target)
                try:
                    started = start_resume(run, db, definition)
                except OSError as exc:
                    raise Refusal(f"run {run.run_id} is stored, but no background process "
                                  f"could be started for it ({exc}); continue it with "
                                  f"`plait resume {run.run_id}`", ExitCode.FAILED) from exc
                view.detached(run, started)
                return ExitCode.OK
            return await _execute_new(engine, checked, run, view, target)
        finally:
            engine.close()

    return await guarded(db, body, err=view.err, create=True)


async def _follow(engine: Engine, run: RunRecord, view: RunScreen, db: str) -> ExitCode:
    """Show a run the workers execute once it settles (Ctrl-C: as a local run)."""
    result = await execute_interruptibly(
        engine, run.run_id, lambda: until_settled(engine, run, view, db), view.interrupted)
    return await show_result(engine, view, result)


async def show_result(engine: Engine, view: RunScreen, result: RunResult) -> ExitCode:
    """Show the run's outcome; the exit code for it.  A run that waits shows what each
    waiting step asks (``waiting`` in --json: an approval's prompt and content)."""
    if result.status == "waiting":
        from ..rundoc.notes import waits_of

        events = await engine.store.get_events(result.run_id)
        result.waits = waits_of({sid: s.status for sid, s in result.steps.items()}, events)
    view.finish(result)
    return exit_code_for(result.status)


async def _submit(engine: Engine, checked: CheckedWorkflow, input: JSON,
                  target: str) -> RunRecord:
    """Store the run; ``NAME@V`` runs stored version V as it is (latest untouched)."""
    reference = stored_reference(target)
    try:
        return await engine.submit(checked, input,
                                   version=reference[1] if reference else None)
    except InputError as exc:
        raise Refusal(output.error_text(f"{target}: {exc}", heading="invalid input")) from exc
    except DefinitionError as exc:
        raise Refusal(output.problems_text(exc, target)) from exc


async def _execute_new(engine: Engine, checked: CheckedWorkflow, run: RunRecord,
                       view: RunScreen, target: str) -> ExitCode:
    try:
        result = await watch(engine, checked, run, view, lambda: engine.execute(checked, run))
    except PlaitError as exc:
        raise Refusal(f"run {run.run_id} of {target} stopped: {exc}",
                      ExitCode.FAILED) from exc
    return await show_result(engine, view, result)


# ------------------------------------------------------------------ plait resume


async def resume_command(run_id: str, *, db: str, view: RunScreen) -> ExitCode:
    """``plait resume``: continue a stored run in the foreground (exit codes as run);
    on PostgreSQL a worker continues it and this process follows it.  A run that
    already ended is shown as it is, with a notice."""

    async def body(store: Store) -> ExitCode:
        run = await store.get_run(run_id)
        engine = Engine(store)
        try:
            if run.status in FINAL_RUN_STATES:
                from rich.text import Text

                view.notices().print(Text(f"run {run_id} already ended ({run.status}); "
                                          f"there is nothing to resume", "yellow"))
                result = await engine.result(run_id)
                return await show_result(engine, view, result)
            if for_workers(db):  # a worker takes it over: this process follows it
                await announce(store, run.run_id)
                return await _follow(engine, run, view, db)
            checked = await runnable_definition(engine, run)
            try:
                return await continue_run(engine, checked, run, view)
            except RunError as exc:
                raise Refusal(f"run {run_id} not resumed: {exc}", ExitCode.FAILED) from exc
        finally:
            engine.close()

    return await guarded(db, body, err=view.err)


async def runnable_definition(engine: Engine, run: RunRecord) -> CheckedWorkflow:
    """The stored definition ``run`` ran, with the functions of its python steps
    importable from here (the current directory, the run's definition directory and
    PYTHONPATH); Refusal otherwise."""
    add_import_paths(None)
    try:
        return await control.runnable_definition(engine, run)
    except DefinitionError as exc:
        raise Refusal(definition_problems(exc, run)) from exc


def definition_problems(exc: DefinitionError, run: RunRecord) -> Text:
    """What a stored definition whose python steps cannot be imported here says."""
    text = output.problems_text(exc, f"{run.workflow}@{run.version}")
    text.append("python steps import from the definition's directory, the current "
                "directory and PYTHONPATH\n", "cyan")
    return text


async def continue_run(engine: Engine, checked: CheckedWorkflow, run: RunRecord,
                       view: RunScreen, steps: Sequence[StepRecord] | None = None) -> ExitCode:
    """Execute a stored run here until it ends or waits (``Engine.resume``).  RunError
    when it cannot be executed here (another live process owns it)."""
    if steps is None:
        steps = await engine.store.get_steps(run.run_id)
    try:
        result = await watch(engine, checked, run, view,
                             lambda: engine.resume(run.run_id, checked), steps)
    except RunError:
        raise
    except PlaitError as exc:
        raise Refusal(f"run {run.run_id} stopped: {exc}", ExitCode.FAILED) from exc
    return await show_result(engine, view, result)


# ------------------------------------------------------------------ plait retry


async def retry_command(run_id: str, *, from_step: str | None, new_input: JSON,
                        replace_input: bool, db: str, view: RunScreen) -> ExitCode:
    """``plait retry``: a new run reusing the completed outputs upstream of what failed
    (or of ``from_step``), executed in the foreground (exit codes as run); on
    PostgreSQL the workers execute it and this process follows it, as ``plait run``."""

    async def body(store: Store) -> ExitCode:
        old = await store.get_run(run_id)
        engine = Engine(store)
        try:
            checked = await runnable_definition(engine, old)
            new = await _fork(engine, old, from_step,
                              {"input": new_input} if replace_input else {})
            steps = await store.get_steps(new.run_id)
            view.notices().print(_retry_notice(old, new, steps))
            if for_workers(db):  # the workers execute it, as `plait run`'s
                await announce(store, new.run_id)
                return await _follow(engine, new, view, db)
            try:
                return await continue_run(engine, checked, new, view, steps)
            except RunError as exc:
                raise Refusal(f"run {new.run_id} stopped: {exc}", ExitCode.FAILED) from exc
        finally:
            engine.close()

    return await guarded(db, body, err=view.err)


async def _fork(engine: Engine, old: RunRecord, from_step: str | None,
                replaced: dict[str, JSON]) -> RunRecord:
    source = f"{old.workflow}@{old.version}"
    try:
        return await engine.fork(old.run_id, from_step=from_step, **replaced)
    except RunNotFound:
        raise
    except RunError as exc:
        raise Refusal(str(exc)) from exc
    except InputError as exc:
        raise Refusal(output.error_text(f"{source}: {exc}", heading="invalid input")) from exc
    except DefinitionError as exc:
        raise Refusal(output.problems_text(exc, source)) from exc


def _retry_notice(old: RunRecord, new: RunRecord, steps: Sequence[StepRecord]) -> Text:
    from rich.text import Text

    reused = [s.step_id for s in steps if s.status is StepStatus.COMPLETED]
    text = Text(f"run {new.run_id}: retry of run {old.run_id}")
    if not reused:
        text.append(", running every step")
    else:
        named = ", ".join(reused[:MAX_LISTED_REUSED])
        more = len(reused) - MAX_LISTED_REUSED
        text.append(f", reusing the outputs of {named}"
                    + (f" and {more} more steps" if more > 0 else ""))
    return text


# ------------------------------------------------------------------ executing


async def watch(engine: Engine, checked: CheckedWorkflow, run: RunRecord, view: RunScreen,
                work: Work, steps: Sequence[StepRecord] = ()) -> RunResult:
    """Run ``work`` (the engine executing ``run``) with the view's live progress and
    Ctrl-C handling."""
    with view.progress(checked, run, steps) as listener:
        if listener is not None:
            engine.listeners.append(listener.apply)
            engine.observers.add(listener)
        try:
            return await execute_interruptibly(engine, run.run_id, work, view.interrupted)
        finally:
            if listener is not None:
                engine.listeners.remove(listener.apply)
                engine.observers.remove(listener)


async def execute_interruptibly(engine: Engine, run_id: str, work: Work,
                                on_interrupt: Callable[[int], None]) -> RunResult:
    """Await ``work`` (executing run ``run_id``).  The first SIGINT asks the engine to
    cancel the run (it ends ``cancelled``, with what was running recorded as
    cancelled); a second one cancels the execution at once (the engine still records
    the run as cancelled)."""
    try:
        return await _execute(engine, run_id, work, on_interrupt)
    except BaseExceptionGroup as group:
        # The canceller never fails, so the group holds the run's own error.
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise


async def _execute(engine: Engine, run_id: str, work: Work,
                   on_interrupt: Callable[[int], None]) -> RunResult:
    loop = asyncio.get_running_loop()
    cancel_requested = asyncio.Event()
    presses = 0
    async with asyncio.TaskGroup() as tg:
        task = tg.create_task(work())

        def on_sigint() -> None:
            nonlocal presses
            presses += 1
            on_interrupt(presses)
            if presses == 1:
                cancel_requested.set()
            else:
                task.cancel()

        async def cancel_when_asked() -> None:
            await cancel_requested.wait()
            await engine.cancel(run_id)

        canceller = tg.create_task(cancel_when_asked())
        handled = _handle_sigint(loop, on_sigint)
        try:
            await asyncio.wait([task])
        finally:
            if handled:
                loop.remove_signal_handler(signal.SIGINT)
            canceller.cancel()
    if task.cancelled():
        return await engine.result(run_id)
    return task.result()


def _handle_sigint(loop: asyncio.AbstractEventLoop, handler: Callable[[], None]) -> bool:
    """Route SIGINT to ``handler`` where the platform allows it (not on Windows, where
    Ctrl-C cancels the whole run task and the engine still records the cancellation)."""
    return handle_signal(loop, signal.SIGINT, handler)


def handle_signal(loop: asyncio.AbstractEventLoop, sig: signal.Signals,
                  handler: Callable[..., None], *args: object) -> bool:
    """Route ``sig`` to ``handler(*args)`` on ``loop``; False where the platform has no
    loop signal handlers (Windows; a loop outside the main thread): the signal keeps
    its default effect there."""
    if sys.platform == "win32":
        return False
    try:
        loop.add_signal_handler(sig, handler, *args)
    except (NotImplementedError, RuntimeError, ValueError):
        return False
    return True
