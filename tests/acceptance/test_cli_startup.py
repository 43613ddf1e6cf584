"""What the command loads (issue 10): ``--help`` loads click alone, ``validate`` and
``run`` of a definition without templates never load Jinja2, httpx or jsonschema, and a
run whose summary goes to a pipe never loads rich.  Checked on the modules the process
imported (``python -X importtime``), never on timings."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

TWO_STEPS = """
    name: two-steps
    steps:
      - id: make
        type: transform
        value: {n: 2}
      - id: double
        type: python
        call: startup_fns:double
        depends_on: [make]
"""
FUNCTIONS = """
    def double(make):
        return {"n": make["n"] * 2}
"""
NEVER_WITHOUT_NEED = ("jinja2", "httpx", "httpcore", "jsonschema", "pydantic", "rich.live",
                      "psycopg", "psycopg_pool")  # PostgreSQL: only for its URLs
TIMEOUT_S = 30
Imported = Callable[..., tuple[subprocess.CompletedProcess[str], set[str]]]


@pytest.fixture
def imported(tmp_path: Path, environ: dict[str, str]) -> Imported:
    """``imported(*args)``: run ``python -X importtime -m plait ARGS`` in tmp_path; the
    process and every module it imported."""

    def run(*args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
        proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "plait", *args],
                              cwd=tmp_path, env=environ, capture_output=True, text=True,
                              timeout=TIMEOUT_S)
        modules = set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$",
                                 proc.stderr, re.MULTILINE))
        assert "click" in modules  # the report was read
        return proc, modules

    return run


def loaded(modules: set[str], *names: str) -> list[str]:
    return sorted(m for m in modules if m in names or m.startswith(tuple(f"{n}." for n in names)))


def test_help_loads_neither_the_engine_nor_rich_nor_jinja2(imported: Imported) -> None:
    proc, modules = imported("--help")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Usage: plait" in proc.stdout and "validate" in proc.stdout
    assert loaded(modules, *NEVER_WITHOUT_NEED, "rich", "asyncio", "yaml", "sqlite3",
                  "plait.runtime", "plait.store", "plait.workflow", "plait.core.validate",
                  "plait.core.expressions") == []


def test_a_command_s_help_loads_no_more(imported: Imported) -> None:
    proc, modules = imported("run", "--help")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "--detach" in proc.stdout
    assert loaded(modules, "rich", "asyncio", "jinja2", "plait.runtime", "plait.store") == []


def test_validate_without_templates_loads_neither_jinja2_nor_httpx(imported: Imported,
                                                                     write) -> None:
    write("flow.yaml", TWO_STEPS)
    write("startup_fns.py", FUNCTIONS)
    proc, modules = imported("validate", "flow.yaml")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "flow.yaml: valid (workflow 'two-steps', 2 steps" in proc.stdout
    assert loaded(modules, *NEVER_WITHOUT_NEED) == []
    # validation checks imports (runtime.preflight) without the run loop or a store
    assert loaded(modules, "plait.runtime.engine", "plait.runtime.loop",
                  "plait.store.sqlite", "sqlite3") == []


def test_validate_with_templates_still_checks_them(imported: Imported, write) -> None:
    write("flow.yaml", TWO_STEPS.replace("value: {n: 2}", "value: {n: '{{ input.n + }}'}"))
    write("startup_fns.py", FUNCTIONS)
    proc, modules = imported("validate", "flow.yaml")
    assert proc.returncode == 1
    assert "steps[0].value.n" in proc.stderr
    assert "jinja2" in modules


def test_a_piped_run_without_templates_loads_no_jinja2_httpx_or_rich(
        imported: Imported, write, plait, tmp_path: Path) -> None:
    write("flow.yaml", TWO_STEPS)
    write("startup_fns.py", FUNCTIONS)
    proc, modules = imported("run", "flow.yaml")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert 'output: {"double": {"n": 4}}' in proc.stdout
    assert "run completed" in proc.stdout
    assert (tmp_path / ".plait" / "plait.db").exists()  # the default SQLite store
    assert loaded(modules, *NEVER_WITHOUT_NEED, "rich") == []
    shown = plait("runs", "--json")
    assert '"status": "completed"' in shown.stdout and '"steps_done": 2' in shown.stdout


def test_a_run_with_a_template_loads_jinja2_and_renders_it(imported: Imported,
                                                             write) -> None:
    write("flow.yaml", TWO_STEPS.replace("value: {n: 2}", "value: {n: '{{ input.n }}'}"))
    write("startup_fns.py", FUNCTIONS)
    proc, modules = imported("run", "flow.yaml", "--input", '{"n": 5}')
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert 'output: {"double": {"n": 10}}' in proc.stdout
    assert "jinja2" in modules and "httpx" not in modules
