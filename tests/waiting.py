"""Waiting for a state instead of sleeping a fixed time: poll a condition until it holds,
and fail the test, naming what it waited for, when it has not by the deadline.

``wait_until`` for plain tests (threads, processes, HTTP clients); ``until`` inside an
event loop, where the condition may be a coroutine function (a store read).  The
acceptance tests' ``wait_for`` (tests/acceptance/conftest.py) also reports a process
that ended while it waited.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable

import pytest


def wait_until(condition: Callable[[], object], *, what: str, timeout: float = 10.0,
               every: float = 0.02) -> None:
    """Poll ``condition`` every ``every`` seconds until it is true; fail the test after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


async def until(condition: Callable[[], Awaitable[object] | object], *, what: str,
                timeout: float = 10.0, every: float = 0.01) -> None:
    """``wait_until`` for async tests: the event loop runs on between polls."""
    deadline = time.monotonic() + timeout
    while True:
        held = condition()
        if inspect.isawaitable(held):
            held = await held
        if held:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(every)
