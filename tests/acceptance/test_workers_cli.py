"""``plait worker`` processes and ``plait run --db postgresql://...``: runs
stored by the CLI are executed by worker subprocesses; a worker drains on SIGTERM and
a killed one loses nothing; LISTEN/NOTIFY wakes an idle worker long before its poll."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

import pgutil
import plaitproc

pytestmark = pytest.mark.postgres

STEPS = """
import os
import pathlib
import time

def double(x):
    return x * 2

def boom():
    raise ValueError("boom always fails")

def whoami(ctx, n):
    ctx.logger.info("attempt of %s ran in pid %d", ctx.step_id, os.getpid())
    time.sleep(0.3)  # long enough for both workers to claim some of the fan-out
    return os.getpid()

def slow(marker, seconds):
    path = pathlib.Path(marker)
    if path.exists():  # a later attempt: the first one was interrupted
        return "woke up at once"
    path.write_text("started")
    time.sleep(seconds)
    return "slept"
"""
FLOWS = {
    "chain.yaml": """
        name: chain
        steps:
          - {id: a, type: python, call: "wk_steps:double", with: {x: "{{ input.n }}"}}
          - {id: b, type: python, call: "wk_steps:double", with: {x: "{{ steps.a.output }}"},
             depends_on: [a]}
          - {id: c, type: python, call: "wk_steps:double", with: {x: "{{ steps.b.output }}"},
             depends_on: [b]}
    """,
    "fan.yaml": """
        name: fan
        steps:
          - {id: s1, type: python, call: "wk_steps:whoami", with: {n: 1}}
          - {id: s2, type: python, call: "wk_steps:whoami", with: {n: 2}}
          - {id: s3, type: python, call: "wk_steps:whoami", with: {n: 3}}
          - {id: s4, type: python, call: "wk_steps:whoami", with: {n: 4}}
          - {id: s5, type: python, call: "wk_steps:whoami", with: {n: 5}}
          - {id: s6, type: python, call: "wk_steps:whoami", with: {n: 6}}
    """,
    "fails.yaml": """
        name: fails
        defaults:
          retry: {max_retries: 0}
        steps:
          - {id: boom, type: python, call: "wk_steps:boom"}
    """,
    "slow.yaml": """
        name: slow
        defaults:
          retry: {max_retries: 2, initial_delay: 10ms}
        steps:
          - {id: nap, type: python, call: "wk_steps:slow",
             with: {marker: "{{ input.marker }}", seconds: "{{ input.seconds }}"}}
          - {id: after, type: transform, value: "{{ steps.nap.output }}", depends_on: [nap]}
    """,
}
FAST = ("--lease", "2s", "--poll", "200ms", "--grace", "10s")

Workers = Callable[..., subprocess.Popen[str]]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "wk_steps.py").write_text(STEPS)
    for name, text in FLOWS.items():
        (tmp_path / name).write_text(textwrap.dedent(text).lstrip())
    return tmp_path


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PLAIT_DB", "COLUMNS")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture
def workers(project: Path, pg_database: str) -> Iterator[Workers]:
    """``workers(*options)``: start ``plait worker --db DB --import wk_steps *options``
    in the project; whatever still runs at the end is stopped."""
    started: list[subprocess.Popen[str]] = []

    def start(*options: str) -> subprocess.Popen[str]:
        proc = plaitproc.popen(["worker", "--db", pg_database, "--import",
             "wk_steps", *options], cwd=project, env=_env(), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        started.append(proc)
        _wait(lambda: "started:" in _peek(proc), what="the worker to start", proc=proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)


_LOGS: dict[int, str] = {}


def _peek(proc: subprocess.Popen[str]) -> str:
    """What the worker logged so far (its first line is read without blocking long)."""
    import select

    assert proc.stderr is not None
    text = _LOGS.get(proc.pid, "")
    while select.select([proc.stderr], [], [], 0.05)[0]:
        line = proc.stderr.readline()
        if not line:
            break
        text += line
    _LOGS[proc.pid] = text
    return text


def _wait(condition: Callable[[], bool], *, what: str, timeout: float = 20.0,
          proc: subprocess.Popen[str] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"{what}: the process ended ({proc.returncode}): {_peek(proc)}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def plait(project: Path, db: str, *args: str) -> subprocess.CompletedProcess[str]:
    return plaitproc.run([*args, "--db", db], cwd=project,
                          env=_env(), timeout=60)


def show(project: Path, db: str, run_id: str) -> dict:
    proc = plait(project, db, "show", run_id, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def detach(project: Path, db: str, flow: str, value: object) -> str:
    proc = plait(project, db, "run", flow, "--detach", "--json", "--input", json.dumps(value))
    assert proc.returncode == 0, proc.stderr
    submitted = json.loads(proc.stdout)
    assert submitted["status"] == "pending"
    return str(submitted["run_id"])


def settled(project: Path, db: str, run_id: str, timeout: float = 30.0) -> dict:
    final = ("completed", "failed", "cancelled")
    _wait(lambda: pgutil.run_status(db, run_id) in final,
          what=f"run {run_id} to end", timeout=timeout)
    return show(project, db, run_id)


def test_two_workers_complete_detached_runs(project: Path, pg_database: str,
                                            workers: Workers) -> None:
    workers(*FAST, "--concurrency", "2")
    workers(*FAST, "--concurrency", "2")
    ids = {n: detach(project, pg_database, "chain.yaml", {"n": n}) for n in range(1, 6)}
    for n, run_id in ids.items():
        shown = settled(project, pg_database, run_id)
        assert shown["status"] == "completed", shown
        assert shown["output"] == {"c": n * 8}
        assert all(s["attempts"] == 1 for s in shown["steps"].values())


def test_history_names_the_worker_that_executed_each_attempt_and_keeps_its_logs(
        project: Path, pg_database: str, workers: Workers) -> None:
    """One worker drives the run, both execute its attempts: each attempt's worker is
    the process that ran it, never the driver's name, and the records
    each step wrote through ctx.logger on its worker are in the run's history."""
    pids = {workers(*FAST, "--concurrency", "2").pid, workers(*FAST, "--concurrency", "2").pid}
    run_id = detach(project, pg_database, "fan.yaml", {})
    shown = settled(project, pg_database, run_id)
    assert shown["status"] == "completed", shown
    ran_in = {step: shown["steps"][step]["output"] for step in shown["steps"]}
    assert set(ran_in.values()) == pids, f"both workers should have run steps: {ran_in}"
    assert sorted((a["step"], a["attempt"], a["status"]) for a in shown["attempts"]) == [
        (s, 1, "completed") for s in sorted(ran_in)]
    for attempt in shown["attempts"]:
        assert str(attempt["worker"]).endswith(f":{ran_in[attempt['step']]}"), attempt
    logged = {(log["step"], log["attempt"], log["level"], log["message"])
              for log in shown["logs"]}
    assert logged == {(s, 1, "INFO", f"attempt of {s} ran in pid {pid}")
                      for s, pid in ran_in.items()}


def test_following_a_run_prints_its_result_and_exit_code(project: Path, pg_database: str,
                                                         workers: Workers) -> None:
    workers(*FAST)
    good = plait(project, pg_database, "run", "chain.yaml", "--json", "--input", '{"n": 5}')
    assert good.returncode == 0, good.stderr
    result = json.loads(good.stdout)
    assert result["status"] == "completed" and result["output"] == {"c": 40}
    assert "its steps run on the workers" in good.stderr
    plain = plait(project, pg_database, "run", "chain.yaml", "--input", '{"n": 1}')
    assert plain.returncode == 0 and "completed" in plain.stdout
    bad = plait(project, pg_database, "run", "fails.yaml", "--json")
    assert bad.returncode == 1, bad.stderr
    failed = json.loads(bad.stdout)
    assert failed["status"] == "failed"
    assert "boom always fails" in failed["steps"]["boom"]["error"]


def test_the_following_process_never_executes_steps(project: Path,
                                                    pg_database: str) -> None:
    """No worker: the run stays pending, so the CLI did not run it itself (and says
    that a worker is needed); Ctrl-C then cancels it."""
    proc = plaitproc.popen(["run", "chain.yaml", "--db", pg_database, "--json",
         "--input", '{"n": 1}'], cwd=project, env=_env(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    _wait(lambda: "is stored; its steps run on the workers" in _peek(proc),
          what="the run to be stored", proc=proc)
    time.sleep(0.5)  # a few of its polls: a CLI that ran steps itself would have begun
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 1, _LOGS.pop(proc.pid, "") + err
    result = json.loads(out)
    assert result["status"] == "cancelled"
    assert all(s["attempts"] == 0 for s in result["steps"].values())


def test_sigterm_drains_after_the_running_step(project: Path, pg_database: str,
                                               workers: Workers) -> None:
    marker = project / "nap.txt"
    first = workers(*FAST)
    run_id = detach(project, pg_database, "slow.yaml", {"marker": str(marker), "seconds": 2})
    _wait(marker.exists, what="the slow step to start", proc=first)
    first.send_signal(signal.SIGTERM)
    second = workers(*FAST)  # started after the step was claimed by the first
    out, err = first.communicate(timeout=20)
    assert first.returncode == 0, err
    assert "draining" in err and "drained and stopped" in err
    shown = settled(project, pg_database, run_id)
    assert shown["status"] == "completed" and shown["output"] == {"after": "slept"}
    assert shown["steps"]["nap"]["attempts"] == 1  # the step finished on the first
    assert second.poll() is None


def test_a_killed_worker_loses_nothing(project: Path, pg_database: str,
                                       workers: Workers) -> None:
    marker = project / "nap.txt"
    doomed = workers(*FAST)
    run_id = detach(project, pg_database, "slow.yaml", {"marker": str(marker), "seconds": 30})
    _wait(marker.exists, what="the slow step to start", proc=doomed)
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.wait(timeout=10)
    workers(*FAST)
    shown = settled(project, pg_database, run_id)
    assert shown["status"] == "completed", shown
    assert shown["output"] == {"after": "woke up at once"}
    attempts = [(a["step"], a["attempt"], a["status"]) for a in shown["attempts"]]
    assert attempts == [("nap", 1, "failed"), ("nap", 2, "completed"),
                        ("after", 1, "completed")]
    assert shown["steps"]["nap"]["attempts"] == 2


def test_import_failure_exits_2_naming_the_module(project: Path, pg_database: str) -> None:
    proc = plait(project, pg_database, "worker", "--import", "nosuchmodule")
    assert proc.returncode == 2
    assert "nosuchmodule" in proc.stderr and "Traceback" not in proc.stderr


# imported by the worker (--import) before it starts: its claims always fail with what
# no store raises, and it gives up after three quick failures
BROKEN_CLAIMS = """
from plait.runtime import worker
from plait.store.postgres import PostgresStore

worker.RESTARTS = worker.Restarts(first=0.05, most=0.1, limit=3)


async def claim_attempts(self, *args, **kwargs):
    raise RuntimeError("claiming is broken (injected)")


PostgresStore.claim_attempts = claim_attempts
"""


def test_a_worker_whose_loop_keeps_failing_exits_1_with_the_tracebacks(
        project: Path, pg_database: str) -> None:
    (project / "broken_claims.py").write_text(BROKEN_CLAIMS)
    proc = plaitproc.run(["worker", "--db", pg_database, "--import",
         "wk_steps", "--import", "broken_claims", *FAST], cwd=project, env=_env(), timeout=60)  # it stops by itself
    assert proc.returncode == 1, proc.stderr
    err = proc.stderr
    assert err.count("its claim loop failed; restarting it") == 2, err
    assert "its claim loop failed 3 times in a row; the worker drains and stops" in err
    assert err.count("RuntimeError: claiming is broken (injected)") >= 3, err
    assert "Traceback" in err and "drained and stopped" not in err


def _worker_process(project: Path, db: str) -> subprocess.Popen[str]:
    return plaitproc.popen(["worker", "--db", db, "--import", "wk_steps",
         *FAST], cwd=project, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)


def test_a_worker_waits_for_an_unreachable_store_until_sigterm(project: Path) -> None:
    """Nothing listens on the port: the worker retries with a backoff, logging each
    failure with the password hidden, and SIGTERM ends the wait with exit 0.  A bad
    URL is still bad usage (exit 2, at once)."""
    port = pgutil._free_port()
    proc = _worker_process(project, f"postgresql://plait:s3cret@127.0.0.1:{port}/nowhere")
    try:
        _wait(lambda: _peek(proc).count("cannot be reached") >= 2,
              what="two logged connection failures", proc=proc)
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    err = _LOGS.pop(proc.pid, "") + rest
    assert proc.returncode == 0, err
    assert "s3cret" not in err and "plait:***@127.0.0.1" in err
    assert "attempt 1:" in err and "attempt 2:" in err and "retrying in 1s" in err
    assert "stopped before the store" in err and "Traceback" not in err
    bad = plait(project, "mysql://127.0.0.1/x", "worker")
    assert bad.returncode == 2 and "mysql" in bad.stderr


def test_a_worker_started_before_its_database_connects_when_it_is_up(
        project: Path) -> None:
    server = pgutil.PrivateServer.make()  # made, not started: nothing on its port yet
    proc = _worker_process(project, server.url())
    try:
        _wait(lambda: "cannot be reached" in _peek(proc), what="a connection failure",
              proc=proc)
        server.start()
        _wait(lambda: "started:" in _peek(proc), what="the worker to connect", proc=proc)
        proc.send_signal(signal.SIGTERM)
        _, rest = proc.communicate(timeout=20)
        assert proc.returncode == 0, _LOGS.pop(proc.pid, "") + rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
        server.remove()


def test_memory_store_is_refused(project: Path) -> None:
    proc = plait(project, "memory://", "worker")
    assert proc.returncode == 2
    assert "other processes share" in proc.stderr


@pytest.mark.parametrize("lease, shown", [("500ms", "'500ms'"), ("0.9", "'0.9' (900ms)"),
                                          ("999ms", "'999ms'")])
def test_a_lease_under_a_second_is_refused(project: Path, lease: str, shown: str) -> None:
    """A driven run's lease is renewed every half second: a shorter lease than 1s runs
    out between renewals, so the worker refuses it before it starts (bad usage)."""
    proc = plait(project, f"sqlite:///{project / 'w.db'}", "worker", "--lease", lease)
    assert proc.returncode == 2, proc.stderr
    assert "--lease" in proc.stderr and shown in proc.stderr
    assert "the minimum of 1s" in proc.stderr
    assert not (project / "w.db").exists()  # refused before opening the store


def test_a_lease_of_one_second_is_taken(project: Path, pg_database: str,
                                        workers: Workers) -> None:
    proc = workers("--lease", "1s", "--poll", "200ms")
    assert "lease 1s" in _peek(proc)
    run_id = detach(project, pg_database, "chain.yaml", {"n": 1})
    assert settled(project, pg_database, run_id)["status"] == "completed"


def test_polling_workers_complete_runs(project: Path, pg_database: str,
                                       workers: Workers) -> None:
    """--no-listen: every notification is lost; polling alone moves the run
    (--no-eager: each step a ticket to claim, each outcome an inbox row to read)."""
    proc = workers("--no-listen", "--no-eager", "--lease", "2s", "--poll", "200ms")
    assert "no eager attempts" in _peek(proc)
    run_id = detach(project, pg_database, "chain.yaml", {"n": 3})
    shown = settled(project, pg_database, run_id)
    assert shown["status"] == "completed" and shown["output"] == {"c": 24}


def test_a_notification_wakes_an_idle_worker(project: Path, pg_database: str,
                                             workers: Workers) -> None:
    """poll 5 s: a 3-step chain (a run to take and, with --no-eager, three tickets to
    claim and three outcomes to read) would take 15 s or more on polling alone."""
    workers("--lease", "10s", "--poll", "5s", "--no-eager")
    _wait(lambda: _listening(pg_database), what="the worker's LISTEN connection")
    started = time.monotonic()
    proc = plait(project, pg_database, "run", "chain.yaml", "--json", "--input", '{"n": 2}')
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["output"] == {"c": 16}
    assert elapsed < 4.0, elapsed


def _listening(db: str) -> bool:
    """Whether a session of ``db`` has run LISTEN (a worker's wake-up connection)."""
    with psycopg.connect(db, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                           "current_database() AND query LIKE 'LISTEN %'").fetchone()
    return row is not None and row[0] > 0
