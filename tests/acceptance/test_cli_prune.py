"""`plait prune`: finished runs older than --before go with everything of theirs;
unfinished runs, runs with an unfinished retry and later runs stay."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import plaitproc
from conftest import cli_env, wait_for

DONE = """
    name: done
    steps:
      - {id: a, type: transform, value: 1}
      - {id: b, type: transform, value: 2, depends_on: [a]}
"""
APPROVAL = """
    name: gated
    steps:
      - {id: ok, type: approval, prompt: "Go?"}
"""


def _run(plait, file: str, code: int) -> str:
    proc = plait("run", file, "--json")
    assert proc.returncode == code, proc.stderr
    return str(json.loads(proc.stdout)["run_id"])


def _prune(plait, *args: str) -> dict[str, object]:
    proc = plait("prune", *args, "--json")
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def test_prune_deletes_finished_runs_and_keeps_the_rest(plait, write):
    write("done.yaml", DONE)
    write("gated.yaml", APPROVAL)
    done, failed = _run(plait, "done.yaml", 0), _run(plait, "gated.yaml", 3)
    assert plait("approve", failed, "ok", "--reject").returncode == 1
    waiting = _run(plait, "gated.yaml", 3)

    recent = _prune(plait, "--before", "30d")
    assert {k: recent[k] for k in ("dry_run", "runs", "rows", "tables")} == {
        "dry_run": False, "runs": 0, "rows": 0, "tables": {}}
    dry = _prune(plait, "--before", "0s", "--dry-run")
    assert dry["dry_run"] is True and dry["runs"] == 2
    assert dry["tables"]["steps"] == 3 and dry["rows"] > 3  # type: ignore[index,operator]
    assert plait("show", done).returncode == 0

    only_failed = _prune(plait, "--before", "0s", "--status", "failed")
    assert only_failed["runs"] == 1
    assert plait("show", failed).returncode == 2
    rest = _prune(plait, "--before", "0s")
    assert {k: rest[k] for k in ("runs", "rows")} == {"runs": 1, "rows": dry["rows"] -
                                                     only_failed["rows"]}  # type: ignore[operator]
    gone = plait("show", done)
    assert gone.returncode == 2 and "no run with id" in gone.stderr
    assert plait("show", waiting).returncode == 0

    text = plait("prune", "--before", "0s", "--workflow", "gated", "--dry-run")
    assert text.returncode == 0
    assert text.stdout.startswith("would prune 0 run(s) that finished before ")


def test_bad_input_exits_2_naming_it(plait):
    for args, named in ((["--before", "2999-01-01"], "'2999-01-01' is in the future"),
                        (["--before", "soon"], "'soon' is neither an age"),
                        (["--before", "1d", "--status", "completed,waiting"],
                         "'waiting' is not a final status")):
        proc = plait("prune", *args)
        assert proc.returncode == 2, proc.stderr
        assert named in proc.stderr
    assert plait("prune").returncode == 2  # --before is required


def test_a_run_stays_while_its_retry_is_unfinished(plait, write):
    write("gated.yaml", APPROVAL)
    old = _run(plait, "gated.yaml", 3)
    assert plait("approve", old, "ok", "--reject").returncode == 1
    retry = plait("retry", old, "--json")
    assert retry.returncode == 3, retry.stderr  # the new run waits for its approval
    new = json.loads(retry.stdout)["run_id"]
    assert _prune(plait, "--before", "0s")["runs"] == 0
    assert plait("show", old).returncode == 0

    assert plait("approve", new, "ok").returncode == 0
    # the old run (failed) goes on its own; the retry's link names a run that is gone
    assert _prune(plait, "--before", "0s", "--status", "failed")["runs"] == 1
    shown = plait("show", new)
    assert shown.returncode == 0, shown.stderr
    assert old in shown.stdout
    assert json.loads(plait("show", new, "--json").stdout)["retry_of"] == old


def test_a_worker_prunes_with_plait_retention(plait, write, tmp_path: Path):
    write("done.yaml", DONE)
    db = f"sqlite:///{tmp_path / 'plait.db'}"
    for _ in range(3):
        proc = plait("run", "done.yaml", "--db", db)
        assert proc.returncode == 0, proc.stderr
    env = cli_env(PLAIT_RETENTION="1ms", PLAIT_RETENTION_EVERY="0.2s")
    worker = plaitproc.popen(("worker", "--db", db), cwd=tmp_path, env=env,
                             stderr=subprocess.PIPE, text=True)
    try:
        def pruned() -> bool:
            listed = plait("runs", "--db", db, "--json")
            return listed.returncode == 0 and json.loads(listed.stdout)["runs"] == []

        wait_for(pruned, timeout=20)
    finally:
        worker.terminate()
        _, err = worker.communicate(timeout=30)
    # one line for the turn that deleted the runs; the turns after it deleted nothing
    assert re.search(r"worker \S+: retention: pruned 3 run\(s\) \(\d+ rows\) that finished "
                     r"more than 1ms ago, in \d+\.\d\ds", err), err
    assert err.count("retention: pruned") == 1, err


def test_the_server_prunes_with_plait_retention(plait, write, spawn, tmp_path: Path):
    write("done.yaml", DONE)
    db = f"sqlite:///{tmp_path / 'plait.db'}"
    assert plait("run", "done.yaml", "--db", db).returncode == 0
    server = spawn("serve", "--db", db, "--port", "0",
                   env={"PLAIT_RETENTION": "1ms", "PLAIT_RETENTION_EVERY": "0.2s"})

    def pruned() -> bool:
        assert server.poll() is None, server.communicate()
        listed = plait("runs", "--db", db, "--json")
        return listed.returncode == 0 and json.loads(listed.stdout)["runs"] == []

    wait_for(pruned, timeout=20)
    time.sleep(0.5)  # a few turns more, that delete nothing
    server.terminate()
    _, err = server.communicate(timeout=30)
    assert server.returncode == 0, err
    # serve's log says what it pruned, as a worker's does: once, for the turn that did
    assert re.search(r"plait serve: retention: pruned 1 run\(s\) \(\d+ rows\) that "
                     r"finished more than 1ms ago, in \d+\.\d\ds", err), err
    assert err.count("retention: pruned") == 1, err


def test_a_bad_retention_setting_stops_the_worker(plait, tmp_path: Path):
    proc = plait("worker", "--db", f"sqlite:///{tmp_path / 'w.db'}",
                 env={"PLAIT_RETENTION": "a month"})
    assert proc.returncode == 2
    assert "PLAIT_RETENTION" in proc.stderr


def test_a_bad_retention_setting_stops_the_server(plait, tmp_path: Path):
    proc = plait("serve", "--db", f"sqlite:///{tmp_path / 's.db'}", "--port", "0",
                 env={"PLAIT_RETENTION_EVERY": "never", "PLAIT_RETENTION": "30d"})
    assert proc.returncode == 2
    assert "PLAIT_RETENTION_EVERY" in proc.stderr
