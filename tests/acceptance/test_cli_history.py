"""`plait runs`, `show`, `gantt`, `metrics` and `sla` over a store holding a few runs,
and how every command reports a store it cannot use."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

RUN_KEYS = {"run_id", "workflow", "version", "status", "output", "error", "duration_s",
            "steps"}
SHOW_EXTRA = {"retry_of", "parent_run_id", "fingerprint", "input", "created_at",
              "started_at", "finished_at", "attempts", "logs", "emits", "usage",
              "llm_tokens", "llm_budget",
              "continuation", "wake_at"}
SUMMARY_KEYS = {"run_id", "workflow", "version", "fingerprint", "status", "error",
                "created_at", "started_at", "finished_at", "duration_s", "steps_done",
                "steps_total", "retry_of", "parent_run_id"}
ATTEMPT_KEYS = {"step", "attempt", "fallback", "status", "started_at", "finished_at",
                "duration_s", "worker", "error", "usage"}
ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")

STEPS = """
import time


def nap(seconds):
    time.sleep(seconds)
    return seconds


def boom():
    raise ValueError("boom always fails")
"""

FLOWS = {
    "good.yaml": """
        name: good
        steps:
          - {id: fetch, type: python, call: "history_steps:nap", with: {seconds: 0.05}}
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
          - {id: nap, type: python, call: "history_steps:nap", with: {seconds: 0.03}}
          - {id: boom, type: python, call: "history_steps:boom", depends_on: [nap]}
          - {id: after, type: transform, value: 1, depends_on: [boom]}
    """,
    "wait.yaml": """
        name: wait
        steps:
          - {id: draft, type: transform, value: hello}
          - {id: sign_off, type: approval, prompt: "ok?", depends_on: [draft]}
    """,
}


@dataclass
class History:
    """A store with runs of three workflows: good (completed), bad (failed, past its
    SLA, with an alert rule) and wait (waiting for an approval)."""

    run: Callable[..., subprocess.CompletedProcess[str]]
    db: str
    cwd: Path
    good: str = ""
    bad: str = ""
    waiting: str = ""

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``plait *args --db DB`` in the store's directory."""
        return self.run(*args, "--db", self.db, cwd=self.cwd)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory, plait_in) -> History:
    cwd = tmp_path_factory.mktemp("history")
    (cwd / "history_steps.py").write_text(STEPS)
    for name, text in FLOWS.items():
        (cwd / name).write_text(textwrap.dedent(text).lstrip())
    made = History(run=plait_in, db=f"sqlite:///{cwd / 'runs.db'}", cwd=cwd)
    ids = {}
    for name, code in (("good.yaml", 0), ("bad.yaml", 1), ("wait.yaml", 3)):
        proc = made("run", name, "--json")
        assert proc.returncode == code, proc.stderr
        ids[name] = json.loads(proc.stdout)["run_id"]
    made.good, made.bad, made.waiting = ids["good.yaml"], ids["bad.yaml"], ids["wait.yaml"]
    return made


# ------------------------------------------------------------------ runs


def test_runs_table_newest_first(history):
    proc = history("runs")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert re.split(r"\s{2,}", lines[0]) == ["RUN ID", "WORKFLOW", "STATUS", "STARTED (UTC)",
                                            "DURATION", "STEPS"]
    rows = [re.split(r"\s{2,}", line) for line in lines[1:]]
    assert [r[0] for r in rows] == [history.waiting, history.bad, history.good]
    waiting, bad, good = rows
    assert good[1:3] == ["good@1", "completed"] and good[5] == "2/2"
    assert bad[1:3] == ["bad@1", "failed"] and bad[5] == "3/3"
    assert waiting[1:3] == ["wait@1", "waiting"] and waiting[5] == "1/2"
    assert waiting[4].endswith("+")  # still going: the time so far
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", good[3])
    assert "\x1b[" not in proc.stdout


def test_runs_json_and_filters(history):
    proc = history("runs", "--json")
    assert proc.returncode == 0, proc.stderr
    runs = json.loads(proc.stdout)["runs"]
    assert [r["run_id"] for r in runs] == [history.waiting, history.bad, history.good]
    for run in runs:
        assert set(run) == SUMMARY_KEYS
        assert ISO_UTC.match(run["created_at"]) and ISO_UTC.match(run["started_at"])
    good = runs[2]
    assert (good["steps_done"], good["steps_total"]) == (2, 2)
    assert good["duration_s"] > 0 and ISO_UTC.match(good["finished_at"])
    assert runs[0]["duration_s"] is None and runs[0]["finished_at"] is None

    failed = json.loads(history("runs", "--json", "--status", "failed").stdout)["runs"]
    assert [r["run_id"] for r in failed] == [history.bad]
    named = json.loads(history("runs", "--json", "--workflow", "good").stdout)["runs"]
    assert [r["run_id"] for r in named] == [history.good]
    newest = json.loads(history("runs", "--json", "--limit", "1").stdout)["runs"]
    assert [r["run_id"] for r in newest] == [history.waiting]


def test_runs_usage_errors(history):
    proc = history("runs", "--status", "done")
    assert proc.returncode == 2
    for status in ("pending", "running", "waiting", "completed", "failed", "cancelled"):
        assert status in proc.stderr
    assert history("runs", "--limit", "0").returncode == 2


def test_read_commands_do_not_create_the_default_database(plait, tmp_path):
    proc = plait("runs")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("no runs in sqlite:///./.plait/plait.db")
    assert json.loads(plait("runs", "--json").stdout) == {"runs": []}
    assert not (tmp_path / ".plait").exists()


# ------------------------------------------------------------------ show


def test_show_text(history):
    proc = history("show", history.bad)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert f"run       {history.bad}" in out
    assert "status    failed: failed steps: boom" in out
    assert re.search(r"created\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", out)
    steps_at = out.index("\nsteps\n")
    attempts_at = out.index("\nattempts\n")
    steps = {line.split()[0]: line for line in out[steps_at:attempts_at].splitlines()[3:]}
    assert steps["boom"].split()[1:3] == ["failed", "2"]
    assert "ValueError: boom always fails" in steps["boom"]
    assert "parent 'boom' did not complete" in steps["after"]
    attempts = out[attempts_at:].splitlines()[2:]
    assert attempts[0].split()[:2] == ["STEP", "ATTEMPT"]
    boom = [line for line in attempts[1:] if line.startswith("boom")]
    assert [line.split()[1:3] for line in boom] == [["1", "failed"], ["2", "failed"]]
    assert all("ValueError: boom always fails" in line for line in boom)


def test_show_json(history):
    proc = history("show", history.bad, "--json")
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)
    assert set(shown) == RUN_KEYS | SHOW_EXTRA
    assert shown["status"] == "failed" and shown["retry_of"] is None
    assert shown["input"] == {} and len(shown["fingerprint"]) == 12
    attempts = shown["attempts"]
    assert [(a["step"], a["attempt"], a["status"]) for a in attempts] == [
        ("nap", 1, "completed"), ("boom", 1, "failed"), ("boom", 2, "failed")]
    for attempt in attempts:
        assert set(attempt) == ATTEMPT_KEYS
        assert ISO_UTC.match(attempt["started_at"]) and ISO_UTC.match(attempt["finished_at"])
        assert attempt["worker"] and attempt["fallback"] is False
    assert "ValueError: boom always fails" in attempts[1]["error"]


def test_show_a_waiting_run_says_how_to_go_on(history):
    proc = history("show", history.waiting)
    assert proc.returncode == 0, proc.stderr
    assert f"plait approve {history.waiting} sign_off [--reject]" in proc.stdout


def test_show_unknown_and_malformed_run_ids(history):
    unknown = history("show", "f" * 32)
    assert unknown.returncode == 2
    assert f"no run with id '{'f' * 32}'" in unknown.stderr
    malformed = history("show", "no such run", "--json")
    assert malformed.returncode == 2 and malformed.stdout == ""
    assert "is not a run id" in malformed.stderr


# ------------------------------------------------------------------ gantt


def test_gantt_terminal_and_html(history):
    chart = history("gantt", history.bad)
    assert chart.returncode == 0, chart.stderr
    assert f"run {history.bad}" in chart.stdout
    assert re.search(r"^boom\s", chart.stdout, re.MULTILINE)
    assert "\x1b[" not in chart.stdout  # no colour in a pipe

    page = history.cwd / "chart.html"
    proc = history("gantt", history.good, "--html", str(page))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(page)
    html = page.read_text()
    assert html.lstrip().lower().startswith("<!doctype html") and history.good in html

    unwritable = history("gantt", history.good, "--html", str(history.cwd / "no" / "x.html"))
    assert unwritable.returncode == 2 and "cannot write" in unwritable.stderr
    assert history("gantt", "nope").returncode == 2


# ------------------------------------------------------------------ metrics and sla


def test_metrics_text_and_json(history):
    text = history("metrics")
    assert text.returncode == 0, text.stderr
    assert "good: 1 runs" in text.stdout or "good: 1 run" in text.stdout
    assert "ALERT bad: success_rate" in text.stdout  # the stored rule is evaluated

    proc = history("metrics", "--json", "--workflow", "bad", "--since", "1h")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert set(report) == {"since", "runs", "tokens", "workflows", "alerts"}
    assert [w["workflow"] for w in report["workflows"]] == ["bad"]
    bad = report["workflows"][0]
    assert bad["failed"] == 1 and bad["success_rate"] == 0.0
    assert {s["step"] for s in bad["steps"]} >= {"nap", "boom"}
    assert report["alerts"]["fired"] is True
    assert report["alerts"]["firings"][0]["workflow"] == "bad"


def test_metrics_check_exits_1_when_an_alert_fires(history):
    rules = history.cwd / "rules.yaml"
    rules.write_text('alerts:\n  good: ["p95 > 1h"]\n')
    calm = history("metrics", "--workflow", "good", "--check", "--alerts", str(rules))
    assert calm.returncode == 0, calm.stderr
    assert "no alerts fired" in calm.stdout
    fired = history("metrics", "--check")
    assert fired.returncode == 1
    assert "ALERT bad: success_rate is 0.0%" in fired.stdout


def test_metrics_usage_errors(history):
    since = history("metrics", "--since", "yesterday")
    assert since.returncode == 2 and "--since" in since.stderr
    bad_rules = history.cwd / "bad-rules.yaml"
    bad_rules.write_text('alerts:\n  "*": ["sucess_rate < 0.5"]\n')
    rules = history("metrics", "--alerts", str(bad_rules))
    assert rules.returncode == 2
    assert "did you mean 'success_rate'" in rules.stderr and "Traceback" not in rules.stderr


def test_sla(history):
    text = history("sla")
    assert text.returncode == 0, text.stderr
    assert history.bad in text.stdout and "SLA" in text.stdout
    proc = history("sla", "--json", "--check")
    assert proc.returncode == 1
    found = json.loads(proc.stdout)
    assert found["count"] == 1
    assert found["breaches"][0]["run_id"] == history.bad
    assert found["breaches"][0]["sla_s"] == 0.01
    quiet = history("sla", "--workflow", "good", "--check")
    assert quiet.returncode == 0 and "no runs past their SLA" in quiet.stdout


# ------------------------------------------------------------------ store errors


def newer_schema(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 999")
    conn.close()


def garbage(path: Path) -> None:
    path.write_bytes(b"this is not a database at all" * 100)


def a_file_as_directory(path: Path) -> Path:
    path.write_text("a file")
    return path / "runs.db"


@pytest.mark.parametrize(("command", "make", "says"), [
    (["runs"], garbage, "not a usable plait database"),
    (["show", "abc"], newer_schema, "newer plait"),
    (["resume", "abc"], Path.mkdir, "is a directory"),
    (["cancel", "abc"], garbage, "not a usable plait database"),
    (["metrics"], newer_schema, "newer plait"),
    (["run", "flow.yaml"], a_file_as_directory, "cannot create the directory"),
])
def test_a_store_that_cannot_be_used(plait, write, tmp_path, command, make, says):
    write("flow.yaml", "name: flow\nsteps:\n  - {id: a, type: transform, value: 1}\n")
    path = make(tmp_path / "broken.db") or tmp_path / "broken.db"
    proc = plait(*command, "--db", f"sqlite:///{path}")
    assert proc.returncode == 2
    assert says in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
