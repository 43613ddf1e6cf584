"""Definitions the browser tests register over the API."""

from __future__ import annotations

from typing import Any

PIPELINE: dict[str, Any] = {
    "name": "ui-pipeline",
    "description": "Greets, waits a moment, then branches on the name's length",
    "input": {"type": "object", "required": ["name"],
              "properties": {"name": {"type": "string", "minLength": 1}}},
    "steps": [
        {"id": "greet", "type": "transform", "value": {"greeting": "hello {{ input.name }}"}},
        {"id": "pause", "type": "delay", "duration": "0.6s", "depends_on": ["greet"]},
        {"id": "long_name", "type": "condition", "depends_on": ["pause"],
         "if": "{{ input.name | length > 3 }}", "then": ["shout"], "else": ["whisper"]},
        {"id": "shout", "type": "transform", "value": "{{ input.name | upper }}"},
        {"id": "whisper", "type": "transform", "value": "{{ input.name | lower }}"},
        {"id": "audit", "type": "delay", "duration": "0.3s", "depends_on": ["greet"]},
        {"id": "done", "type": "transform", "depends_on": ["shout", "whisper", "audit"],
         "value": {"shout": "{{ steps.shout.output }}",
                   "whisper": "{{ steps.whisper.output }}"}},
    ],
}

APPROVAL: dict[str, Any] = {
    "name": "ui-approval",
    "description": "A person signs off before the release step runs",
    "steps": [
        {"id": "build", "type": "transform", "value": {"artifact": "app-1.2.3.tar.gz"}},
        {"id": "sign_off", "type": "approval", "depends_on": ["build"]},
        {"id": "release", "type": "transform", "depends_on": ["sign_off"],
         "value": {"released": "{{ steps.build.output.artifact }}"}},
    ],
}

FAILING: dict[str, Any] = {
    "name": "ui-failing",
    "description": "A step that logs while it works, then one that fails",
    "steps": [
        {"id": "work", "type": "python", "call": "browser.steps_for_ui:report",
         "with": {"seconds": 1.5}},
        {"id": "boom", "type": "python", "call": "browser.steps_for_ui:explode",
         "with": {"reason": "the disk is full"}, "depends_on": ["work"],
         "retry": {"max_retries": 1, "initial_delay": "10ms"}},
        {"id": "after", "type": "transform", "value": 1, "depends_on": ["boom"]},
    ],
}

PARENT: dict[str, Any] = {
    "name": "ui-parent",
    "description": "Runs ui-pipeline as a child workflow",
    "steps": [
        {"id": "child", "type": "workflow", "workflow": "ui-pipeline",
         "input": {"name": "Linus"}},
    ],
}


def fan_out(n: int) -> dict[str, Any]:
    """``n`` independent transform steps joined by one step: the 10,000-step run page."""
    steps: list[dict[str, Any]] = [{"id": "start", "type": "transform", "value": 0}]
    steps += [{"id": f"s{i:05d}", "type": "transform", "value": i, "depends_on": ["start"]}
              for i in range(n)]
    steps.append({"id": "join", "type": "transform", "value": "done",
                  "depends_on": [f"s{i:05d}" for i in range(n)]})
    return {"name": f"fan-out-{n}", "steps": steps}


def chain(n: int) -> dict[str, Any]:
    """``n`` steps one after the other: a deep graph."""
    steps: list[dict[str, Any]] = [{"id": "c0000", "type": "transform", "value": 0}]
    steps += [{"id": f"c{i:04d}", "type": "transform", "value": i,
               "depends_on": [f"c{i - 1:04d}"]} for i in range(1, n)]
    return {"name": f"chain-{n}", "steps": steps}


def wide_map(n: int) -> dict[str, Any]:
    """A map of ``n`` transform items (more than one page of GET /api/runs/{id})."""
    return {"name": f"wide-map-{n}",
            "input": {"type": "object", "properties": {"xs": {"type": "array"}}},
            "steps": [{"id": "m", "type": "map", "over": "{{ input.xs }}",
                       "step": {"type": "transform", "value": "{{ item }}"}}]}


REVIEW: dict[str, Any] = {
    "name": "ui-review",
    "description": "Builds a release, drafts its notes, waits for a person to approve them",
    "input": {"type": "object", "required": ["version"]},
    "steps": [
        {"id": "checkout", "type": "python", "call": "browser.steps_for_ui:report",
         "with": {"seconds": 0.3}},
        {"id": "lint", "type": "python", "call": "browser.steps_for_ui:report",
         "with": {"seconds": 0.2}, "depends_on": ["checkout"]},
        {"id": "unit_tests", "type": "python", "call": "browser.steps_for_ui:report",
         "with": {"seconds": 0.4}, "depends_on": ["checkout"]},
        {"id": "build", "type": "python", "call": "browser.steps_for_ui:report",
         "with": {"seconds": 0.3}, "depends_on": ["lint", "unit_tests"]},
        {"id": "notes", "type": "transform", "depends_on": ["build"],
         "value": {"title": "plait {{ input.version }}",
                   "changes": ["Approvals show what to decide", "The graph fits its box",
                               "<b>markup stays text</b>"],
                   "risk": "low"}},
        {"id": "review", "type": "approval", "depends_on": ["notes"],
         "prompt": "Publish the release notes of {{ input.version }} to customers?",
         "show": "{{ steps.notes.output }}"},
        {"id": "publish", "type": "python", "call": "browser.steps_for_ui:report",
         "with": {"seconds": 0.3}, "depends_on": ["review"]},
        {"id": "announce", "type": "transform", "depends_on": ["publish"],
         "value": "released {{ input.version }}"},
    ],
}

MAP_RUNNING: dict[str, Any] = {
    "name": "ui-map-running",
    "description": "A map whose items take a few seconds",
    "steps": [{"id": "fan", "type": "map", "over": "{{ [1, 2, 3] }}",
               "step": {"type": "python", "call": "browser.steps_for_ui:report",
                        "with": {"seconds": 4}}}],
}
