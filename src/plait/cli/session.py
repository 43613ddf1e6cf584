"""One ``plait run`` (and the other commands that need a store), from loading the
definition to the exit code.

The work is the runtime's: this module opens the store, hands the engine a listener
for progress, turns the first Ctrl-C into a cancellation the engine records (the run
ends ``cancelled`` with its running steps cancelled) and the second into an immediate
stop, and maps errors to the exit codes of SPEC 8.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from ..core.model import JSON
from ..core.validate import CheckedWorkflow
from ..errors import DefinitionError, InputError, PlaitError, StoreError
from ..runtime.engine import Engine
from ..runtime.results import RunResult
from ..store import open_store
from ..store.base import RunRecord, Store
from . import output
from .loading import load_target
from .settings import ExitCode, exit_code_for
from .views import RunView


@asynccontextmanager
async def opened_store(url: str) -> AsyncIterator[Store]:
    store = open_store(url)
    await store.open()
    try:
        yield store
    finally:
        await store.close()


async def run_command(target: str, input: JSON, *, db: str, view: RunView) -> ExitCode:
    """``plait run``: the exit code of SPEC 8 (problems are written to ``view.err``)."""
    try:
        async with opened_store(db) as store:
            try:
                checked = (await load_target(target, store)).validate()
            except DefinitionError as exc:
                return _report_definition(view, exc, target)
            engine = Engine(store)
            try:
                return await _submit_and_execute(engine, checked, input, view, target)
            finally:
                engine.close()
    except StoreError as exc:
        output.console(view.err).print(output.error_text(f"store {db}: {exc}"))
        return ExitCode.USAGE


async def _submit_and_execute(engine: Engine, checked: CheckedWorkflow, input: JSON,
                              view: RunView, target: str) -> ExitCode:
    try:
        run = await engine.submit(checked, input)
    except InputError as exc:
        output.console(view.err).print(output.error_text(f"{target}: {exc}",
                                                         heading="invalid input"))
        return ExitCode.USAGE
    except DefinitionError as exc:
        return _report_definition(view, exc, target)
    with view.progress(checked, run) as listener:
        if listener is not None:
            engine.listeners.append(listener)
        try:
            result = await execute_interruptibly(engine, checked, run, view.interrupted)
        except PlaitError as exc:
            output.console(view.err).print(output.error_text(
                f"run {run.run_id} of {target} stopped: {exc}"))
            return ExitCode.FAILED
        finally:
            if listener is not None:
                engine.listeners.remove(listener)
    view.finish(result)
    return exit_code_for(result.status)


def _report_definition(view: RunView, exc: DefinitionError, target: str) -> ExitCode:
    output.console(view.err).print(output.problems_text(exc, target), end="")
    return ExitCode.USAGE


async def execute_interruptibly(engine: Engine, checked: CheckedWorkflow, run: RunRecord,
                                on_interrupt: Callable[[int], None]) -> RunResult:
    """Execute ``run``.  The first SIGINT asks the engine to cancel the run (it ends
    ``cancelled``, with what was running recorded as cancelled); a second one cancels
    the execution at once (the engine still records the run as cancelled)."""
    try:
        return await _execute(engine, checked, run, on_interrupt)
    except BaseExceptionGroup as group:
        # The canceller never fails, so the group holds the run's own error.
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise


async def _execute(engine: Engine, checked: CheckedWorkflow, run: RunRecord,
                   on_interrupt: Callable[[int], None]) -> RunResult:
    loop = asyncio.get_running_loop()
    cancel_requested = asyncio.Event()
    presses = 0
    async with asyncio.TaskGroup() as tg:
        work = tg.create_task(engine.execute(checked, run))

        def on_sigint() -> None:
            nonlocal presses
            presses += 1
            on_interrupt(presses)
            if presses == 1:
                cancel_requested.set()
            else:
                work.cancel()

        async def cancel_when_asked() -> None:
            await cancel_requested.wait()
            await engine.cancel(run.run_id)

        canceller = tg.create_task(cancel_when_asked())
        handled = _handle_sigint(loop, on_sigint)
        try:
            await asyncio.wait([work])
        finally:
            if handled:
                loop.remove_signal_handler(signal.SIGINT)
            canceller.cancel()
    if work.cancelled():
        return await engine.result(run.run_id)
    return work.result()


def _handle_sigint(loop: asyncio.AbstractEventLoop, handler: Callable[[], None]) -> bool:
    """Route SIGINT to ``handler`` where the platform allows it (not on Windows, where
    Ctrl-C cancels the whole run task and the engine still records the cancellation)."""
    if sys.platform == "win32":
        return False
    try:
        loop.add_signal_handler(signal.SIGINT, handler)
    except (NotImplementedError, RuntimeError, ValueError):
        return False
    return True

