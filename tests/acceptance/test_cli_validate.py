"""`plait validate FILE...`: exit 0 when valid, 1 when not, every problem listed."""

from __future__ import annotations

import re

VALID = """
    name: ok-flow
    steps:
      - {id: fetch, type: transform, value: {n: 1}}
      - {id: parse, type: transform, value: "{{ steps.fetch.output.n + 1 }}", depends_on: [fetch]}
"""

MANY_PROBLEMS = """
    name: many-problems
    steps:
      - {id: fetch, type: transform, value: 1}
      - {id: parse, type: transform, value: 1, depends_on: [fetchh]}
      - {id: parse, type: transform, value: 2}
      - {id: weird, type: pythn, call: "x:y"}
      - {id: broken, type: transform, value: "{{ input.x + }}", depends_on: [fetch]}
      - {id: peek, type: transform, value: "{{ steps.fetch.output }}"}
      - {id: gate, type: condition, if: "{{ true }}", then: [fetc]}
      - {id: t, type: transform, valu: 3}
"""

CYCLE = """
    name: cyclic
    steps:
      - {id: a, type: transform, value: 1, depends_on: [c]}
      - {id: b, type: transform, value: 1, depends_on: [a]}
      - {id: c, type: transform, value: 1, depends_on: [b]}
"""


def test_valid_file_exits_0(plait, write):
    write("flow.yaml", VALID)
    proc = plait("validate", "flow.yaml")
    assert proc.returncode == 0, proc.stderr
    assert "flow.yaml: valid" in proc.stdout
    assert "ok-flow" in proc.stdout
    assert re.search(r"fingerprint [0-9a-f]{12}", proc.stdout)
    assert proc.stderr == ""


def test_every_problem_is_listed_with_its_location(plait, write):
    write("bad.yaml", MANY_PROBLEMS)
    proc = plait("validate", "bad.yaml")
    assert proc.returncode == 1
    err = proc.stderr
    assert "bad.yaml: invalid workflow definition (8 problems)" in err
    expected = [
        ("steps[1].depends_on[0]", "unknown step 'fetchh'", "did you mean 'fetch'?"),
        ("steps[2].id", "duplicate step id 'parse'", ""),
        ("steps[3].type", "unknown step type 'pythn'", "did you mean 'python'?"),
        ("steps[4].value", "template syntax error at line 1, column", ""),
        ("steps[5].value", "not an ancestor of 'peek'", "add 'fetch' to depends_on"),
        ("steps[6].then[0]", "unknown step 'fetc'", "did you mean 'fetch'?"),
        ("steps[7].valu", "unknown field", "did you mean 'value'?"),
    ]
    lines = err.splitlines()
    for location, message, hint in expected:
        matching = [line for line in lines if line.startswith(f"  - {location}: ")]
        assert matching, f"no problem at {location} in:\n{err}"
        assert message in matching[0] and hint in matching[0]
    assert proc.stdout == ""


def test_cycle_names_the_whole_path(plait, write):
    write("cycle.yaml", CYCLE)
    proc = plait("validate", "cycle.yaml")
    assert proc.returncode == 1
    assert "cycle: a -> b -> c -> a" in proc.stderr


def test_several_files_are_each_reported(plait, write):
    write("good.yaml", VALID)
    write("cycle.yaml", CYCLE)
    proc = plait("validate", "good.yaml", "cycle.yaml")
    assert proc.returncode == 1
    assert "good.yaml: valid" in proc.stdout
    assert "cycle.yaml: invalid" in proc.stderr


def test_missing_file_and_yaml_syntax_error(plait, write):
    write("broken.yaml", "name: x\nsteps: [\n")
    proc = plait("validate", "missing.yaml", "broken.yaml")
    assert proc.returncode == 1
    assert "missing.yaml" in proc.stderr and "cannot read" in proc.stderr
    assert re.search(r"broken.yaml: .*\n  - YAML error: .*line \d+, column \d+", proc.stderr)


def test_json_definitions_are_accepted(plait, write):
    write("flow.json", '{"name": "json-flow", "steps": [{"id": "a", "type": "transform", '
                       '"value": 1}]}')
    proc = plait("validate", "flow.json")
    assert proc.returncode == 0, proc.stderr


def test_python_steps_must_import_from_next_to_the_file(plait, write, tmp_path):
    write("flows/handlers.py", "def classify(text):\n    return {'intent': 'x'}\n")
    write("flows/flow.yaml", """
        name: imports
        steps:
          - {id: good, type: python, call: "handlers:classify", with: {text: hi}}
          - {id: bad_module, type: python, call: "no_such_module_xyz:f"}
          - {id: bad_function, type: python, call: "handlers:clasify"}
    """)
    proc = plait("validate", "flows/flow.yaml")
    assert proc.returncode == 1
    assert "steps[1].call" in proc.stderr and "no_such_module_xyz" in proc.stderr
    assert "steps[2].call" in proc.stderr and "clasify" in proc.stderr
    assert "steps[0]" not in proc.stderr  # handlers.py next to the file imports

    skipped = plait("validate", "--no-import", "flows/flow.yaml")
    assert skipped.returncode == 0, skipped.stderr


def test_no_file_is_a_usage_error(plait):
    proc = plait("validate")
    assert proc.returncode == 2
    assert "Usage" in proc.stderr


FIVE_KINDS = """
    name: five-kinds
    steps:
      - {id: a, type: transform, value: 1, depends_on: [c]}
      - {id: b, type: transform, value: 1, depends_on: [a]}
      - {id: c, type: transform, value: 1, depends_on: [b, nope]}
      - {id: d, type: transform, value: "{{ steps.e.output }}", depends_on: [c]}
      - {id: e, type: python, call: "no_such_module_here:f", outputs: [k], depends_on: [a]}
      - {id: f, type: transform, value: 2, outputs: [k], depends_on: [b]}
"""


def test_a_cycle_does_not_hide_templates_writers_or_imports(plait, write):
    write("five.yaml", FIVE_KINDS)
    proc = plait("validate", "five.yaml")
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert lines[0] == "five.yaml: invalid workflow definition (5 problems)"
    expected = [
        ("steps", "cycle: a -> b -> c -> a"),
        ("steps[2].depends_on[1]", "unknown step 'nope' in depends_on of 'c'"),
        ("steps[3].value", "template reads steps.e, which is not an ancestor of 'd'"),
        ("steps[4].call", "step 'e': cannot import module 'no_such_module_here'"),
        ("steps[5].outputs", "state key 'k' is written by 'e' and 'f', which may run at "
                             "the same time"),
    ]
    for location, message in expected:
        assert any(line.startswith(f"  - {location}: {message}") for line in lines), \
            f"no {location}: {message} in:\n{proc.stderr}"
    # --no-import: the same but the import
    proc = plait("validate", "--no-import", "five.yaml")
    assert "(4 problems)" in proc.stderr and "no_such_module_here" not in proc.stderr
