"""One process of ``agent_loop.py``: one engine, one job; prints one JSON line.

    python agent_child.py ENGINE overhead --db DB [--repeats 3] [--warmup 1]
    python agent_child.py ENGINE start --db DB --run-id ID
    python agent_child.py ENGINE resume --db DB --run-id ID

ENGINE is ``plait`` (``plait_agent``), ``langgraph`` (``peers/langgraph_agent``) or
``dbos`` (``peers/dbos_agent``): a module with ``opened(db)``, an async context
manager giving a runner with ``start(run_id, input)`` and ``resume(run_id)``.  It is
imported after the arguments are read, by the interpreter the parent chose (plait's
venv or the peers' one).

- ``overhead``: the engine opened once (not timed), then ``warmup + repeats`` times the
  bare loop (``agent_calls.bare_loop``) and a run of the engine's loop, alternating
  which goes first; each must return ``agent_calls.expected_output()``.  Prints the
  seconds of each.
- ``start``: starts run ID and runs it (the parent kills this process mid-loop).
- ``resume``: notes ``ready`` in the calls log once the engine's modules are imported,
  then continues run ID and prints its output.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
for folder in (HERE, HERE / "peers"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from agent_calls import TURNS, bare_loop, expected_output, note  # noqa: E402

MODULES = {"plait": "plait_agent", "langgraph": "langgraph_agent", "dbos": "dbos_agent"}


def checked(engine: str, output: Any) -> Any:
    if output != expected_output():
        raise SystemExit(f"{engine}: the loop returned {output!r}, expected "
                         f"{expected_output()!r}")
    return output


async def overhead(engine: str, module: Any, db: str, repeats: int,
                   warmup: int) -> dict[str, Any]:
    bare: list[float] = []
    timed: list[float] = []
    async with module.opened(db) as runner:
        for i in range(warmup + repeats):
            times: dict[str, float] = {}
            for which in (("bare", "engine") if i % 2 == 0 else ("engine", "bare")):
                started = time.perf_counter()
                if which == "bare":
                    checked("bare", await bare_loop())
                else:
                    checked(engine, await runner.start(f"loop-{os.getpid()}-{i}",
                                                       {"turns": TURNS}))
                times[which] = time.perf_counter() - started
            if i >= warmup:
                bare.append(times["bare"])
                timed.append(times["engine"])
    return {"bare": bare, "engine": timed}


async def start(module: Any, db: str, run_id: str) -> dict[str, Any]:
    async with module.opened(db) as runner:
        return {"output": await runner.start(run_id, {"turns": TURNS})}


async def resume(engine: str, module: Any, db: str, run_id: str) -> dict[str, Any]:
    async with module.opened(db) as runner:
        return {"output": checked(engine, await runner.resume(run_id))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("engine", choices=sorted(MODULES))
    parser.add_argument("mode", choices=["overhead", "start", "resume"])
    parser.add_argument("--db", required=True)
    parser.add_argument("--run-id", default="agent-run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    args = parser.parse_args()
    module = importlib.import_module(MODULES[args.engine])
    if args.mode == "overhead":
        result = asyncio.run(overhead(args.engine, module, args.db, args.repeats,
                                      args.warmup))
    elif args.mode == "start":
        result = asyncio.run(start(module, args.db, args.run_id))
    else:
        note("ready", "resume")
        result = asyncio.run(resume(args.engine, module, args.db, args.run_id))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
