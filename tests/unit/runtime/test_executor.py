"""The wake-ups of a worker's loops (runtime/executor.py): a loop waiting for one is
cancelled even when the wake-up comes at the same moment, so a worker stopped at once
stops."""

from __future__ import annotations

import asyncio

import pytest

from plait.runtime.executor import wait_woken


@pytest.mark.parametrize("turns", [0, 1, 2, 3])
async def test_a_cancellation_coming_with_a_wake_up_is_not_lost(turns: int) -> None:
    event = asyncio.Event()

    async def loop() -> None:  # as the claim and drive loops wait
        while True:
            await wait_woken(event, 10.0)
            event.clear()
    task = asyncio.create_task(loop())
    await asyncio.sleep(0)
    event.set()
    for _ in range(turns):
        await asyncio.sleep(0)
    task.cancel()
    await asyncio.wait([task], timeout=5.0)
    assert task.cancelled()


async def test_a_wake_up_ends_the_wait_and_so_does_the_time() -> None:
    event = asyncio.Event()
    event.set()
    await asyncio.wait_for(wait_woken(event, 10.0), 5.0)  # set: at once
    event.clear()
    await asyncio.wait_for(wait_woken(event, 0.01), 5.0)  # not set: after the time
