"""Whole-process wall time of the `plait` command: `plait --help`, and `plait run` of a
two-step workflow file on the default store (``./.plait/plait.db``, SQLite).

    python benchmarks/cli_startup.py [--n 15] [--out FILE]

Each command runs ``--n`` times as a fresh process, alternating (help, run, help, run,
...) after one untimed warm-up of each (it writes the .pyc files and creates the
database); the figure is the median, the spread is min-max.  The workflow's steps are
``async def`` functions in a module next to the file (``first(input)``,
``second(first)``).  Every timed ``plait run`` must exit 0; one more run with ``--json``
(untimed) must report ``completed`` with the expected output.  ``PLAIT_DB`` is removed
from the environment so the default store is used.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

FLOW = """\
name: bench-two-steps
steps:
  - id: first
    type: python
    call: bench_steps:first
  - id: second
    type: python
    call: bench_steps:second
    depends_on: [first]
"""

STEPS = """\
async def first(input):
    return {"step": "first", "n": 1}


async def second(first):
    return {"step": "second", "n": 1 + first["n"]}
"""

EXPECTED = {"second": {"step": "second", "n": 2}}


class CommandFailed(Exception):
    """A timed command did not do what it should."""


def plait_command() -> str:
    """The `plait` script of the interpreter running this file (the project's venv)."""
    script = Path(sys.executable).parent / "plait"
    return str(script) if script.exists() else "plait"


def timed(cmd: list[str], cwd: str, env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise CommandFailed(f"{' '.join(cmd[1:]) or cmd[0]} exited {done.returncode}: "
                            f"{done.stderr.strip()[-300:]}")
    return wall, done.stdout


def measure(n: int) -> dict[str, Any]:
    plait = plait_command()
    env = {k: v for k, v in os.environ.items() if k != "PLAIT_DB"}
    commands = {"help": [plait, "--help"], "run": [plait, "run", "flow.yaml"]}
    with tempfile.TemporaryDirectory(prefix="plait-cli-") as tmp:
        Path(tmp, "flow.yaml").write_text(FLOW)
        Path(tmp, "bench_steps.py").write_text(STEPS)
        for cmd in commands.values():
            timed(cmd, tmp, env)  # warm-up
        walls: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(n):
            for name, cmd in commands.items():
                walls[name].append(timed(cmd, tmp, env)[0])
        _, shown = timed([plait, "run", "flow.yaml", "--json"], tmp, env)
        report = json.loads(shown)
        if report.get("status") != "completed" or report.get("output") != EXPECTED:
            raise CommandFailed(f"plait run --json reported {report.get('status')!r} with "
                                f"output {report.get('output')!r}, expected {EXPECTED!r}")
        if not Path(tmp, ".plait", "plait.db").exists():
            raise CommandFailed("plait run did not use the default store ./.plait/plait.db")
    return {"n": n, "command": plait,
            "commands": {name: " ".join(["plait", *cmd[1:]]) for name, cmd in commands.items()},
            "walls": walls,
            "median_s": {name: statistics.median(w) for name, w in walls.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=15)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    try:
        result = measure(args.n)
    except CommandFailed as exc:
        result = {"error": str(exc)}
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.write_text(text)
    else:
        print(text)
    return 1 if "error" in result else 0


if __name__ == "__main__":
    sys.exit(main())
