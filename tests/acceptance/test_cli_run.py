"""`plait run`: the --json shape, exit codes, input handling and plain output."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

RUN_KEYS = {"run_id", "workflow", "version", "status", "output", "error", "duration_s",
            "steps"}
STEP_KEYS = {"status", "attempts", "output", "error", "started_at", "finished_at",
             "skip_reason", "fallback_used", "cached",  # cached: plait's addition
             "waiting"}  # null unless the step waits (an approval's prompt and show)

FLOW = """
    name: adder
    input:
      type: object
      required: [x]
      properties: {x: {type: integer}}
    steps:
      - {id: double, type: python, call: "adder_steps:double", with: {x: "{{ input.x }}"}}
      - id: big
        type: condition
        depends_on: [double]
        if: "{{ steps.double.output > 10 }}"
        then: [shout]
      - {id: shout, type: transform, value: "big!"}
      - {id: total, type: transform, value: "{{ steps.double.output + 1 }}",
         depends_on: [double]}
"""

STEPS = """
def double(x):
    return x * 2


def boom():
    raise ValueError("the boom step always fails")
"""

FAILING = """
    name: failing
    defaults:
      retry: {max_retries: 1, initial_delay: 10ms}
    steps:
      - {id: ok, type: transform, value: 1}
      - {id: boom, type: python, call: "adder_steps:boom"}
      - {id: after, type: transform, value: 2, depends_on: [boom]}
"""


@pytest.fixture
def flow(write):
    write("adder_steps.py", STEPS)
    return write("flow.yaml", FLOW)


def parse_time(text: str) -> datetime:
    assert text.endswith("Z"), text
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    assert moment.utcoffset() == UTC.utcoffset(None)
    return moment


def test_json_is_one_object_with_every_key(plait, flow):
    proc = plait("run", "flow.yaml", "--input", '{"x": 3}', "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)  # the whole of stdout is one JSON object
    assert proc.stdout.count("\n") == 1
    assert set(result) == RUN_KEYS
    assert result["workflow"] == "adder" and result["version"] == 1
    assert result["status"] == "completed" and result["error"] is None
    assert isinstance(result["duration_s"], float) and result["duration_s"] >= 0
    assert result["output"] == {"total": 7}  # completed sinks; `shout` was skipped
    assert set(result["steps"]) == {"double", "big", "shout", "total"}
    for step in result["steps"].values():
        assert set(step) == STEP_KEYS
    double = result["steps"]["double"]
    assert double["status"] == "completed" and double["attempts"] == 1
    assert double["output"] == 6 and double["fallback_used"] is False
    assert parse_time(double["started_at"]) <= parse_time(double["finished_at"])
    shout = result["steps"]["shout"]
    assert shout["status"] == "skipped" and shout["started_at"] is None
    assert "condition 'big'" in shout["skip_reason"]
    assert proc.stderr == ""


def test_failed_run_exits_1_with_the_error(plait, write, flow):
    write("failing.yaml", FAILING)
    proc = plait("run", "failing.yaml", "--json")
    assert proc.returncode == 1
    result = json.loads(proc.stdout)
    assert result["status"] == "failed"
    assert "boom" in result["error"]
    boom = result["steps"]["boom"]
    assert boom["status"] == "failed" and boom["attempts"] == 2
    assert "ValueError: the boom step always fails" in boom["error"]
    assert result["steps"]["after"]["status"] == "upstream_failed"
    assert result["steps"]["ok"]["status"] == "completed"
    assert "run failed" in proc.stderr


def test_plain_summary_when_stdout_is_not_a_terminal(plait, write, flow):
    write("failing.yaml", FAILING)
    proc = plait("run", "failing.yaml")
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["STEP", "STATUS", "ATTEMPTS", "DURATION", "ERROR", "/",
                                "SKIP", "REASON"]
    rows = {line.split()[0]: line for line in lines[1:4]}
    assert rows["ok"].split()[1:3] == ["completed", "1"]
    assert rows["boom"].split()[1:3] == ["failed", "2"]
    assert "ValueError: the boom step always fails" in rows["boom"]
    assert "upstream_failed" in rows["after"] and "parent 'boom' did not complete" in rows["after"]
    assert lines[-1].startswith("run failed in ")
    assert "\x1b[" not in proc.stdout  # no colour codes in a pipe


def test_plain_summary_shows_output_and_status_line(plait, flow):
    proc = plait("run", "flow.yaml", "--input", '{"x": 6}')
    assert proc.returncode == 0, proc.stderr
    assert 'output: {"shout": "big!", "total": 13}' in proc.stdout
    assert proc.stdout.splitlines()[-1].startswith("run completed in ")
    assert "(workflow adder v1, run " in proc.stdout


def test_quiet_prints_only_the_status_line(plait, flow):
    proc = plait("run", "flow.yaml", "--input", '{"x": 1}', "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == 1
    assert proc.stdout.startswith("run completed in ")


def test_input_file_and_stdin(plait, write, flow):
    write("input.json", '{"x": 5}')
    proc = plait("run", "flow.yaml", "--input-file", "input.json", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["steps"]["total"]["output"] == 11
    piped = plait("run", "flow.yaml", "--input-file", "-", "--json", stdin='{"x": 1}')
    assert json.loads(piped.stdout)["steps"]["total"]["output"] == 3


@pytest.mark.parametrize(("args", "says"), [
    (["--input", "{x: 1"], ["--input", "not valid JSON"]),
    (["--input", "NaN"], ["--input", "NaN is not a JSON value"]),
    (["--input-file", "nowhere.json"], ["--input-file", "nowhere.json: no such file"]),
    (["--input", "{}", "--input-file", "x.json"], ["either --input or --input-file"]),
    (["--input", '{"x": "three"}'], ["invalid input", "input.x", "'three' is not of type "
                                     "'integer'"]),
    (["--input", "{}"], ["invalid input", "'x' is a required property"]),
    (["--detach", "--db", "memory://"], ["--detach needs a store another process can open"]),
])
def test_bad_usage_or_input_exits_2_with_nothing_on_stdout(plait, flow, args, says):
    proc = plait("run", "flow.yaml", "--json", *args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    for text in says:
        assert text in proc.stderr


def test_invalid_definition_exits_2(plait, write):
    write("bad.yaml", """
        name: bad
        steps:
          - {id: a, type: transform, value: 1, depends_on: [b]}
    """)
    proc = plait("run", "bad.yaml", "--json")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "steps[0].depends_on[0]: unknown step 'b'" in proc.stderr


def test_missing_definition_file_exits_2(plait):
    proc = plait("run", "nowhere.yaml")
    assert proc.returncode == 2
    assert "nowhere.yaml" in proc.stderr and "cannot read" in proc.stderr


def test_unimportable_function_exits_2_before_running(plait, write):
    write("flow.yaml", """
        name: unimportable
        steps:
          - {id: a, type: python, call: "missing_module_abc:run"}
    """)
    proc = plait("run", "flow.yaml", "--json")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "steps[0].call" in proc.stderr and "missing_module_abc" in proc.stderr


def test_modules_in_the_current_directory_import(plait, write, tmp_path):
    write("lib_in_cwd.py", "def hello(name):\n    return f'hello {name}'\n")
    write("defs/flow.yaml", """
        name: cwd-import
        steps:
          - {id: greet, type: python, call: "lib_in_cwd:hello", with: {name: ada}}
    """)
    proc = plait("run", "defs/flow.yaml", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["output"] == {"greet": "hello ada"}


def test_unsupported_store_url_exits_2(plait, flow):
    proc = plait("run", "flow.yaml", "--input", '{"x": 1}', env={"PLAIT_DB": "nosuch://here"})
    assert proc.returncode == 2
    assert "unsupported store URL" in proc.stderr


def test_unknown_stored_workflow_name_exits_2(plait):
    proc = plait("run", "not-stored@3")
    assert proc.returncode == 2
    assert "no such file, and no stored workflow 'not-stored@3'" in proc.stderr


def test_a_stored_workflow_runs_by_name(plait, flow, tmp_path):
    db = {"PLAIT_DB": f"sqlite:///{tmp_path / 'runs.db'}"}
    first = plait("run", "flow.yaml", "--input", '{"x": 1}', "--quiet", env=db)
    assert first.returncode == 0, first.stderr
    by_name = plait("run", "adder", "--input", '{"x": 2}', "--json", env=db)
    assert by_name.returncode == 0, by_name.stderr
    result = json.loads(by_name.stdout)
    assert (result["workflow"], result["version"]) == ("adder", 1)
    assert result["output"] == {"total": 5}
    assert plait("run", "adder@1", "--input", '{"x": 2}', "--quiet", env=db).returncode == 0
    missing = plait("run", "adder@2", "--quiet", env=db)
    assert missing.returncode == 2
    assert "workflow 'adder' has version 1; no version 2" in missing.stderr


def test_live_progress_and_table_on_a_terminal(plait, flow):
    env = {"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1", "COLUMNS": "120"}
    proc = plait("run", "flow.yaml", "--input", '{"x": 7}', env=env)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "steps done" in out  # the live display was drawn
    assert "error / skip reason" in out  # the summary table
    for step in ("double", "big", "shout", "total"):
        assert step in out
    assert "run completed in" in out


def test_waiting_for_an_approval_exits_3(plait, write):
    write("approve.yaml", """
        name: needs-approval
        steps:
          - {id: draft, type: transform, value: hello}
          - {id: sign_off, type: approval, prompt: "Ship it?", depends_on: [draft]}
          - {id: ship, type: transform, value: 1, depends_on: [sign_off]}
    """)
    proc = plait("run", "approve.yaml", "--json")
    assert proc.returncode == 3, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "waiting"
    assert result["steps"]["sign_off"]["status"] == "waiting"
    assert result["steps"]["ship"]["status"] == "pending"

    plain = plait("run", "approve.yaml")
    assert plain.returncode == 3
    assert "waiting for a decision on sign_off: plait approve " in plain.stdout
    assert plain.stdout.splitlines()[-1].startswith("run waiting for an approval")


def test_json_stdout_stays_clean_when_steps_print(plait, write):
    write("noisy_steps.py", """
        import os
        import subprocess
        import sys


        def shout():
            print("printed by the step")
            os.write(1, b"written to fd 1\\n")
            subprocess.run([sys.executable, "-c", "print('from a child process')"])
            return 1
    """)
    write("noisy.yaml", """
        name: noisy
        steps:
          - {id: loud, type: python, call: "noisy_steps:shout"}
    """)
    proc = plait("run", "noisy.yaml", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["output"] == {"loud": 1}
    for text in ("printed by the step", "written to fd 1", "from a child process"):
        assert text in proc.stderr
