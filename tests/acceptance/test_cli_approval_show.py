"""``plait show`` (and ``plait run --json``) of a run waiting for approval: the
rendered prompt and the content under review (``show:``), in text and in ``--json``'s
``waiting`` entry."""

from __future__ import annotations

import json

FLOW = """
    name: release-review
    steps:
      - id: notes
        type: transform
        value: {title: "plait {{ input.version }}", changes: [faster, safer]}
      - id: review
        type: approval
        depends_on: [notes]
        prompt: "Publish {{ steps.notes.output.title }}?"
        show: "{{ steps.notes.output }}"
      - id: publish
        type: transform
        depends_on: [review]
        value: done
"""


def test_show_prints_what_a_waiting_approval_asks(plait, write):
    write("flow.yaml", FLOW)
    db = "sqlite:///runs.db"
    first = plait("run", "flow.yaml", "--db", db, "--input", '{"version": "2.4"}', "--json")
    assert first.returncode == 3, first.stderr
    ran = json.loads(first.stdout)
    run_id = ran["run_id"]
    # plait run --json says what the run waits for too
    assert ran["steps"]["review"]["waiting"]["prompt"] == "Publish plait 2.4?"
    assert ran["steps"]["notes"]["waiting"] is None

    shown = plait("show", run_id, "--db", db, "--json")
    assert shown.returncode == 0, shown.stderr
    steps = json.loads(shown.stdout)["steps"]
    assert steps["review"]["waiting"] == {
        "kind": "approval", "prompt": "Publish plait 2.4?",
        "show": {"title": "plait 2.4", "changes": ["faster", "safer"]},
        "event": None, "until": None, "child_run_id": None}
    assert steps["notes"]["waiting"] is None and steps["publish"]["waiting"] is None
    attempts = [a for a in json.loads(shown.stdout)["attempts"] if a["step"] == "review"]
    assert [a["status"] for a in attempts] == ["waiting"]

    text = plait("show", run_id, "--db", db)
    assert text.returncode == 0, text.stderr
    section = text.stdout.split("waiting for approval: review\n", 1)[1]
    assert section.startswith("prompt  Publish plait 2.4?\nshow\n  {\n")
    assert '    "title": "plait 2.4",' in section
    assert f"plait approve {run_id} review" in text.stdout

    approved = plait("approve", run_id, "review", "--db", db)
    assert approved.returncode == 0, approved.stderr
    after = json.loads(plait("show", run_id, "--db", db, "--json").stdout)
    assert after["status"] == "completed"
    assert after["steps"]["review"]["waiting"] is None
