"""A scheduler in a process of its own (used by test_schedules_processes).

    python schedule_ticker.py URL START PACE NOW...

Ticks once at each NOW (seconds since the epoch: a simulated clock), the k-th tick when
the wall clock reaches START + k * PACE, so that processes started together tick each
NOW at the same moment; prints the fire times of the runs it created as a JSON list.  Any error goes to stderr, exit status 1.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from plait.runtime.scheduler import Scheduler
from plait.store import open_store


async def main(url: str, start: float, pace: float, ticks: list[float]) -> None:
    store = open_store(url)
    await store.open()
    try:
        scheduler = Scheduler(store)
        created = []
        for k, now in enumerate(ticks):
            await asyncio.sleep(max(0.0, start + k * pace - time.time()))
            created += [s.fire_time for s in (await scheduler.tick(now)).created]
        print(json.dumps(created))
    finally:
        await store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], float(sys.argv[2]), float(sys.argv[3]),
                     [float(a) for a in sys.argv[4:]]))
