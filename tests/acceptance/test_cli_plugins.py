"""`plait validate` / `plait run` with a step type from an installed package (entry
point group ``plait.step_types``)."""

from __future__ import annotations

import json
from pathlib import Path

SHOUT = """
    name: plugin-flow
    steps:
      - {id: loud, type: shout, text: "{{ input.word }}"}
"""

BROKEN = """
    name: plugin-broken
    steps:
      - {id: loud, type: broken, text: x}
"""


def test_a_plugin_step_type_validates_and_runs(plait, write, step_type_plugin: Path):
    write("flow.yaml", SHOUT)
    env = {"PYTHONPATH": str(step_type_plugin)}
    proc = plait("validate", "flow.yaml", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "flow.yaml: valid" in proc.stdout
    proc = plait("run", "flow.yaml", "--input", '{"word": "hi"}', "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "completed"
    assert result["steps"]["loud"]["output"] == {"shout": "HI"}


def test_a_plugin_that_fails_to_load_is_named(plait, write, step_type_plugin: Path):
    write("broken.yaml", BROKEN)
    env = {"PYTHONPATH": str(step_type_plugin)}
    proc = plait("validate", "broken.yaml", env=env)
    assert proc.returncode == 1
    assert ("steps[0].type: unknown step type 'broken': entry point 'broken' "
            "(plaitdemo_broken:TYPE) of group 'plait.step_types' failed to load: "
            "RuntimeError: plaitdemo_broken needs PLAITDEMO_TOKEN") in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = plait("run", "broken.yaml", env=env)
    assert proc.returncode == 2
    assert "entry point 'broken'" in proc.stderr
    runs = plait("runs", "--json", env=env)
    assert runs.returncode == 0, runs.stderr
    assert json.loads(runs.stdout) == {"runs": []}  # nothing was stored
