"""`plait approve`, `plait cancel` and `plait retry`: acting on stored runs."""

from __future__ import annotations

import getpass
import json
import sys

import pytest

APPROVAL = """
    name: needs-approval
    steps:
      - {id: draft, type: transform, value: hello}
      - {id: sign_off, type: approval, prompt: "Ship it?", depends_on: [draft]}
      - {id: ship, type: transform, value: "{{ steps.sign_off.output.data }}",
         depends_on: [sign_off]}
"""


def run_waiting(plait, write) -> str:
    write("approve.yaml", APPROVAL)
    proc = plait("run", "approve.yaml", "--json")
    assert proc.returncode == 3, proc.stderr
    return json.loads(proc.stdout)["run_id"]


def test_approve_continues_the_run_to_completion(plait, write):
    run_id = run_waiting(plait, write)
    proc = plait("approve", run_id, "sign_off", "--data", '{"ticket": 7}', "--by", "ada",
                 "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["run_id"] == run_id and result["status"] == "completed"
    decision = result["steps"]["sign_off"]["output"]
    assert decision["approved"] is True and decision["by"] == "ada"
    assert decision["data"] == {"ticket": 7} and decision["at"].endswith("Z")
    assert result["output"] == {"ship": {"ticket": 7}}
    assert f"step sign_off of run {run_id} approved by ada" in proc.stderr

    again = plait("approve", run_id, "sign_off", "--reject")
    assert again.returncode == 1
    assert "was already approved by ada; the first decision stands" in again.stderr
    finished = plait("cancel", run_id)
    assert finished.returncode == 1
    assert "already ended (completed); there is nothing to cancel" in finished.stderr


def test_reject_fails_the_run_and_names_who(plait, write):
    run_id = run_waiting(plait, write)
    proc = plait("approve", run_id, "sign_off", "--reject")
    assert proc.returncode == 1, proc.stderr
    steps = {line.split()[0]: line for line in proc.stdout.splitlines()[1:4]}
    assert steps["sign_off"].split()[1] == "failed"
    assert f"rejected by {getpass.getuser()}" in steps["sign_off"]
    assert steps["ship"].split()[1] == "upstream_failed"
    assert proc.stdout.splitlines()[-1].startswith("run failed")


def test_approve_refuses_what_it_cannot_record(plait, write):
    run_id = run_waiting(plait, write)
    typo = plait("approve", run_id, "sign_of")
    assert typo.returncode == 2
    assert "did you mean 'sign_off'" in typo.stderr
    done = plait("approve", run_id, "draft")
    assert done.returncode == 2 and "not waiting" in done.stderr
    bad = plait("approve", run_id, "sign_off", "--data", "{nope")
    assert bad.returncode == 2 and "--data" in bad.stderr and "not valid JSON" in bad.stderr
    unknown = plait("approve", "0" * 32, "sign_off")
    assert unknown.returncode == 2 and f"no run with id '{'0' * 32}'" in unknown.stderr
    still = json.loads(plait("show", run_id, "--json").stdout)
    assert still["status"] == "waiting"  # nothing was recorded


def test_racing_decisions_the_first_stands(plait, write, spawn):
    """`approve` and `approve --reject` at the same moment: one decision is stored, the
    other process is refused (exit 1, naming the one that stands), and the run ends as
    the stored decision says."""
    for _ in range(3):
        run_id = run_waiting(plait, write)
        procs = {"ada": spawn("approve", run_id, "sign_off", "--by", "ada"),
                 "bob": spawn("approve", run_id, "sign_off", "--reject", "--by", "bob")}
        ended = {who: (p.wait(timeout=30), *p.communicate()) for who, p in procs.items()}
        recorded = {who for who, (_, _, err) in ended.items()
                    if f"of run {run_id} {'approved' if who == 'ada' else 'rejected'} "
                       f"by {who}" in err}
        assert len(recorded) == 1, ended
        winner = recorded.pop()
        loser = "bob" if winner == "ada" else "ada"
        verdict = "approved" if winner == "ada" else "rejected"
        code, _, err = ended[loser]
        assert code == 1, ended
        assert f"step 'sign_off' of run '{run_id}' was already {verdict} by {winner}" in err
        assert ended[winner][0] == (0 if winner == "ada" else 1), ended
        shown = json.loads(plait("show", run_id, "--json").stdout)
        assert shown["status"] == ("completed" if winner == "ada" else "failed")
        sign_off = shown["steps"]["sign_off"]
        if winner == "ada":
            assert sign_off["output"]["by"] == "ada"
        else:
            assert sign_off["status"] == "failed" and "rejected by bob" in sign_off["error"]


HANDOFF_STEPS = """
import pathlib
import time


def slow(marker, release):
    pathlib.Path(marker).write_text("started")
    deadline = time.monotonic() + 20
    while not pathlib.Path(release).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return "slow done"
"""

HANDOFF = """
    name: handoff
    steps:
      - {id: busy, type: python, call: "handoff_steps:slow",
         with: {marker: "{{ input.marker }}", release: "{{ input.release }}"}}
      - {id: sign_off, type: approval, prompt: "ok?"}
      - {id: ship, type: transform, value: 1, depends_on: [busy, sign_off]}
"""


def test_approve_while_another_process_executes_the_run(tmp_path, write, plait, spawn,
                                                        waiter):
    write("handoff_steps.py", HANDOFF_STEPS)
    write("handoff.yaml", HANDOFF)
    marker, release = tmp_path / "busy.txt", tmp_path / "release.txt"
    runner = spawn("run", "handoff.yaml", "--json", "--input",
                   json.dumps({"marker": str(marker), "release": str(release)}))
    waiter(marker.exists, proc=runner, what="the busy step to start")
    run_id = json.loads(plait("runs", "--json", "--workflow", "handoff").stdout)["runs"][0][
        "run_id"]
    approve = plait("approve", run_id, "sign_off")  # `busy` still runs in `runner`
    release.write_text("go")
    assert approve.returncode == 0, approve.stderr
    assert "which applied the decision and continues the run" in approve.stdout
    out, err = runner.communicate(timeout=20)
    assert runner.returncode == 0, err
    result = json.loads(out)
    assert result["status"] == "completed"
    assert result["steps"]["sign_off"]["output"]["approved"] is True


# ------------------------------------------------------------------ cancel

SLOW_STEPS = """
import pathlib
import time


def sleepy(marker):
    pathlib.Path(marker).write_text("started")
    time.sleep(30)
"""

SLOW = """
    name: slow
    steps:
      - {id: first, type: transform, value: 1}
      - {id: sleepy, type: python, call: "slow_steps:sleepy", with: {marker: "{{ input.marker }}"},
         depends_on: [first]}
      - {id: after, type: transform, value: 2, depends_on: [sleepy]}
"""


@pytest.mark.skipif(sys.platform == "win32", reason="timing of a second process")
def test_cancel_from_another_process_stops_the_run(tmp_path, write, plait, spawn, waiter):
    import time

    write("slow_steps.py", SLOW_STEPS)
    write("slow.yaml", SLOW)
    marker = tmp_path / "sleepy.txt"
    runner = spawn("run", "slow.yaml", "--json", "--input", json.dumps({"marker": str(marker)}))
    waiter(marker.exists, proc=runner, what="the slow step to start")
    listed = json.loads(plait("runs", "--json", "--status", "running").stdout)["runs"]
    run_id = listed[0]["run_id"]
    busy = plait("resume", run_id)  # a run another live process executes is not taken
    assert busy.returncode == 1
    assert f"run {run_id} not resumed" in busy.stderr and "is being executed by" in busy.stderr
    cancel = plait("cancel", run_id)
    asked = time.monotonic()
    assert cancel.returncode == 0, cancel.stderr
    assert f"cancel requested for run {run_id}" in cancel.stdout
    out, err = runner.communicate(timeout=10)
    assert time.monotonic() - asked < 2.5  # noticed within about a second
    assert runner.returncode == 1, err
    result = json.loads(out)
    assert result["status"] == "cancelled"
    assert result["steps"]["first"]["status"] == "completed"
    assert result["steps"]["sleepy"]["status"] == "cancelled"
    assert result["steps"]["sleepy"]["attempts"] == 1
    assert result["steps"]["after"]["status"] == "cancelled"
    attempts = json.loads(plait("show", run_id, "--json").stdout)["attempts"]
    assert [(a["step"], a["status"]) for a in attempts] == [("first", "completed"),
                                                           ("sleepy", "cancelled")]


def test_cancel_a_run_no_process_executes(plait, write):
    run_id = run_waiting(plait, write)
    proc = plait("cancel", run_id)
    assert proc.returncode == 0, proc.stderr
    assert "no process was executing it, so it is cancelled now" in proc.stdout
    shown = json.loads(plait("show", run_id, "--json").stdout)
    assert shown["status"] == "cancelled"
    assert {k: v["status"] for k, v in shown["steps"].items()} == {
        "draft": "completed", "sign_off": "cancelled", "ship": "cancelled"}
    again = plait("cancel", run_id)
    assert again.returncode == 0 and "already cancelled" in again.stdout
    missing = plait("cancel", "nosuchrun")
    assert missing.returncode == 2 and "no run with id 'nosuchrun'" in missing.stderr


# ------------------------------------------------------------------ retry

RETRY_STEPS = """
import pathlib


def fetch(log):
    with open(log, "a") as f:
        f.write("fetch\\n")
    return 21


def flaky(value, flag):
    if not pathlib.Path(flag).exists():
        raise RuntimeError("the flag file is missing")
    return value * 2
"""

RETRY = """
    name: retried
    defaults:
      retry: {max_retries: 0}
    steps:
      - {id: fetch, type: python, call: "retry_steps:fetch", with: {log: "{{ input.log }}"}}
      - {id: flaky, type: python, call: "retry_steps:flaky",
         with: {value: "{{ steps.fetch.output }}", flag: "{{ input.flag }}"}, depends_on: [fetch]}
      - {id: report, type: transform, value: "{{ steps.flaky.output }}", depends_on: [flaky]}
"""


def test_retry_reuses_completed_upstream_outputs(tmp_path, write, plait):
    write("retry_steps.py", RETRY_STEPS)
    write("retry.yaml", RETRY)
    log, flag = tmp_path / "side-effects.log", tmp_path / "flag"
    first = plait("run", "retry.yaml", "--json", "--input",
                  json.dumps({"log": str(log), "flag": str(flag)}))
    assert first.returncode == 1
    old = json.loads(first.stdout)
    assert old["steps"]["flaky"]["status"] == "failed"

    typo = plait("retry", old["run_id"], "--from", "fech")
    assert typo.returncode == 2 and "did you mean 'fetch'" in typo.stderr
    bad = plait("retry", old["run_id"], "--input", "{x")
    assert bad.returncode == 2 and "--input" in bad.stderr and "not valid JSON" in bad.stderr
    missing = plait("retry", "feedbeef")
    assert missing.returncode == 2 and "no run with id 'feedbeef'" in missing.stderr

    flag.write_text("fixed")
    proc = plait("retry", old["run_id"], "--json")
    assert proc.returncode == 0, proc.stderr
    new = json.loads(proc.stdout)
    assert new["run_id"] != old["run_id"]
    assert new["status"] == "completed" and new["output"] == {"report": 42}
    assert new["steps"]["fetch"]["attempts"] == 0  # reused, not run
    assert log.read_text().splitlines() == ["fetch"]  # the upstream step ran once
    assert f"run {new['run_id']}: retry of run {old['run_id']}, reusing the outputs of " \
           f"fetch" in proc.stderr
    listed = json.loads(plait("runs", "--json").stdout)["runs"]
    assert [r["run_id"] for r in listed] == [new["run_id"], old["run_id"]]  # refusals stored nothing
    assert listed[0]["retry_of"] == old["run_id"]

    again = plait("retry", old["run_id"], "--from", "fetch", "--quiet")
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("run completed")
    assert log.read_text().splitlines() == ["fetch", "fetch"]
