"""Step bodies for ``benchmarks/cluster.py``, imported by ``plait worker --import``.

``body`` is the benchmarks' one step body (``workloads.step_value``: it takes its
parents' outputs and returns a JSON object) plus two clock readings a user could log
too: when the body started and when it returned, on the host's clock (every worker of
the benchmark runs on this host, so the readings of two steps compare).  From them the
harness measures what a user waits for: the time from a parent's return to its
child's start, which spans the completion's commit, the driver applying it, the
child's dispatch and a worker claiming it.

``slow`` sleeps first (``input.sleep`` seconds, default 0) after writing its process
id to ``input.pidfile``: the step a recovery measurement kills its worker under.
"""

from __future__ import annotations

import os
import time
from typing import Any

from workloads import step_value


def body(ctx: Any) -> dict[str, Any]:
    started = time.time()
    value = step_value(ctx.step_id, [o for o in ctx.outputs.values() if o is not None])
    value["t0"] = started
    value["t1"] = time.time()
    value["pid"] = os.getpid()  # which worker ran it
    return value


def slow(ctx: Any) -> dict[str, Any]:
    started = time.time()
    given = ctx.input or {}
    if given.get("pidfile"):  # who runs it: the recovery measurement kills that process
        with open(given["pidfile"], "w") as f:
            f.write(str(os.getpid()))
    seconds = float(given.get("sleep", 0))
    time.sleep(seconds)
    value = step_value(ctx.step_id, [o for o in ctx.outputs.values() if o is not None])
    value["t0"] = started
    value["t1"] = time.time()
    value["attempt"] = ctx.attempt
    return value


def head(ctx: Any) -> dict[str, Any]:
    """The first step of ``cluster.py``'s big chain: returns a JSON object of about
    ``input.first_bytes`` bytes (a string field padded to that size), as a step that
    fetched a document would."""
    started = time.time()
    size = int((ctx.input or {}).get("first_bytes", 100))
    value = step_value(ctx.step_id, [])
    value["doc"] = "x" * max(0, size - 60)  # the other fields take about 60 bytes
    value["t0"] = started
    value["t1"] = time.time()
    return value


def relay(ctx: Any) -> dict[str, Any]:
    """Every later step of the big chain: reads its parent's output (the document's
    size, its count) and returns a small object."""
    started = time.time()
    parents = [o for o in ctx.outputs.values() if o is not None]
    value = step_value(ctx.step_id, parents)
    value["seen"] = max((len(p.get("doc", "")) for p in parents), default=0)
    value["t0"] = started
    value["t1"] = time.time()
    return value
