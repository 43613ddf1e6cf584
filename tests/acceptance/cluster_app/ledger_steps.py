"""Step bodies for the cluster fault tests (tests/acceptance/test_cluster_faults.py).

Every body appends one line when it starts and one when it ends to the ledger file
named by ``PLAIT_LEDGER`` (``O_APPEND``, one ``write`` per line, so lines from many
processes never interleave):

    RUN STEP ATTEMPT PID start|end UNIX_TIME

The ledger is the side-effect record the tests hold the store's history against: it
shows what ran, where, and when, whichever process died or was paused meanwhile.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

from plait import StepContext


def ledger(ctx: StepContext, event: str) -> None:
    path = os.environ.get("PLAIT_LEDGER")
    if not path:
        raise RuntimeError("PLAIT_LEDGER names no ledger file")
    line = (f"{ctx.run_id} {ctx.step_id} {ctx.attempt} {os.getpid()} {event} "
            f"{time.time():.6f}\n")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def node(ctx: StepContext, add: int, via: Any = None, pause: float = 0.005) -> dict[str, Any]:
    """``v`` = ``add`` plus the ``v`` of every parent's output (read through
    ``ctx.outputs``); ``via`` is echoed (a parent's value passed by a template)."""
    ledger(ctx, "start")
    time.sleep(pause * (0.5 + random.random()))
    total = add + sum(_value(out) for out in ctx.outputs.values())
    ledger(ctx, "end")
    return {"v": total, "via": via}


def _value(output: object) -> int:
    if not isinstance(output, dict) or not isinstance(output.get("v"), int):
        raise TypeError(f"a parent's output has no integer 'v': {output!r}")
    return int(output["v"])


def nap(ctx: StepContext, seconds: float) -> dict[str, Any]:
    """Attempt 1 sleeps ``seconds``; a retry returns at once.  The output names the
    attempt and the process that produced it."""
    ledger(ctx, "start")
    time.sleep(seconds if ctx.attempt == 1 else 0.01)
    ledger(ctx, "end")
    return {"attempt": ctx.attempt, "pid": os.getpid()}


def doom(ctx: StepContext) -> None:
    """Kills the worker process running it, every time."""
    ledger(ctx, "start")
    os.kill(os.getpid(), 9)


def busy(ctx: StepContext, seconds: float) -> dict[str, Any]:
    """Holds its slot for ``seconds`` (the bound tests read the overlap)."""
    ledger(ctx, "start")
    time.sleep(seconds)
    ledger(ctx, "end")
    return {"step": ctx.step_id}
