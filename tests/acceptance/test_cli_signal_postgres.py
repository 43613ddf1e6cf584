"""``plait signal`` on PostgreSQL leaves the run to the workers: it stores the event,
wakes them and follows the run like ``plait run --db postgresql://`` (exit codes as
run); a second event of the name is refused (exit 1); a decision given while a Python
step waits for an event reaches it on the workers."""

from __future__ import annotations

import json
import textwrap

import pytest

from conftest import plait_worker

pytestmark = pytest.mark.postgres

FLOW = """
name: paid-pg
steps:
  - {id: paid, type: event, event: paid}
  - {id: receipt, type: transform, depends_on: [paid], value: "{{ steps.paid.output }}"}
"""


def test_a_signal_continues_the_run_on_the_workers(plait, tmp_path, pg_database):
    (tmp_path / "flow.yaml").write_text(textwrap.dedent(FLOW).lstrip())
    env = {"PLAIT_DB": pg_database}
    with plait_worker(pg_database, tmp_path):
        first = plait("run", "flow.yaml", "--json", env=env)
        assert first.returncode == 3, first.stderr
        run_id = json.loads(first.stdout)["run_id"]
        sent = plait("signal", run_id, "paid", "--data", '{"amount": 3}', "--json", env=env)
        assert sent.returncode == 0, sent.stderr
        done = json.loads(sent.stdout)
        assert done["status"] == "completed"
        assert done["steps"]["receipt"]["output"] == {"amount": 3}
        again = plait("signal", run_id, "paid", env=env)
        assert again.returncode == 2 and "is completed" in again.stderr


MIXED = """
name: mixed-pg
steps:
  - {id: ship, type: python, call: "mixed_pg_steps:ship"}
"""

MIXED_STEPS = """
async def ship(ctx):
    go = await ctx.wait_for_event("go")
    decision = await ctx.wait_for_approval(prompt="ship?")
    return {"go": go, "data": decision["data"]}
"""


def test_a_decision_given_while_the_step_waits_for_an_event_reaches_it_on_the_workers(
        plait, tmp_path, pg_database):
    (tmp_path / "flow.yaml").write_text(textwrap.dedent(MIXED).lstrip())
    (tmp_path / "mixed_pg_steps.py").write_text(textwrap.dedent(MIXED_STEPS).lstrip())
    env = {"PLAIT_DB": pg_database}
    with plait_worker(pg_database, tmp_path):
        first = plait("run", "flow.yaml", "--json", env=env)
        assert first.returncode == 3, first.stderr
        run_id = json.loads(first.stdout)["run_id"]
        assert json.loads(first.stdout)["steps"]["ship"]["waiting"]["kind"] == "event"
        early = plait("approve", run_id, "ship", "--data", '"early"', "--detach", env=env)
        assert early.returncode == 0, early.stderr
        sent = plait("signal", run_id, "go", "--data", "1", "--json", env=env)
        assert sent.returncode == 0, sent.stderr
        done = json.loads(sent.stdout)
        assert done["status"] == "completed"
        assert done["steps"]["ship"]["output"] == {"go": 1, "data": "early"}
