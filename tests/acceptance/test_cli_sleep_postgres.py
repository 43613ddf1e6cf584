"""``plait run --db postgresql://`` of a flow that sleeps, with a ``plait worker``
process: the run is stored ``waiting`` with its due time while it sleeps, held by no
worker, and ``plait run`` follows it until a worker continues it at that time."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import pgutil
from conftest import plait_worker

pytestmark = pytest.mark.postgres

FLOW = """
name: napping
steps:
  - {id: nap, type: delay, duration: 2s}
  - {id: after, type: transform, depends_on: [nap], value: woke}
"""


@pytest.fixture
def cwd(tmp_path: Path, pg_database: str) -> Iterator[Path]:
    (tmp_path / "flow.yaml").write_text(textwrap.dedent(FLOW).lstrip())
    with plait_worker(pg_database, tmp_path):
        yield tmp_path


def test_plait_run_follows_a_sleeping_run_until_a_worker_wakes_it(
        plait, spawn, waiter, cwd: Path, pg_database: str) -> None:
    env = {"PLAIT_DB": pg_database}
    runner = spawn("run", "flow.yaml", "--json", cwd=cwd, env=env)

    def stored_waiting() -> bool:
        listed = plait("runs", "--json", "--status", "waiting", cwd=cwd, env=env)
        return any(r["workflow"] == "napping" for r in json.loads(listed.stdout)["runs"])

    waiter(stored_waiting, proc=runner, what="the sleeping run to be stored waiting")
    out, err = runner.communicate(timeout=30)
    assert runner.returncode == 0, err
    done = json.loads(out)
    assert done["status"] == "completed"
    assert done["steps"]["after"]["output"] == "woke"
    assert pgutil.run_status(pg_database, done["run_id"]) == "completed"
