"""A sync python step's call in a child process (``executor: process``, docs/workers.md).

A call that holds the GIL (a long regex, a C extension that never lets go of it) stalls
every thread of its process, the worker's heartbeat included: its lease runs out and the
attempt is taken for dead while it still runs.  In a child process it cannot: the worker
waits on a pipe, its event loop free.

Each call starts a fresh interpreter (as multiprocessing's ``spawn`` does, without
re-running the worker's ``__main__``) running ``steps.procchild``: it imports the
function by its ``call:`` reference, calls it with the arguments decoded from JSON and
answers with its value as JSON, or its exception's class names, message and traceback.
The worker raises ``ProcessStepFailed`` carrying those, so ``retry_on`` rules match the
child's exception as they would match it raised in a thread.  Cancelling the awaiting
task (the step's timeout, a cancelled run, a stopping worker) kills the child and
reaps it.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable, Mapping
from functools import cache
from importlib import resources

from ..core.model import JSON
from ..errors import ProcessStepFailed, StepError
from .binding import import_call, signature_of

EXECUTORS = ("thread", "process")


@cache
def child_source() -> str:
    """The source the child interpreter runs (``python -c``)."""
    return resources.files(__package__).joinpath("procchild.py").read_text("utf-8")


def process_problem(fn: Callable[..., object], call: str | None) -> str | None:
    """Why ``fn`` cannot run as a process step (None when it can): an async function, a
    function that takes ``ctx``, or one that ``call`` does not import."""
    sig = signature_of(fn)
    if sig.is_async:
        return ("executor: process runs sync functions only; this one is async (it runs "
                "on the worker's event loop: drop `executor`)")
    wants = [name for name, _ in sig.params if name == "ctx" or name in sig.wants_ctx]
    if wants:
        return (f"executor: process cannot pass the step context: the function takes "
                f"{wants[0]!r} (ctx lives in the worker; drop the parameter or the "
                f"executor)")
    if call is None:
        return None
    try:
        found = import_call(call)
    except ImportError as exc:
        return (f"executor: process imports the function by {call!r} in a new process, "
                f"and it does not import: {exc} (a lambda or a nested function cannot run "
                f"in a process)")
    if found is not fn:
        return (f"executor: process imports the function by {call!r} in a new process, "
                f"which names another object (a lambda, a nested function or a function "
                f"defined in __main__ cannot run in a process)")
    return None


async def run_in_process(call: str, kwargs: Mapping[str, object], step_id: str) -> JSON:
    """``call``'s function with ``kwargs`` in a child process: its JSON value, or
    ``ProcessStepFailed`` carrying the child's exception."""
    try:
        request = json.dumps({"call": call, "kwargs": kwargs, "path": sys.path,
                              "worker": os.getpid()})
    except (TypeError, ValueError) as exc:
        raise ProcessStepFailed(("TypeError",), f"step {step_id!r}: executor: process "
                                f"passes JSON arguments only: {exc}", retryable=False) from None
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", child_source(), stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE)
    try:
        answer, _ = await proc.communicate(request.encode())
    except BaseException:  # cancelled: the step timed out, the run or worker stops
        if proc.returncode is None:
            proc.kill()
        await asyncio.shield(proc.wait())
        raise
    return _answer(answer, proc.returncode, step_id)


def _answer(answer: bytes, code: int | None, step_id: str) -> JSON:
    try:
        message = json.loads(answer) if answer else None
    except ValueError:
        message = None
    if isinstance(message, dict) and "ok" in message:
        return message["ok"]  # type: ignore[no-any-return]
    if isinstance(message, dict) and isinstance(error := message.get("error"), dict):
        raise ProcessStepFailed(tuple(error["names"]), error["message"],
                                retryable=error["retryable"],
                                retry_after=error["retry_after"],
                                child_traceback=error["traceback"])
    raise StepError(f"step {step_id!r}: the process running its call exited with code "
                    f"{code} before answering (it was killed, or crashed)", step=step_id)
