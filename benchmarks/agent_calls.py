"""The agent loop's mocked model and tool, shared by every engine (stdlib only: it is
imported by plait's venv and by the peers' venv alike).

The model answers after ``MODEL_SECONDS`` (an ``asyncio.sleep``: the same fake for
every engine) with the tool to call next; the tool adds two numbers at once.  A loop of
``TURNS`` turns is: model(turn, total) -> {"tool": "add", "args": [total, turn]},
tool(args) -> {"total": ...}; its output is ``{"turns": TURNS, "total": ...}``, which
every engine's run must return (``expected_output``).

When ``AGENT_CALLS_LOG`` names a file, every call appends ``<unix time> start|done
<name> <pid>`` lines to it (one ``write`` of a line opened for appending), which is how
``agent_loop.py`` counts the calls a resumed run makes again and when the first one
after a resume starts.  The overhead runs leave it unset.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

MODEL_SECONDS = 0.05
TURNS = 10
LOG_ENV = "AGENT_CALLS_LOG"


def note(event: str, name: str) -> None:
    """Append one line to the calls log, when there is one."""
    path = os.environ.get(LOG_ENV)
    if path:
        with open(path, "a") as f:
            f.write(f"{time.time():.6f} {event} {name} {os.getpid()}\n")


async def model(turn: int, total: int) -> dict[str, Any]:
    """The mocked model: 50 ms, then the tool call it wants."""
    name = f"model-{turn}"
    note("start", name)
    await asyncio.sleep(MODEL_SECONDS)
    note("done", name)
    return {"turn": turn, "tool": "add", "args": [total, turn]}


async def tool(turn: int, reply: dict[str, Any]) -> dict[str, Any]:
    """The tool the model asks for: adds its two arguments."""
    name = f"tool-{turn}"
    note("start", name)
    assert reply["tool"] == "add", reply
    a, b = reply["args"]
    note("done", name)
    return {"total": a + b}


async def bare_loop(turns: int = TURNS) -> dict[str, Any]:
    """The floor: the same calls in a plain ``async def``, nothing stored."""
    total = 0
    for turn in range(1, turns + 1):
        reply = await model(turn, total)
        total = (await tool(turn, reply))["total"]
    return {"turns": turns, "total": total}


def expected_output(turns: int = TURNS) -> dict[str, Any]:
    return {"turns": turns, "total": turns * (turns + 1) // 2}
