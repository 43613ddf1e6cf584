"""A Python step that waits for a person and for events, in either order, through the
CLI on SQLite: every decision and every event reaches the step whatever the order they
come in (a decision given while the step waits for an event is kept until it asks),
each command continuing the run in its own process; and ``plait signal --detach``,
which leaves the run to a background process."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

FLOW = """
    name: mixed-waits
    steps:
      - {id: approve_first, type: python, call: "mixed_steps:approve_first"}
      - {id: event_first, type: python, call: "mixed_steps:event_first"}
"""

STEPS = """
    async def approve_first(ctx):
        decision = await ctx.wait_for_approval(prompt="start?")
        paid = await ctx.wait_for_event("paid")
        return {"data": decision["data"], "paid": paid}

    async def event_first(ctx):
        go = await ctx.wait_for_event("go")
        decision = await ctx.wait_for_approval(prompt="ship?")
        return {"go": go, "data": decision["data"]}
"""


def _steps(proc) -> dict[str, tuple[str, object, str | None]]:
    """step -> (status, output, what it waits for) of a command's --json result."""
    result = json.loads(proc.stdout)
    return {sid: (s["status"], s["output"], (s["waiting"] or {}).get("kind"))
            for sid, s in result["steps"].items()}


def _waiting(plait, write) -> str:
    write("flow.yaml", FLOW)
    write("mixed_steps.py", STEPS)
    first = plait("run", "flow.yaml", "--json")
    assert first.returncode == 3, first.stderr
    assert {s: w for s, (_, _, w) in _steps(first).items()} == {
        "approve_first": "approval", "event_first": "event"}
    return json.loads(first.stdout)["run_id"]


def test_a_decision_given_while_the_step_waits_for_an_event_is_applied(plait, write):
    run_id = _waiting(plait, write)
    # decided before the step asks: kept, the step still waits for its event
    early = plait("approve", run_id, "event_first", "--data", '"early"', "--json")
    assert early.returncode == 3, early.stderr
    assert _steps(early)["event_first"] == ("waiting", None, "event")

    go = plait("signal", run_id, "go", "--data", '"now"', "--json")
    assert go.returncode == 3, go.stderr
    assert _steps(go)["event_first"] == ("completed", {"go": "now", "data": "early"}, None)

    approved = plait("approve", run_id, "approve_first", "--data", '"A"', "--json")
    assert approved.returncode == 3, approved.stderr
    assert _steps(approved)["approve_first"] == ("waiting", None, "event")
    resumed = plait("resume", run_id, "--json")  # another process: nothing is lost
    assert resumed.returncode == 3, resumed.stderr
    assert _steps(resumed)["approve_first"] == ("waiting", None, "event")

    paid = plait("signal", run_id, "paid", "--data", "5", "--json")
    assert paid.returncode == 0, paid.stderr
    done = json.loads(paid.stdout)
    assert done["status"] == "completed"
    assert done["steps"]["approve_first"]["output"] == {"data": "A", "paid": 5}
    # approved once, then the event: each wait cost one attempt, no more
    assert done["steps"]["approve_first"]["attempts"] == 3
    assert done["steps"]["event_first"]["attempts"] == 2


def test_a_rejection_given_while_the_step_waits_for_an_event_fails_it(plait, write):
    run_id = _waiting(plait, write)
    rejected = plait("approve", run_id, "event_first", "--reject", "--by", "bob")
    assert rejected.returncode == 3, rejected.stderr
    go = plait("signal", run_id, "go", "--json")
    assert go.returncode == 3, go.stderr
    result = json.loads(go.stdout)
    assert result["steps"]["event_first"]["status"] == "failed"
    assert result["steps"]["event_first"]["error"] == "rejected by bob"
    again = plait("approve", run_id, "event_first")
    assert again.returncode != 0 and "the first decision stands" in again.stderr


def test_events_sent_before_the_steps_ask_and_decisions_after(plait, write):
    run_id = _waiting(plait, write)
    early = plait("signal", run_id, "paid", "--data", '"paid early"', "--json")
    assert early.returncode == 3, early.stderr
    go = plait("signal", run_id, "go", "--data", "1", "--json")
    assert go.returncode == 3, go.stderr
    assert _steps(go)["event_first"] == ("waiting", None, "approval")
    first = plait("approve", run_id, "approve_first", "--data", "2", "--json")
    assert first.returncode == 3, first.stderr
    assert _steps(first)["approve_first"] == (
        "completed", {"data": 2, "paid": "paid early"}, None)
    last = plait("approve", run_id, "event_first", "--data", "3", "--json")
    assert last.returncode == 0, last.stderr
    assert _steps(last)["event_first"] == ("completed", {"go": 1, "data": 3}, None)


DETACHED = """
    name: signal-detached
    steps:
      - {id: agent, type: python, call: "detached_steps:agent"}
      - {id: after, type: transform, depends_on: [agent], value: "{{ steps.agent.output }}"}
"""

DETACHED_STEPS = """
    import time
    from pathlib import Path

    async def agent(ctx):
        paid = await ctx.wait_for_event("paid")
        release = Path(__file__).with_name("release")
        while not release.exists():  # the test lets it end once the command returned
            time.sleep(0.02)
        return {"paid": paid, "pid": __import__("os").getpid()}
"""


def test_signal_detach_leaves_the_run_to_a_background_process(plait, write, waiter,
                                                               tmp_path: Path):
    write("defs/signal-detached.yaml", DETACHED)
    write("defs/detached_steps.py", DETACHED_STEPS)
    first = plait("run", "defs/signal-detached.yaml", "--json")
    assert first.returncode == 3, first.stderr
    run_id = json.loads(first.stdout)["run_id"]

    sent = plait("signal", run_id, "paid", "--data", '{"amount": 5}', "--detach", "--json")
    assert sent.returncode == 0, sent.stderr
    started = json.loads(sent.stdout)
    assert started["run_id"] == run_id and started["pid"] != os.getpid()
    log = tmp_path / ".plait" / "logs" / f"{run_id}.log"
    assert started["log"] == str(log)
    # returned while the step cannot have ended (it waits for the release file)
    shown = json.loads(plait("show", run_id, "--json").stdout)
    assert shown["status"] != "completed"
    try:
        (tmp_path / "defs" / "release").write_text("go")
        waiter(lambda: _exited(started["pid"]), what="the background run to end")
    finally:
        _kill(started["pid"])
    shown = json.loads(plait("show", run_id, "--json").stdout)
    assert shown["status"] == "completed", log.read_text()
    assert shown["output"]["after"]["paid"] == {"amount": 5}
    assert shown["output"]["after"]["pid"] == started["pid"]  # run in the background
    assert "run completed" in log.read_text()

    late = plait("signal", run_id, "paid", "--detach")
    assert late.returncode == 2 and "is completed" in late.stderr


def _exited(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not our child: probe it
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    return waited == pid


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
