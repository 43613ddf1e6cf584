"""The command line against PostgreSQL: ``plait run FILE --db
postgresql://...`` (the run executes on a ``plait worker`` of the module) and every command that
reads or changes stored runs, on the same database, with the outputs and exit codes of
the SQLite tests.  The store URL is given as ``PLAIT_DB``, except where a test passes
``--db``; every module's database is its own (``pg_database``)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import textwrap
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

import pgutil
from conftest import plait_worker

pytestmark = pytest.mark.postgres

ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
STEPS = """
import pathlib
import time


def nap(seconds):
    time.sleep(seconds)
    return seconds


def boom():
    raise ValueError("boom always fails")


def flaky(value, flag):
    if not pathlib.Path(flag).exists():
        raise RuntimeError("the flag file is missing")
    return value * 2


def sleepy(marker, seconds=30):
    path = pathlib.Path(marker)
    if path.exists():  # a later attempt: the first one was interrupted
        return "woke up at once"
    path.write_text("started")
    time.sleep(seconds)
    return "woke up"
"""
FLOWS = {
    "good.yaml": """
        name: good
        steps:
          - {id: fetch, type: python, call: "pg_steps:nap", with: {seconds: 0.05}}
          - {id: total, type: transform, value: "{{ steps.fetch.output * 2 }}",
             depends_on: [fetch]}
    """,
    "bad.yaml": """
        name: bad
        sla: 10ms
        defaults:
          retry: {max_retries: 1, initial_delay: 10ms}
        alerts: ["success_rate < 0.9"]
        steps:
          - {id: nap, type: python, call: "pg_steps:nap", with: {seconds: 0.03}}
          - {id: boom, type: python, call: "pg_steps:boom", depends_on: [nap]}
          - {id: after, type: transform, value: 1, depends_on: [boom]}
    """,
    "wait.yaml": """
        name: wait
        steps:
          - {id: draft, type: transform, value: hello}
          - {id: sign_off, type: approval, prompt: "ok?", depends_on: [draft]}
          - {id: ship, type: transform, value: "{{ steps.sign_off.output.data }}",
             depends_on: [sign_off]}
    """,
    "retried.yaml": """
        name: retried
        defaults:
          retry: {max_retries: 0}
        steps:
          - {id: fetch, type: transform, value: 21}
          - {id: flaky, type: python, call: "pg_steps:flaky",
             with: {value: "{{ steps.fetch.output }}", flag: "{{ input.flag }}"},
             depends_on: [fetch]}
    """,
    "slow.yaml": """
        name: slow
        steps:
          - {id: first, type: transform, value: 1}
          - {id: sleepy, type: python, call: "pg_steps:sleepy",
             with: {marker: "{{ input.marker }}", seconds: "{{ input.seconds }}"},
             depends_on: [first]}
          - {id: after, type: transform, value: 2, depends_on: [sleepy]}
    """,
}
Run = Callable[..., subprocess.CompletedProcess[str]]


@dataclass
class Cli:
    """``plait`` in a directory holding the definitions, with PLAIT_DB = the module's
    PostgreSQL database."""

    run_in: Run
    db: str
    cwd: Path

    def __call__(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return self.run_in(*args, cwd=self.cwd, env={"PLAIT_DB": self.db, **env})

    def json(self, *args: str) -> dict:
        proc = self(*args, "--json")
        assert proc.returncode in (0, 1, 3), proc.stderr
        return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory, plait_in: Run,
        pg_database: str) -> Iterator[Cli]:
    """The directory, and a ``plait worker`` on the database for the module: with
    PostgreSQL, ``plait run`` stores the run and the workers execute it."""
    cwd = tmp_path_factory.mktemp("pgcli")
    (cwd / "pg_steps.py").write_text(STEPS)
    for name, text in FLOWS.items():
        (cwd / name).write_text(textwrap.dedent(text).lstrip())
    with plait_worker(pg_database, cwd, "pg_steps"):
        yield Cli(plait_in, pg_database, cwd)


@dataclass
class History:
    good: str
    bad: str
    waiting: str


@pytest.fixture(scope="module")
def history(cli: Cli) -> History:
    """A completed, a failed (past its SLA, an alert firing) and a waiting run, made
    with ``plait run FILE --db URL``."""
    ids = {}
    for name, code in (("good.yaml", 0), ("bad.yaml", 1), ("wait.yaml", 3)):
        proc = cli.run_in("run", name, "--json", "--db", cli.db, cwd=cli.cwd)
        assert proc.returncode == code, proc.stderr
        ids[name] = json.loads(proc.stdout)["run_id"]
    return History(ids["good.yaml"], ids["bad.yaml"], ids["wait.yaml"])


# ------------------------------------------------------------------ run and read back


def test_run_prints_its_result_and_stores_it(cli: Cli, history: History) -> None:
    proc = cli("run", "good.yaml", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "completed" and result["output"] == {"total": 0.1}
    assert result["steps"]["fetch"]["attempts"] == 1
    assert ISO_UTC.match(result["steps"]["fetch"]["started_at"])
    shown = cli.json("show", result["run_id"])
    assert shown["status"] == "completed" and shown["output"] == {"total": 0.1}
    plain = cli("run", "good.yaml")  # no terminal: a plain summary
    assert plain.returncode == 0 and plain.stdout.splitlines()[-1].startswith("run completed")


def test_runs_lists_newest_first_with_filters(cli: Cli, history: History) -> None:
    listed = [r["run_id"] for r in cli.json("runs", "--limit", "100")["runs"]]
    mine = [run_id for run_id in listed if run_id in vars(history).values()]
    assert mine == [history.waiting, history.bad, history.good]
    failed = cli.json("runs", "--status", "failed", "--workflow", "bad")["runs"]
    assert [r["run_id"] for r in failed] == [history.bad]
    assert failed[0]["steps_done"] == 3 and failed[0]["steps_total"] == 3
    table = cli("runs", "--workflow", "wait")
    assert table.returncode == 0, table.stderr
    assert re.split(r"\s{2,}", table.stdout.splitlines()[0])[:3] == ["RUN ID", "WORKFLOW",
                                                                    "STATUS"]
    assert history.waiting in table.stdout and "waiting" in table.stdout


def test_show_text_and_json(cli: Cli, history: History) -> None:
    text = cli("show", history.bad)
    assert text.returncode == 0, text.stderr
    assert f"run       {history.bad}" in text.stdout
    assert "status    failed: failed steps: boom" in text.stdout
    assert "ValueError: boom always fails" in text.stdout
    shown = cli.json("show", history.bad)
    assert [(a["step"], a["attempt"], a["status"]) for a in shown["attempts"]] == [
        ("nap", 1, "completed"), ("boom", 1, "failed"), ("boom", 2, "failed")]
    assert all(a["worker"] and ISO_UTC.match(a["finished_at"]) for a in shown["attempts"])
    waiting = cli("show", history.waiting)
    assert f"plait approve {history.waiting} sign_off [--reject]" in waiting.stdout
    unknown = cli("show", "f" * 32)
    assert unknown.returncode == 2 and f"no run with id '{'f' * 32}'" in unknown.stderr


def test_gantt_metrics_and_sla(cli: Cli, history: History) -> None:
    chart = cli("gantt", history.bad)
    assert chart.returncode == 0, chart.stderr
    assert re.search(r"^boom\s", chart.stdout, re.MULTILINE)
    page = cli.cwd / "chart.html"
    html = cli("gantt", history.good, "--html", str(page))
    assert html.returncode == 0 and history.good in page.read_text()

    report = cli.json("metrics", "--workflow", "bad", "--since", "1h")
    [bad] = report["workflows"]
    assert bad["workflow"] == "bad" and bad["failed"] >= 1 and bad["success_rate"] == 0.0
    assert report["alerts"]["fired"] is True
    assert "ALERT bad: success_rate" in cli("metrics").stdout

    sla = cli("sla", "--json", "--check")
    assert sla.returncode == 1
    assert history.bad in [b["run_id"] for b in json.loads(sla.stdout)["breaches"]]
    calm = cli("sla", "--workflow", "good", "--check")
    assert calm.returncode == 0 and "no runs past their SLA" in calm.stdout


# ------------------------------------------------------------------ approve, cancel, retry


def waiting_run(cli: Cli) -> str:
    proc = cli("run", "wait.yaml", "--json")
    assert proc.returncode == 3, proc.stderr
    return json.loads(proc.stdout)["run_id"]


def test_approve_continues_the_run_and_the_first_decision_stands(cli: Cli) -> None:
    run_id = waiting_run(cli)
    proc = cli("approve", run_id, "sign_off", "--data", '{"ticket": 7}', "--by", "ada",
               "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "completed" and result["output"] == {"ship": {"ticket": 7}}
    again = cli("approve", run_id, "sign_off", "--reject")
    assert again.returncode == 1
    assert "was already approved by ada; the first decision stands" in again.stderr


def test_racing_decisions_from_two_processes_store_one(cli: Cli, spawn) -> None:
    run_id = waiting_run(cli)
    env = {"PLAIT_DB": cli.db}
    procs = {"ada": spawn("approve", run_id, "sign_off", "--by", "ada", cwd=cli.cwd, env=env),
             "bob": spawn("approve", run_id, "sign_off", "--reject", "--by", "bob",
                          cwd=cli.cwd, env=env)}
    ended = {who: (p.wait(timeout=30), *p.communicate()) for who, p in procs.items()}
    refused = [who for who, (_, _, err) in ended.items() if "the first decision stands" in err]
    assert len(refused) == 1, ended
    winner = "bob" if refused == ["ada"] else "ada"
    shown = cli.json("show", run_id)
    assert shown["status"] == ("completed" if winner == "ada" else "failed")


def test_cancel_a_waiting_run(cli: Cli) -> None:
    run_id = waiting_run(cli)
    proc = cli("cancel", run_id)
    assert proc.returncode == 0, proc.stderr
    assert "no process was executing it, so it is cancelled now" in proc.stdout
    shown = cli.json("show", run_id)
    assert shown["status"] == "cancelled"
    assert shown["steps"]["sign_off"]["status"] == "cancelled"
    assert cli("cancel", run_id).returncode == 0


def test_cancel_from_another_process_stops_the_run(cli: Cli, spawn, waiter,
                                                   tmp_path: Path) -> None:
    marker = tmp_path / "sleepy.txt"
    runner = spawn("run", "slow.yaml", "--json", "--input",
                   json.dumps({"marker": str(marker), "seconds": 30}), cwd=cli.cwd,
                   env={"PLAIT_DB": cli.db})
    waiter(marker.exists, proc=runner, what="the slow step to start")
    run_id = cli.json("runs", "--status", "running", "--workflow", "slow")["runs"][0]["run_id"]
    cancel = cli("cancel", run_id)
    assert cancel.returncode == 0, cancel.stderr
    assert f"cancel requested for run {run_id}" in cancel.stdout
    out, err = runner.communicate(timeout=15)
    assert runner.returncode == 1, err
    result = json.loads(out)
    assert result["status"] == "cancelled"
    assert result["steps"]["first"]["status"] == "completed"
    assert result["steps"]["sleepy"]["status"] == "cancelled"


def test_retry_reuses_completed_upstream_outputs(cli: Cli, tmp_path: Path) -> None:
    flag = tmp_path / "flag"
    first = cli("run", "retried.yaml", "--json", "--input", json.dumps({"flag": str(flag)}))
    assert first.returncode == 1, first.stderr
    old = json.loads(first.stdout)
    flag.write_text("fixed")
    proc = cli("retry", old["run_id"], "--json")
    assert proc.returncode == 0, proc.stderr
    new = json.loads(proc.stdout)
    assert new["status"] == "completed" and new["output"] == {"flaky": 42}
    assert new["steps"]["fetch"]["attempts"] == 0  # reused, not run
    assert cli.json("show", new["run_id"])["retry_of"] == old["run_id"]


def test_killing_the_following_process_loses_nothing(cli: Cli, spawn, waiter,
                                                     tmp_path: Path) -> None:
    """kill -9 of ``plait run`` (following): the run executes on the workers, so it
    completes anyway, each step run once."""
    marker = tmp_path / "sleepy.txt"
    runner = spawn("run", "slow.yaml", "--json", "--input",
                   json.dumps({"marker": str(marker), "seconds": 1}), cwd=cli.cwd,
                   env={"PLAIT_DB": cli.db})
    waiter(marker.exists, proc=runner, what="the slow step to start")
    os.kill(runner.pid, signal.SIGKILL)
    runner.wait(timeout=10)
    run_id = cli.json("runs", "--workflow", "slow", "--limit", "1")["runs"][0]["run_id"]
    waiter(lambda: pgutil.run_status(cli.db, run_id) == "completed",
           what="the run to complete on the worker")
    shown = cli.json("show", run_id)
    assert shown["steps"]["sleepy"]["output"] == "woke up"
    attempts = [(a["step"], a["attempt"], a["status"]) for a in shown["attempts"]]
    assert attempts == [("first", 1, "completed"), ("sleepy", 1, "completed"),
                        ("after", 1, "completed")]


# ------------------------------------------------------------------ stores it cannot use


def test_a_server_that_does_not_answer(cli: Cli) -> None:
    proc = cli("runs", "--db", "postgresql://ada:s3cret@127.0.0.1:1/nothing",
               PLAIT_CONNECT_WAIT="0")
    assert proc.returncode == 4  # store unreachable, not a usage error
    assert "cannot connect to PostgreSQL at postgresql://ada:***@127.0.0.1:1/nothing" \
        in proc.stderr
    assert "s3cret" not in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stdout == ""


@pytest.fixture
def reader_url(pg_database: str) -> Iterator[str]:
    """A role that may read plait's tables and write none, and its URL."""
    role = f"plait_reader_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
    parts = pgutil.database_url(pg_database, pgutil.database_name(pg_database))
    yield re.sub(r"//[^@/]*@", f"//{role}@", parts)
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute(f"DROP OWNED BY {role}")
        conn.execute(f"DROP ROLE {role}")


def test_runs_and_show_work_for_a_role_that_cannot_write(cli: Cli, history: History,
                                                        reader_url: str) -> None:
    runs = cli("runs", "--json", "--db", reader_url)
    assert runs.returncode == 0, runs.stderr
    assert history.good in [r["run_id"] for r in json.loads(runs.stdout)["runs"]]
    show = cli("show", history.good, "--json", "--db", reader_url)
    assert show.returncode == 0, show.stderr
    assert json.loads(show.stdout)["status"] == "completed"
    refused = cli("run", "good.yaml", "--db", reader_url)
    assert refused.returncode == 2
    assert "permission denied" in refused.stderr and "Traceback" not in refused.stderr
