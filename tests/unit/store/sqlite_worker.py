"""A process that shares one SQLite file with others (used by test_sqlite_processes).

    python sqlite_worker.py writer URL NAME RUNS   run RUNS workflows, print their ids
    python sqlite_worker.py reader URL STOPFILE    read everything until STOPFILE exists
    python sqlite_worker.py long URL NAME STEPS    run one chain of STEPS steps (to kill)
    python sqlite_worker.py claimer URL NAME GO    once GO exists, claim tickets until
                                                  none is left, complete each, print
                                                  what it claimed

Any error is printed on stderr and the exit status is 1.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from plait import Workflow
from plait.store import RunFilter, open_store
from plait.store.base import InboxOutcome


async def noop() -> dict[str, str]:
    return {"by": sys.argv[3]}


def workflows() -> list[Workflow]:
    """The same definitions in every writer: saving them concurrently must keep one
    version each."""
    fan = Workflow("fan")
    fan.add_step("src", noop)
    for i in range(40):
        fan.add_step(f"m{i}", noop, depends_on=["src"])
    fan.add_step("sink", noop, depends_on=[f"m{i}" for i in range(40)])
    chain = Workflow("chain")
    for i in range(25):
        chain.add_step(f"s{i}", noop, depends_on=[f"s{i - 1}"] if i else [])
    return [fan, chain]


async def write(url: str, name: str, runs: int) -> None:
    done = []
    flows = workflows()
    for n in range(runs):
        wf = flows[n % len(flows)]
        result = await wf.run_async({}, db=url, run_id=f"{name}-{n}")
        if result.status != "completed":
            raise RuntimeError(f"run {result.run_id} ended {result.status}: {result.error}")
        done.append(result.run_id)
    print(json.dumps(done))


async def read(url: str, stop: Path) -> None:
    store = open_store(url)  # the reader may be the process that creates the file
    await store.open()
    reads = 0
    try:
        while not stop.exists():
            for run in await store.list_runs(RunFilter(limit=20)):
                steps = await store.get_steps(run.run_id)
                events = await store.get_events(run.run_id)
                await store.get_attempts(run.run_id)
                seqs = [e.seq for e in events]
                if seqs != list(range(1, len(seqs) + 1)):
                    raise RuntimeError(f"run {run.run_id}: events {seqs} have gaps")
                if not steps:
                    raise RuntimeError(f"run {run.run_id} has no steps")
                reads += 4
            await store.list_workflows()
            reads += 2
    finally:
        await store.close()
    print(json.dumps({"reads": reads}))


async def long_chain(url: str, name: str, steps: int) -> None:
    from plait.core.model import Limits

    chain = Workflow("long", limits=Limits(max_depth=steps + 1))
    for i in range(steps):
        chain.add_step(f"s{i}", noop, depends_on=[f"s{i - 1}"] if i else [])
    await chain.run_async({}, db=url, run_id=name)


async def claim(url: str, name: str, go: Path) -> None:
    store = open_store(url)
    await store.open()
    claimed = []
    try:
        (go.parent / f"ready-{name}").touch()  # the test starts every claimer at once
        while not go.exists():
            await asyncio.sleep(0.005)
        while leases := await store.claim_attempts(name, 2, 30.0):
            await asyncio.sleep(0.005)  # the work: the others claim meanwhile
            done = await store.complete_attempts(name, [(lease.token, InboxOutcome(
                run_id=lease.run_id, step_id=lease.step_id, attempt=lease.attempt,
                kind="ok", output={"by": name}, at=0.0)) for lease in leases])
            if not all(done):
                raise RuntimeError(f"{name}: a completion of its own lease was refused")
            claimed += [[lease.run_id, lease.step_id, lease.token] for lease in leases]
    finally:
        await store.close()
    print(json.dumps(claimed))


def main() -> None:
    role, url = sys.argv[1], sys.argv[2]
    if role == "claimer":
        asyncio.run(claim(url, sys.argv[3], Path(sys.argv[4])))
    elif role == "writer":
        asyncio.run(write(url, sys.argv[3], int(sys.argv[4])))
    elif role == "long":
        asyncio.run(long_chain(url, sys.argv[3], int(sys.argv[4])))
    else:
        asyncio.run(read(url, Path(sys.argv[3])))


if __name__ == "__main__":
    main()
