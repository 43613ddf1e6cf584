"""A ``plait run`` killed with SIGKILL in the middle of a map resumes with ``plait
resume`` without running again any item whose completion was committed: proved
from a side-effect ledger written by the items themselves."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import textwrap
import time
from collections import Counter
from pathlib import Path

import plaitproc
from plait.store import RunFilter, open_store

ITEMS_MODULE = '''
import os
import time


def fetch(item, ctx):
    with open(os.environ["MAP_LEDGER"], "a") as f:
        f.write(f"start {ctx.step_id}\\n")
    time.sleep(0.08)
    with open(os.environ["MAP_LEDGER"], "a") as f:
        f.write(f"done {ctx.step_id}\\n")
        f.flush()
        os.fsync(f.fileno())
    return item * 2
'''

FLOW = """
    name: crash-map
    steps:
      - {id: make, type: transform, value: "{{ input.n }}"}
      - id: fetch
        type: map
        depends_on: [make]
        over: "{{ steps.make.output }}"
        concurrency: 2
        step: {type: python, call: "mapitems:fetch", with: {item: "{{ item }}"}}
      - {id: total, type: transform, depends_on: [fetch],
         value: "{{ steps.fetch.output | sum }}"}
"""


async def _stored(db: str) -> tuple[str, dict[str, str]]:
    store = open_store(db)
    await store.open()
    try:
        run = (await store.list_runs(RunFilter(workflow="crash-map", limit=1)))[0]
        steps = await store.get_steps(run.run_id)
        return run.run_id, {s.step_id: str(s.status) for s in steps}
    finally:
        await store.close()


def test_a_map_killed_midway_resumes_without_rerunning_finished_items(
        tmp_path: Path) -> None:
    (tmp_path / "mapitems.py").write_text(ITEMS_MODULE)
    flow = tmp_path / "flow.yaml"
    flow.write_text(textwrap.dedent(FLOW))
    ledger = tmp_path / "ledger.log"
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    env = {**os.environ, "MAP_LEDGER": str(ledger), "PYTHONPATH": str(tmp_path)}
    items = list(range(10))
    proc = plaitproc.popen(["run", str(flow), "--db", db,
                             "--quiet", "--input", json.dumps({"n": items})],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, text=False)
    deadline = time.monotonic() + 30
    while ledger.read_text().count("done") < 4 if ledger.exists() else True:
        assert proc.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline, "no item finished in time"
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    run_id, before = asyncio.run(_stored(db))
    finished = {s for s, status in before.items() if s.startswith("fetch[")
                and status == "completed"}
    assert finished and len(finished) < len(items), before
    resumed = plaitproc.run(["resume", run_id, "--db", db,
                              "--json"], cwd=tmp_path, env=env, timeout=60)
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout)
    assert result["status"] == "completed"
    assert result["steps"]["fetch"]["output"] == [i * 2 for i in items]
    assert result["steps"]["total"]["output"] == sum(items) * 2
    done = Counter(line.split()[1] for line in ledger.read_text().splitlines()
                   if line.startswith("done "))
    assert all(done[f"fetch[{i}]"] >= 1 for i in items)
    for step in finished:  # committed before the kill: never ran again
        assert done[step] == 1, (step, done)
