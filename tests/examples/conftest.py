"""Every example runs the way its header says, and these tests check what it produces."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from fake_server import start_fake_openai

import plaitproc

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


_DB_DIR: list[Path] = []  # set per session by the autouse fixture below


@pytest.fixture(autouse=True, scope="session")
def _private_store(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Examples run from the repository root; their runs go to a temporary database,
    never into the checkout's ./.plait."""
    _DB_DIR.append(tmp_path_factory.mktemp("examples-db"))


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PLAIT_DB", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")}
    env["PYTHONUNBUFFERED"] = "1"
    if _DB_DIR:
        env["PLAIT_DB"] = f"sqlite:///{_DB_DIR[-1] / 'plait.db'}"
    return env


def run_command(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``argv`` run from the repository root; ``python -m plait ARGS`` is forked from the
    warm process (tests/plaitproc.py), a script is started as it is."""
    if list(argv[:3]) == [sys.executable, "-m", "plait"]:
        return plaitproc.run(argv[3:], cwd=cwd or EXAMPLES.parent, env=_env(), timeout=60)
    return subprocess.run(list(argv), cwd=cwd or EXAMPLES.parent, env=_env(),
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def examples_dir() -> Path:
    return EXAMPLES


@pytest.fixture
def run_command_in_root():
    """``run_command_in_root(*argv)``: a command run from the repository root."""
    return run_command


@pytest.fixture
def run_script():
    """``run_script("parallel_research/main.py", *args)``: ``python examples/...``."""

    def run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
        return run_command(sys.executable, str(EXAMPLES / script), *args)

    return run


@pytest.fixture
def plait_run():
    """``plait_run(flow, input=None) -> (exit code, result JSON, stderr)``: runs
    ``plait run examples/<flow> --json`` from the repository root."""

    def run(flow: str, input: Any = None) -> tuple[int, dict[str, Any], str]:
        args = [sys.executable, "-m", "plait", "run", f"examples/{flow}", "--json"]
        if input is not None:
            args += ["--input", json.dumps(input)]
        proc = run_command(*args)
        assert proc.stdout, proc.stderr
        return proc.returncode, json.loads(proc.stdout), proc.stderr

    return run


@pytest.fixture
def load_example():
    """``load_example("parallel_research")``: import examples/<name>/main.py."""

    def load(name: str) -> ModuleType:
        module_name = f"plait_example_{name}"
        spec = importlib.util.spec_from_file_location(module_name,
                                                      EXAMPLES / name / "main.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture(scope="module")  # stateless: one server serves the module
def fake_openai() -> Iterator[str]:
    """The base URL of a fake OpenAI server with its default replies."""
    proc, base = start_fake_openai()
    try:
        yield base
    finally:
        proc.terminate()
        proc.communicate(timeout=10)  # closes its stdout pipe too
