"""Four scheduler processes tick one SQLite file at the same moments: every fire of
every schedule starts exactly one run, and the processes create them between
them without an error ("database is locked" or any other)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from plait import Workflow
from plait.store import RunFilter, open_store

pytestmark = pytest.mark.slow  # starts scheduler processes

TICKER = Path(__file__).with_name("schedule_ticker.py")
PROCESSES = 4
T0 = 1_717_200_000.0  # 2024-06-01 00:00:00 UTC
# the first tick sees the schedules; then 10 minutes, ticked every 20 s; then a gap of
# an hour and one last tick (catch_up: all starts the missed fires, skip the latest)
TICKS = [T0 + 20 * k for k in range(31)] + [T0 + 600 + 3600 + 5]
PACE = 0.05  # wall-clock seconds between two ticks
DEFINITION = {
    "name": "cluster",
    "schedules": [
        {"cron": "* * * * *", "input": {"which": "minutely"}},
        {"cron": "*/5 * * * *", "catch_up": "all", "input": {"which": "all"}},
        {"cron": "*/5 * * * *", "catch_up": "skip", "input": {"which": "skip"}},
    ],
    "steps": [{"id": "a", "type": "transform", "value": "{{ input.which }}"}],
}


async def test_scheduler_processes_on_one_file_start_each_fire_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/cluster.db"
    store = open_store(url)
    await store.open()
    checked = Workflow.from_dict(DEFINITION).validate()
    await store.save_workflow(checked.name, checked.definition_json, checked.fingerprint,
                              None)
    start = time.time() + 3.0  # every process is up by then (imports take about 1 s)
    args = [sys.executable, str(TICKER), url, str(start), str(PACE), *map(str, TICKS)]
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(PROCESSES)]
    created: list[float] = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        created += json.loads(out)
    try:
        runs = await store.list_runs(RunFilter(workflow="cluster", limit=10_000))
        fires: dict[str, list[float]] = {"minutely": [], "all": [], "skip": []}
        for run in runs:
            [note] = [e.data for e in await store.get_events(run.run_id) if e.kind == "note"]
            fires[run.input["which"]].append(note["schedule"]["fire_time"])  # type: ignore[index,call-overload]
    finally:
        await store.close()

    minutely = [T0 + 60 * k for k in range(1, 11)] + [T0 + 600 + 3600]  # skip after the gap
    every_five = [T0 + 300 * k for k in range(1, 15)]  # 00:05 ... 01:10, all of them
    assert sorted(fires["minutely"]) == minutely
    assert sorted(fires["all"]) == every_five
    assert sorted(fires["skip"]) == [T0 + 300, T0 + 600, T0 + 4200]
    # each run was created by exactly one process (which one varies: they race)
    assert sorted(created) == sorted(minutely + every_five + [T0 + 300, T0 + 600, T0 + 4200])
