"""The shipped fake OpenAI server, started for a test as its header says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def start_fake_openai(*args: str, env: dict[str, str] | None = None
                      ) -> tuple[subprocess.Popen[str], str]:
    """The shipped fake OpenAI server on a free port, started as its header says (more
    ``args``, e.g. ``--replies FILE``): the process and its base URL."""
    proc = subprocess.Popen([sys.executable, "-m", "examples.fake_openai.server",
                             "--port", "0", *args], cwd=ROOT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("fake OpenAI server on "), line
    return proc, line.split(" on ", 1)[1].strip()
