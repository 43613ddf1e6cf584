"""Values the CLI must survive: a step output no store can hold fails the
step (exit 1, run final, nothing left `running`); run input that is not storable JSON and
definitions nested past any reason exit 2 (validate: 1) with a message, storing
nothing; `plait show` prints only the start of a big output."""

from __future__ import annotations

import json

import pytest

STEPS = '''
def surrogate():
    return {"s": "x\\ud800y", "ok": [1, 2]}


def raises_surrogate():
    raise RuntimeError("cannot read \\udcff here")


def big():
    return {"blob": "x" * 1_000_000}
'''

FLOW = """
name: values
steps:
  - {id: bad, type: python, call: "value_steps:surrogate", retry: {max_retries: 3, initial_delay: 0}}
  - {id: err, type: python, call: "value_steps:raises_surrogate", retry: 0}
  - {id: big, type: python, call: "value_steps:big"}
  - {id: after, type: transform, value: done, depends_on: [bad], trigger: all_done}
"""


@pytest.fixture
def flow(write):
    write("value_steps.py", STEPS)
    return write("flow.yaml", FLOW)


def test_bad_output_fails_the_step_and_the_run_ends(plait, flow):
    done = plait("run", str(flow), "--json")

    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    result = json.loads(done.stdout)
    bad = result["steps"]["bad"]
    assert (result["status"], bad["status"], bad["attempts"]) == ("failed", "failed", 1)
    assert bad["error"] == ("OutputError: output.s has a string with a lone surrogate "
                            "'\\ud800' at position 1, which is not valid Unicode (UTF-8 "
                            "cannot encode it)")
    assert result["steps"]["err"]["error"] == "RuntimeError: cannot read \ufffd here"
    assert result["steps"]["after"]["status"] == "completed"
    shown = plait("show", result["run_id"], "--json")
    assert shown.returncode == 0, shown.stderr
    stored = json.loads(shown.stdout)
    assert stored["status"] == "failed"
    assert {k: v["status"] for k, v in stored["steps"].items()} == {
        "bad": "failed", "err": "failed", "big": "completed", "after": "completed"}
    assert stored["steps"]["bad"]["error"] == bad["error"]
    runs = json.loads(plait("runs", "--json").stdout)["runs"]
    assert [r["status"] for r in runs] == ["failed"]


def test_show_prints_the_start_of_a_big_output(plait, write, flow):
    big = write("big.yaml", "name: big\nsteps:\n  - {id: big, type: python, "
                            "call: 'value_steps:big'}\n")
    run_id = json.loads(plait("run", str(big), "--json").stdout)["run_id"]

    shown = plait("show", run_id)

    assert shown.returncode == 0, shown.stderr
    assert len(shown.stdout) < 20_000
    assert "truncated; use --json for all of it" in shown.stdout
    full = json.loads(plait("show", run_id, "--json").stdout)
    assert len(full["output"]["big"]["blob"]) == 1_000_000


@pytest.mark.parametrize(("args", "words"), [
    (["--input", '{"s": "\\ud800"}'], "input.s has a string with a lone surrogate"),
    (["--input-file", "deep.json"], "more than 256 levels"),
    (["--input-file", "big.json"], "over the 4,300-digit limit"),
    (["--input", "{nope"], "not valid JSON"),
])
def test_input_that_is_not_storable_json_exits_2_storing_nothing(plait, write, flow, args,
                                                                 words):
    write("deep.json", "[" * 1000 + "]" * 1000)
    write("big.json", '{"n": ' + "7" * 5000 + "}")

    done = plait("run", str(flow), *args)

    assert done.returncode == 2, done.stderr
    assert words in done.stderr
    assert "Traceback" not in done.stderr
    assert json.loads(plait("runs", "--json").stdout) == {"runs": []}


@pytest.mark.parametrize("name", ["deep.yaml", "deep.json"])
def test_a_definition_nested_100k_deep_is_invalid_not_a_crash(plait, write, name):
    levels = 100_000
    if name.endswith(".json"):
        text = ('{"name": "deep", "steps": [{"id": "a", "type": "transform", "value": '
                + "[" * levels + "]" * levels + "}]}")
    else:
        text = ("name: deep\nsteps:\n  - id: a\n    type: transform\n    value: "
                + "[" * levels + "]" * levels + "\n")
    path = write(name, text)

    checked = plait("validate", str(path))
    ran = plait("run", str(path))

    assert checked.returncode == 1
    assert ran.returncode == 2
    for done in (checked, ran):
        assert "nests lists and mappings too deeply" in done.stderr + done.stdout
        assert "Traceback" not in done.stderr
    assert json.loads(plait("runs", "--json").stdout) == {"runs": []}
