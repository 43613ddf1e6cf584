"""An outcome no store could hold, through the command line: ``plait run`` on SQLite,
and two ``plait worker --no-eager`` processes on PostgreSQL.

A step that logs a file name decoded with ``surrogateescape`` completes (its record
cleaned), one raising an exception whose ``retry_after`` is NaN, or one carrying bytes
and an infinity, fails naming its exception; the run ends (never left ``running``) and
every other run completes.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import plaitproc

STEPS = '''
class MyError(Exception):
    def __init__(self, data, retry_after):
        super().__init__(data, retry_after)
        self.data, self.retry_after = data, retry_after

def logs_surrogate(ctx):
    ctx.logger.info("processing %s", b"report-\\xff.csv".decode("utf-8", "surrogateescape"))
    return {"done": True}

def nan_retry_after():
    raise MyError("the service said: later", float("nan"))

def bytes_and_infinity():
    raise MyError(b"\\xff", float("inf"))

def double(x):
    return x * 2
'''
FLOW = """
name: {name}
defaults:
  retry: {{max_retries: 1, initial_delay: 10ms, jitter: 0}}
steps:
  - {{id: bad, type: python, call: "poison_steps:{name}"}}
  - {{id: good, type: python, call: "poison_steps:double", with: {{x: 21}}}}
"""
GOOD = """
name: good
steps:
  - {id: a, type: python, call: "poison_steps:double", with: {x: "{{ input.n }}"}}
  - {id: b, type: python, call: "poison_steps:double", with: {x: "{{ steps.a.output }}"},
     depends_on: [a]}
"""
TRIGGERS = {  # the trigger -> how its run and its step end, and the step's error
    "logs_surrogate": ("completed", None),
    "nan_retry_after": ("failed", "MyError: ('the service said: later', nan)"),
    "bytes_and_infinity": ("failed", "MyError: (b'\\xff', inf)"),
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "poison_steps.py").write_text(STEPS)
    for name in TRIGGERS:
        (tmp_path / f"{name}.yaml").write_text(FLOW.format(name=name))
    (tmp_path / "good.yaml").write_text(textwrap.dedent(GOOD).lstrip())
    return tmp_path


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PLAIT_DB", "COLUMNS")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def plait(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return plaitproc.run([*args], cwd=project, env=_env(), timeout=60)


def check(shown: dict, trigger: str) -> None:
    status, error = TRIGGERS[trigger]
    assert shown["status"] == status, shown
    assert shown["steps"]["good"]["status"] == "completed"
    bad = shown["steps"]["bad"]
    assert (bad["status"], bad["error"]) == (status, error), bad
    assert bad["attempts"] == (1 if status == "completed" else 2)


def test_plait_run_on_sqlite_ends_every_trigger(project: Path) -> None:
    db = f"sqlite:///{project / 'runs.db'}"
    for trigger, (status, _) in TRIGGERS.items():
        proc = plait(project, "run", f"{trigger}.yaml", "--db", db, "--json")
        assert proc.returncode == (0 if status == "completed" else 1), proc.stderr
        check(json.loads(proc.stdout), trigger)
    runs = json.loads(plait(project, "runs", "--db", db, "--json").stdout)["runs"]
    assert {r["status"] for r in runs} == {"completed", "failed"}  # none left running


# ---------------------------------------------------------------- PostgreSQL


@pytest.fixture
def no_eager_workers(project: Path, pg_database: str) -> Iterator[None]:
    procs = [plaitproc.popen(["worker", "--db", pg_database, "--import",
         "poison_steps", "--no-eager", "--concurrency", "2", "--lease", "2s", "--poll",
         "200ms", "--grace", "5s"], cwd=project, env=_env(), stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        yield
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            _, err = proc.communicate(timeout=20)
            assert "storing" not in err, err  # no completion was ever refused


def settled(project: Path, db: str, run_ids: list[str],
            timeout: float = 30.0) -> dict[str, str]:
    """Each run's final status, once every one has ended."""
    deadline = time.monotonic() + timeout
    while True:
        proc = plait(project, "runs", "--db", db, "--json")
        assert proc.returncode == 0, proc.stderr
        status = {r["run_id"]: r["status"] for r in json.loads(proc.stdout)["runs"]}
        if all(status[r] in ("completed", "failed", "cancelled") for r in run_ids):
            return status
        assert time.monotonic() < deadline, status
        time.sleep(0.2)


def show(project: Path, db: str, run_id: str) -> dict:
    proc = plait(project, "show", run_id, "--db", db, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


@pytest.mark.postgres
@pytest.mark.usefixtures("no_eager_workers")
def test_two_no_eager_workers_end_every_trigger_and_every_other_run(
        project: Path, pg_database: str) -> None:
    def detach(flow: str, value: object) -> str:
        proc = plait(project, "run", flow, "--db", pg_database, "--detach", "--json",
                     "--input", json.dumps(value))
        assert proc.returncode == 0, proc.stderr
        return str(json.loads(proc.stdout)["run_id"])

    poisoned = {detach(f"{trigger}.yaml", {}): trigger for trigger in TRIGGERS}
    good = [detach("good.yaml", {"n": n}) for n in range(1, 3)]
    status = settled(project, pg_database, [*poisoned, *good])
    assert [status[run_id] for run_id in good] == ["completed", "completed"]
    for run_id, trigger in poisoned.items():
        check(show(project, pg_database, run_id), trigger)
