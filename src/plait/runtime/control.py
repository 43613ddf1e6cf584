"""Acting on a stored run from any process: read it, resume it, record a decision on
one of its approval steps and continue it.  What ``plait.get_run`` / ``resume`` /
``approve`` do, and what ``plait resume`` / ``plait approve`` (``cli``) do around their
output and exit codes.

A stored run's definition is read back from the store, so its python steps must be
importable here: the directories noted by ``plait run FILE`` (``source_dir`` notes) are
put on ``sys.path`` first.  A decision is recorded first (the first one stands), then
applied by whoever executes the run: a live process that executes it already, else this
one (SQLite, memory), or the workers of a PostgreSQL cluster, to which the run is handed.
"""

from __future__ import annotations

import asyncio
import getpass
import os
import sys
import time
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar, cast

from ..core.model import JSON, JSONDict
from ..core.states import FINAL_RUN_STATES, RunStatus, StepStatus
from ..core.validate import CheckedWorkflow
from ..errors import DefinitionError, RunError
from ..store.base import RunChange, RunRecord, Store, WriteBatch
from . import continuation
from .engine import Engine, owner_alive
from .notify import announce
from .preflight import preflight
from .results import RunResult

HANDOFF_WAIT_S = 10.0  # how long to wait for another executor to apply a decision
HANDOFF_POLL_S = 0.1
HANDOFF_TRIES = 3  # claims of a run another process let go of without the decision
MAX_RETRY_CHAIN = 20  # runs followed back through retry_of for source directories

T = TypeVar("T")
_WARNED: set[str] = set()  # workflows warned about steps in __main__ (once per process)
# the frames of plait and of asyncio (between a script and its run) are not the caller's
_INTERNAL = (os.path.dirname(os.path.dirname(__file__)) + os.sep,
             os.path.dirname(asyncio.__file__) + os.sep)


@dataclass(frozen=True, slots=True)
class Handoff:
    """The run is executed by another live process (``owner``), which applies the
    decision: this one does not continue it."""

    owner: str


def current_user() -> str:
    """Who decides, when nobody is named: the OS user."""
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


# ------------------------------------------------------------------ definitions


def add_import_path(directory: str) -> None:
    """Put ``directory`` on ``sys.path`` (after the entries already first)."""
    if directory not in sys.path:
        sys.path.insert(1, directory)


async def remember_source(store: Store, run_id: str, definition: Path) -> None:
    """Note in the run's history where its definition file lives, so resume, approve
    and retry import its python steps from any directory."""
    directory = str(definition.resolve().parent)
    await store.write(WriteBatch(run_id=run_id, notes=[(None, {"source_dir": directory})]))


async def source_dirs(store: Store, run: RunRecord) -> list[str]:
    """Definition directories noted for ``run`` (or the runs it was retried from)."""
    found: list[str] = []
    current: RunRecord | None = run
    for _ in range(MAX_RETRY_CHAIN):  # a retry chain is short; bounded all the same
        if current is None:
            break
        for event in await store.get_events(current.run_id):
            directory = event.data.get("source_dir") if event.kind == "note" else None
            if isinstance(directory, str) and directory not in found:
                found.append(directory)
        current = await store.get_run(current.retry_of) if current.retry_of else None
    return found


async def runnable_definition(engine: Engine, run: RunRecord) -> CheckedWorkflow:
    """The stored definition ``run`` ran, with the functions of its python steps
    imported (from the directories noted for the run, then ``sys.path``);
    DefinitionError listing what cannot be imported."""
    for directory in await source_dirs(engine.store, run):
        add_import_path(directory)
    checked = await engine.stored_workflow(run.workflow, run.version)
    preflight(checked)
    return checked


# ------------------------------------------------------------------ runs


async def resume_here(engine: Engine, run_id: str) -> RunResult:
    """Continue a stored run in this process until it ends or waits (a finished run
    is returned as it is); RunBusy when another live process executes it."""
    run = await engine.store.get_run(run_id)
    if run.status in FINAL_RUN_STATES:
        return await engine.result(run_id)
    return await engine.resume(run_id, await runnable_definition(engine, run))


async def continue_here(engine: Engine, run_id: str, step: str,
                        execute: Callable[[CheckedWorkflow, RunRecord], Awaitable[T]],
                        ) -> T | Handoff:
    """After a decision on ``step``: ``execute(checked, run)`` continues the run here,
    unless a live process executes it (Handoff: that process applies the decision).
    DefinitionError when its python steps cannot be imported here."""
    owner = await applied_elsewhere(engine, run_id, step)
    if owner is not None:
        return Handoff(owner)
    run = await engine.store.get_run(run_id)
    checked = await runnable_definition(engine, run)
    try:
        return await execute(checked, run)
    except RunError:
        owner = await applied_elsewhere(engine, run_id, step)
        if owner is None:
            raise
        return Handoff(owner)


async def continue_noted(engine: Engine, run_id: str, step: str,
                         execute: Callable[[CheckedWorkflow, RunRecord], Awaitable[T]],
                         ) -> T | Handoff:
    """``continue_here``; when the run's python steps cannot be imported here
    (DefinitionError, raised), the failure is recorded in the run's history first
    (``continuation``): ``plait show`` and the API then say how to go on."""
    try:
        return await continue_here(engine, run_id, step, execute)
    except DefinitionError as exc:
        await continuation.note_failure(engine.store, run_id, step, str(exc))
        raise


async def applied_elsewhere(engine: Engine, run_id: str, step: str) -> str | None:
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


async def hand_to_workers(engine: Engine, run_id: str, step: str | None = None) -> None:
    """Let the workers of a cluster continue a parked run after a decision: they drive
    pending and running runs nobody holds, so the run is moved from ``waiting`` to
    ``running`` (claimed for that one write, then released) and the listening workers
    are woken.  A run held by another live process is left to it: it applies the
    decision (on ``step``) itself, unless it lets the run go without having seen it
    (``applied_elsewhere``): then the run is handed over after all."""
    for _ in range(HANDOFF_TRIES):
        run = await engine.store.claim_run(run_id, engine.worker, engine.clock(),
                                           engine.lease)
        if run is not None:
            await make_claimable(engine, run)
            return
        if step is None or await applied_elsewhere(engine, run_id, step) is not None:
            return


async def make_claimable(engine: Engine, run: RunRecord) -> None:
    """``run`` (claimed by this engine) from ``waiting`` to ``running``, released, and
    the workers woken."""
    try:
        if run.status is RunStatus.WAITING:
            await engine.store.write(WriteBatch(run_id=run.run_id, owner=engine.worker,
                                                run=RunChange(source=RunStatus.WAITING,
                                                              target=RunStatus.RUNNING,
                                                              at=engine.clock())))
    finally:
        await engine.store.release_run(run.run_id, engine.worker)
    await announce(engine.store, run.run_id)


async def decide(engine: Engine, run_id: str, step: str, *, approved: bool,
                 data: JSON, by: str | None, for_workers: bool) -> RunResult:
    """Record the decision (``Engine.approve``), then see that it is applied: here
    (``for_workers`` False: SQLite, memory), by the workers (a PostgreSQL cluster), or
    by the live process that executes the run; the run's result as it then is."""
    await engine.approve(run_id, step, approved=approved, by=by or current_user(),
                         data=data)
    if for_workers:
        await hand_to_workers(engine, run_id, step)
        return await engine.result(run_id)
    done = await continue_noted(engine, run_id, step,
                                lambda checked, run: engine.resume(run.run_id, checked))
    return done if isinstance(done, RunResult) else await engine.result(run_id)


# ------------------------------------------------------------------ steps in __main__


def warn_main_steps(checked: CheckedWorkflow, url: str) -> None:
    """Warn (once per workflow and process) when a run stored at ``url`` (a durable
    store: not ``memory://``) calls functions defined in ``__main__``: another process
    (``plait resume``, ``plait approve``, a worker) cannot import them."""
    if url.startswith("memory://") or checked.name in _WARNED:
        return
    calls = checked.derive("main_calls", lambda: _main_calls(checked.definition))
    if not calls:
        return
    _WARNED.add(checked.name)
    shown = ", ".join(sorted(set(calls)))
    warnings.warn(
        f"workflow {checked.name!r} calls functions defined in __main__ ({shown}): "
        f"`plait resume` and `plait approve` in another process cannot import them, so "
        f"a run that stops or waits for a person can only be continued from this script "
        f"(plait.resume, plait.approve). Move the step functions to a module (steps.py) "
        f"and import them from the script", UserWarning, stacklevel=_caller_level())


def _main_calls(value: object) -> list[str]:
    """The ``__main__`` functions that ``call`` fields name, children included."""
    found: list[str] = []
    todo = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            call = item.get("call")
            if isinstance(call, str) and call.startswith("__main__:"):
                found.append(call.removeprefix("__main__:"))
            todo.extend(cast(JSONDict, item).values())
        elif isinstance(item, list):
            todo.extend(item)
    return found


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside plait and asyncio (the script's
    call of ``wf.run``), so the warning names the line that started the run."""
    frame = sys._getframe(1)
    level = 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_INTERNAL):
        frame = frame.f_back
        level += 1
    return level
