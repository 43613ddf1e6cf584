"""A map whose inline step is a ``workflow`` or ``loop`` step naming a file: read and
validated with the parent (relative to its file), stored with it, and run once per
item as a child run, through ``plait run`` and ``plait validate``."""

from __future__ import annotations

import json

AGENT_STEP = """
    name: agent-step
    input: {type: object, required: [topic]}
    steps:
      - id: answer
        type: transform
        value: "{{ input.topic | upper }}"
    output: "{{ steps.answer.output }}"
"""

REVISE = """
    name: revise
    steps:
      - id: draft
        type: transform
        value: {text: "{{ input.text }}", round: "{{ input.round }}"}
    output: "{{ steps.draft.output }}"
"""

MAP_OF_WORKFLOWS = """
    name: fan-out
    steps:
      - id: agents
        type: map
        over: "{{ input.topics }}"
        step:
          type: workflow
          workflow: ./children/agent_step.yaml
          input: {topic: "{{ item }}"}
    output: "{{ steps.agents.output }}"
"""

MAP_OF_LOOPS = """
    name: fan-out-loops
    steps:
      - id: revisions
        type: map
        over: [a, b, c]
        step:
          type: loop
          workflow: ./revise.yaml
          input: {text: "{{ item }}", round: "{{ loop.iteration }}"}
          until: "{{ loop.output.round >= 1 }}"
          max_iterations: 3
    output: "{{ steps.revisions.output }}"
"""


def test_a_map_of_workflow_steps_naming_a_file_runs_each_item_as_a_child(plait, write):
    write("children/agent_step.yaml", AGENT_STEP)
    write("flow.yaml", MAP_OF_WORKFLOWS)
    proc = plait("run", "flow.yaml", "--json", "--input",
                 json.dumps({"topics": ["alpha", "beta", "gamma"]}))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["status"] == "completed"
    assert result["output"] == ["ALPHA", "BETA", "GAMMA"]  # in item order
    assert [result["steps"][f"agents[{k}]"]["status"] for k in range(3)] == \
        ["completed"] * 3


def test_a_map_of_loop_steps_naming_a_file(plait, write):
    write("revise.yaml", REVISE)
    write("flow.yaml", MAP_OF_LOOPS)
    proc = plait("run", "flow.yaml", "--json")
    assert proc.returncode == 0, proc.stderr
    output = json.loads(proc.stdout)["output"]
    assert output == [{"iterations": 2, "output": {"text": t, "round": 1}}
                      for t in ("a", "b", "c")]


def test_an_invalid_child_file_of_a_map_is_reported_with_its_location(plait, write):
    write("children/agent_step.yaml", """
        name: agent-step
        steps:
          - id: answer
            type: transfrom
            value: 1
        """)
    write("flow.yaml", MAP_OF_WORKFLOWS)
    proc = plait("validate", "flow.yaml")
    assert proc.returncode == 1
    assert ("steps[0].step.workflow: ./children/agent_step.yaml: steps[0].type: "
            "unknown step type 'transfrom'") in proc.stderr, proc.stderr
