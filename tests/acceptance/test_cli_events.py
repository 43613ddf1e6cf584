"""Events and sleeps through the CLI on SQLite: ``plait signal`` stores an event and
continues the waiting run in the foreground (exit codes as ``plait run``); the
``event`` step's output is the event's data and its timeout fails it; a run killed
while a step sleeps is resumed after the time without repeating journaled calls."""

from __future__ import annotations

import json
import signal
import sqlite3
import time

FLOW = """
    name: ev-cli
    steps:
      - {id: go, type: event, event: go, timeout: 1h}
      - id: agent
        type: python
        call: ev_steps:agent
      - id: both
        type: transform
        depends_on: [go, agent]
        value: {go: "{{ steps.go.output }}", agent: "{{ steps.agent.output }}"}
"""

STEPS = """
    from pathlib import Path

    def _count():
        path = Path(__file__).with_name("calls.txt")
        n = int(path.read_text()) + 1 if path.exists() else 1
        path.write_text(str(n))
        return n

    async def agent(ctx):
        n = await ctx.run("count", _count)
        paid = await ctx.wait_for_event("paid")
        return {"paid": paid, "calls": n}

    async def napper(ctx):
        n = await ctx.run("count", _count)
        await ctx.sleep("nap", "1500ms")
        return {"calls": n, "attempt": ctx.attempt}
"""

TIMEOUT_FLOW = """
    name: ev-timeout
    steps:
      - {id: go, type: event, event: go, timeout: 100ms}
"""

NAP_FLOW = """
    name: ev-nap
    steps:
      - {id: nap, type: python, call: "ev_steps:napper"}
"""


def test_signal_continues_the_run_in_the_foreground(plait, write):
    write("flow.yaml", FLOW)
    write("ev_steps.py", STEPS)
    first = plait("run", "flow.yaml", "--json")
    assert first.returncode == 3, first.stderr
    run_id = json.loads(first.stdout)["run_id"]

    text = plait("show", run_id).stdout
    assert "waiting for event go: go" in text and "waiting for event paid: agent" in text
    assert f"plait signal {run_id} paid [--data JSON]" in text
    assert "plait approve" not in text
    shown = json.loads(plait("show", run_id, "--json").stdout)
    assert shown["steps"]["go"]["waiting"]["kind"] == "event"
    assert shown["steps"]["go"]["waiting"]["event"] == "go"
    assert shown["steps"]["go"]["waiting"]["until"] is not None
    assert shown["steps"]["agent"]["waiting"]["event"] == "paid"

    paid = plait("signal", run_id, "paid", "--data", '{"amount": 5}', "--json")
    assert paid.returncode == 3, paid.stderr  # go still waits
    assert json.loads(paid.stdout)["steps"]["agent"]["status"] == "completed"
    again = plait("signal", run_id, "paid", "--data", "6")
    assert again.returncode == 1 and "already has an event 'paid'" in again.stderr
    assert "first one sent stands" in again.stderr

    go = plait("signal", run_id, "go", "--data", '"now"', "--json")
    assert go.returncode == 0, go.stderr
    done = json.loads(go.stdout)
    assert done["status"] == "completed"
    assert done["steps"]["both"]["output"] == {"go": "now",
                                               "agent": {"paid": {"amount": 5}, "calls": 1}}
    late = plait("signal", run_id, "late")
    assert late.returncode == 2 and "is completed" in late.stderr


def test_bad_signals_are_refused_storing_nothing(plait, write):
    write("flow.yaml", FLOW)
    write("ev_steps.py", STEPS)
    run_id = json.loads(plait("run", "flow.yaml", "--json").stdout)["run_id"]
    for args, message in ((["a/b"], "cannot contain '/'"), ([""], "cannot be empty"),
                          (["x" * 200], "at most 199 characters"),
                          (["go", "--data", "{nope"], "--data")):
        refused = plait("signal", run_id, *args)
        assert refused.returncode == 2, (args, refused.stderr)
        assert message in refused.stderr, refused.stderr
    unknown = plait("signal", "0" * 32, "go")
    assert unknown.returncode == 2 and "0" * 32 in unknown.stderr
    shown = json.loads(plait("show", run_id, "--json").stdout)
    assert shown["steps"]["go"]["status"] == "waiting"


def test_an_event_step_times_out_naming_the_event(plait, write, waiter):
    write("flow.yaml", TIMEOUT_FLOW)
    first = plait("run", "flow.yaml", "--json")
    assert first.returncode == 3, first.stderr
    run_id = json.loads(first.stdout)["run_id"]
    started = time.time()
    waiter(lambda: time.time() - started > 0.2, what="the event's timeout")
    resumed = plait("resume", run_id, "--json")
    assert resumed.returncode == 1, resumed.stderr
    error = json.loads(resumed.stdout)["steps"]["go"]["error"]
    assert "no event 'go' within 100ms" in error


def test_a_run_killed_while_sleeping_resumes_after_the_time(plait, write, spawn, waiter,
                                                            tmp_path):
    write("flow.yaml", NAP_FLOW)
    write("ev_steps.py", STEPS)
    proc = spawn("run", "flow.yaml", "--quiet")
    db = tmp_path / ".plait" / "plait.db"

    def sleeping() -> bool:
        if not db.exists():
            return False
        with sqlite3.connect(db) as conn:
            try:
                row = conn.execute("SELECT status FROM steps WHERE step_id = 'nap'").fetchone()
            except sqlite3.OperationalError:
                return False
        return row is not None and row[0] == "waiting"

    waiter(sleeping, proc=proc, what="the step to sleep")
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    with sqlite3.connect(db) as conn:
        run_id = conn.execute("SELECT run_id FROM runs").fetchone()[0]
    waiting = json.loads(plait("show", run_id, "--json").stdout)["steps"]["nap"]["waiting"]
    assert waiting["kind"] == "sleep" and waiting["until"] is not None
    resumed = plait("resume", run_id, "--json")
    assert resumed.returncode == 0, resumed.stderr
    done = json.loads(resumed.stdout)
    assert done["steps"]["nap"]["output"] == {"calls": 1, "attempt": 2}
    assert (tmp_path / "calls.txt").read_text() == "1"


LIVE_FLOW = """
    name: ev-live
    steps:
      - {id: gate, type: python, call: "live_steps:gate"}
      - {id: busy, type: python, call: "live_steps:busy"}
"""

LIVE_STEPS = """
    import os, time

    async def gate(ctx):
        return await ctx.wait_for_event("go")

    def busy():
        deadline = time.time() + 25
        while not os.path.exists("release") and time.time() < deadline:
            time.sleep(0.02)
        return "done"
"""


def test_a_live_run_takes_the_event_in(plait, write, spawn, waiter, tmp_path):
    write("flow.yaml", LIVE_FLOW)
    write("live_steps.py", LIVE_STEPS)
    proc = spawn("run", "flow.yaml", "--json")
    db = tmp_path / ".plait" / "plait.db"

    def gate_waits() -> bool:
        if not db.exists():
            return False
        with sqlite3.connect(db) as conn:
            try:
                row = conn.execute("SELECT status FROM steps WHERE step_id = 'gate'").fetchone()
            except sqlite3.OperationalError:
                return False
        return row is not None and row[0] == "waiting"

    waiter(gate_waits, proc=proc, what="the gate to wait")
    with sqlite3.connect(db) as conn:
        run_id = conn.execute("SELECT run_id FROM runs").fetchone()[0]
    sent = plait("signal", run_id, "go", "--data", '"yes"')
    assert sent.returncode == 0, sent.stderr
    assert "takes the event in" in sent.stdout + sent.stderr
    (tmp_path / "release").touch()
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert json.loads(out)["steps"]["gate"]["output"] == "yes"


SLEEP_FLOW = """
    name: ev-sleep
    steps:
      - {id: nap, type: delay, duration: 5s}
      - {id: after, type: transform, depends_on: [nap], value: "woke"}
"""


def _run_row(db) -> tuple[str, str, float | None] | None:
    """The stored run's (id, status, wake_at), None before it is stored."""
    if not db.exists():
        return None
    with sqlite3.connect(db) as conn:
        try:
            return conn.execute("SELECT run_id, status, wake_at FROM runs").fetchone()
        except sqlite3.OperationalError:
            return None


def test_a_foreground_sleep_is_stored_waiting_and_the_run_goes_on(plait, write, spawn,
                                                                  waiter, tmp_path):
    write("flow.yaml", SLEEP_FLOW)
    proc = spawn("run", "flow.yaml", "--json")
    db = tmp_path / ".plait" / "plait.db"

    def waiting() -> bool:
        row = _run_row(db)
        return row is not None and row[1] == "waiting"

    waiter(waiting, proc=proc, what="the run to be stored waiting")
    run_id = _run_row(db)[0]
    shown = plait("show", run_id, "--json")
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    assert doc["status"] == "waiting"
    assert doc["steps"]["nap"]["waiting"]["kind"] == "sleep"
    assert doc["wake_at"] is not None
    assert doc["wake_at"] == doc["steps"]["nap"]["waiting"]["until"]
    assert "continues" in plait("show", run_id).stdout
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err  # the foreground continued it by itself
    done = json.loads(out)
    assert done["status"] == "completed"
    assert done["steps"]["after"]["output"] == "woke"
    assert json.loads(plait("show", run_id, "--json").stdout)["wake_at"] is None


TIMED_OUT_FLOW = """
    name: ev-fg-timeout
    on_failure: fail_fast
    steps:
      - {id: go, type: event, event: go, timeout: 1s}
      - {id: nap, type: delay, duration: 1h}
"""


def test_an_event_timeout_fires_in_the_foreground(plait, write):
    write("flow.yaml", TIMED_OUT_FLOW)
    # the delay keeps the run in this process; the event's deadline fails the step at
    # its time, with no signal or resume (fail-fast then ends the run)
    ran = plait("run", "flow.yaml", "--json")
    assert ran.returncode == 1, ran.stderr
    done = json.loads(ran.stdout)
    assert "no event 'go' within 1s" in done["steps"]["go"]["error"]
    assert done["steps"]["nap"]["status"] == "cancelled"
