"""Rendering a template off the event loop (a render never stalls the run: docs/expressions.md).

Used for every template that is not cheap: a step's fields (``StepCall.rendered``), a
deferred ``when`` and the run's ``output`` (the run loop)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import ParamSpec, TypeVar

from ..core.expressions import Stop

P = ParamSpec("P")
T = TypeVar("T")


def snapshot(names: Mapping[str, object]) -> dict[str, object]:
    """The names a render in a thread reads: the loop goes on writing the shared
    ``state`` meanwhile, so the thread gets a copy of it."""
    copied = dict(names)
    state = copied.get("state")
    if isinstance(state, dict):
        copied["state"] = dict(state)
    return copied


async def in_thread(stop: Stop, fn: Callable[P, T], /, *args: P.args,
                    **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)`` in a worker thread.  Cancelling the awaiting task sets
    ``stop``, so the render ends at the sandbox's next check; the cancellation goes on."""
    try:
        return await asyncio.to_thread(fn, *args, **kwargs)
    except asyncio.CancelledError:
        stop.requested = True
        raise
