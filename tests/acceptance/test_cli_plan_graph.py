"""`plait plan` and `plait graph`."""

from __future__ import annotations

import json

import pytest

DIAMOND = """
    name: diamond
    steps:
      - {id: start, type: transform, value: 1}
      - {id: left, type: transform, value: 2, depends_on: [start]}
      - {id: right, type: transform, value: 3, depends_on: [start]}
      - {id: right_more, type: transform, value: 4, depends_on: [right]}
      - {id: side, type: transform, value: 5}
      - {id: gate, type: condition, if: "{{ true }}", depends_on: [left], then: [accept], else: [reject]}
      - {id: accept, type: transform, value: y}
      - {id: reject, type: transform, value: n}
      - {id: join, type: transform, value: 6, depends_on: [right_more, accept, reject]}
"""


@pytest.fixture
def diamond(write):
    return write("diamond.yaml", DIAMOND)


def test_plan_text(plait, diamond):
    proc = plait("plan", "diamond.yaml")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "workflow diamond: 9 steps, 9 edges, depth 5" in out
    stages = [line.split(None, 1) for line in out.splitlines() if line.startswith("  ")]
    assert stages == [["1", "start, side"], ["2", "left, right"], ["3", "gate, right_more"],
                      ["4", "accept, reject"], ["5", "join"]]
    assert "critical path (5 steps): start -> left -> gate -> accept -> join" in out


def test_plan_json(plait, diamond):
    proc = plait("plan", "diamond.yaml", "--json")
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan == {"workflow": "diamond", "steps": 9, "edges": 9, "depth": 5,
                    "critical_path": ["start", "left", "gate", "accept", "join"],
                    "stages": [["start", "side"], ["left", "right"], ["gate", "right_more"],
                               ["accept", "reject"], ["join"]]}


def test_plan_of_an_invalid_definition_exits_2(plait, write):
    write("bad.yaml", "name: bad\nsteps:\n  - {id: a, type: transform, value: 1, "
                      "depends_on: [a]}\n")
    proc = plait("plan", "bad.yaml")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "cycle: a -> a" in proc.stderr


def test_graph_mermaid_is_the_default(plait, diamond):
    proc = plait("graph", "diamond.yaml")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "flowchart TD"
    assert "    start --> left" in lines
    assert "    gate -->|then| accept" in lines
    assert "    gate -->|else| reject" in lines
    assert any(line.strip().startswith("gate{{") for line in lines)  # a diamond


def test_graph_dot(plait, diamond):
    proc = plait("graph", "diamond.yaml", "--format", "dot")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith('digraph "diamond" {')
    assert out.rstrip().endswith("}")
    assert "    start -> left;" in out
    assert '    gate -> accept [label="then"];' in out
    assert "shape=diamond" in out


def test_graph_rejects_unknown_format(plait, diamond):
    proc = plait("graph", "diamond.yaml", "--format", "png")
    assert proc.returncode == 2
    assert "png" in proc.stderr
