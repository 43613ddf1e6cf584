"""Kill a real ``plait run`` with SIGKILL at many moments, resume, and prove from a
side-effect log that every run completes and no step whose completion was committed
ran again.

Kill points are drawn from a seeded generator, so a failure reproduces with the same
seed (``PLAIT_CRASH_SEED``).  A kill that lands before the run is stored or after it
finished interrupts nothing; only kills that interrupted a run count towards the
required number.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

import plaitproc
from plait.runtime.engine import Engine
from plait.store import RunFilter, open_store

SEED = int(os.environ.get("PLAIT_CRASH_SEED", "7"))
# x 5 workflows = 20 interrupted runs at least in `make test` (each try starts a
# process: about a second); `make soak` sets 100 per workflow
KILLS_PER_WORKFLOW = int(os.environ.get("PLAIT_CRASH_KILLS", "4"))
MAX_TRIES_PER_WORKFLOW = 6 * KILLS_PER_WORKFLOW  # under load many kills land after the end
# a try starts `plait run`, kills it within one run's length and resumes: a few seconds,
# up to ten on a loaded machine
pytestmark = pytest.mark.timeout(max(120, 10 * MAX_TRIES_PER_WORKFLOW))

STEPS_MODULE = '''
import os
import time


def _log(kind, step):
    with open(os.environ["CRASH_LOG"], "a") as f:
        f.write(f"{kind} {step}\\n")
        f.flush()
        os.fsync(f.fileno())


def work(ctx, ms=30):
    _log("start", ctx.step_id)
    time.sleep(ms / 1000)
    _log("done", ctx.step_id)
    return {"step": ctx.step_id, "key": ctx.idempotency_key}


def flaky(ctx, ms=30):
    _log("start", ctx.step_id)
    time.sleep(ms / 1000)
    if ctx.attempt == 1:
        raise ConnectionError("first attempts always fail")
    _log("done", ctx.step_id)
    return ctx.attempt


def item(ctx, ms=30):
    _log("start", ctx.step_id)
    time.sleep(ms / 1000)
    _log("done", ctx.step_id)
    return {"items": ctx.step_id}
'''

WORKFLOWS = {
    "chain": """
        name: crash-chain
        steps:
          - {id: a, type: python, call: "crashmod:work"}
          - {id: b, type: python, call: "crashmod:work", depends_on: [a]}
          - {id: c, type: python, call: "crashmod:work", depends_on: [b]}
          - {id: d, type: python, call: "crashmod:work", depends_on: [c]}
          - {id: e, type: python, call: "crashmod:work", depends_on: [d]}
          - {id: f, type: python, call: "crashmod:work", depends_on: [e]}
    """,
    "fanout": """
        name: crash-fanout
        concurrency: 3
        steps:
          - {id: src, type: python, call: "crashmod:work"}
          - {id: m1, type: python, call: "crashmod:work", depends_on: [src]}
          - {id: m2, type: python, call: "crashmod:work", depends_on: [src]}
          - {id: m3, type: python, call: "crashmod:work", depends_on: [src]}
          - {id: m4, type: python, call: "crashmod:work", depends_on: [src]}
          - {id: m5, type: python, call: "crashmod:work", depends_on: [src]}
          - {id: sink, type: python, call: "crashmod:work", depends_on: [m1, m2, m3, m4, m5]}
    """,
    "branches": """
        name: crash-branches
        steps:
          - {id: a, type: python, call: "crashmod:work"}
          - {id: check, type: condition, if: "{{ steps.a.output.step == 'a' }}",
             then: ["yes"], else: ["no"], depends_on: [a]}
          - {id: "yes", type: python, call: "crashmod:work"}
          - {id: "no", type: python, call: "crashmod:work"}
          - {id: wait, type: delay, duration: 0.15, depends_on: ["yes"]}
          - {id: join, type: python, call: "crashmod:work", depends_on: [wait, "no"]}
    """,
    "retries": """
        name: crash-retries
        steps:
          - {id: a, type: python, call: "crashmod:work"}
          - {id: f1, type: python, call: "crashmod:flaky", depends_on: [a],
             retry: {max_retries: 3, initial_delay: 0.05, jitter: 0}}
          - {id: f2, type: python, call: "crashmod:flaky", depends_on: [a],
             retry: {max_retries: 3, initial_delay: 0.05, jitter: 0}}
          - {id: b, type: python, call: "crashmod:work", depends_on: [f1, f2]}
    """,
    "reducers": """
        name: crash-reducers
        reducers: {items: append}
        steps:
          - {id: a, type: python, call: "crashmod:work"}
          - {id: w1, type: python, call: "crashmod:item", depends_on: [a], outputs: [items]}
          - {id: w2, type: python, call: "crashmod:item", depends_on: [a], outputs: [items]}
          - {id: w3, type: python, call: "crashmod:item", depends_on: [a], outputs: [items]}
          - {id: total, type: transform, depends_on: [w1, w2, w3],
             value: "{{ state['items'] | sort }}"}
    """,
}

EXPECTED_SKIPPED = {"branches": {"no"}}


def _counts(log: Path, kind: str) -> Counter[str]:
    if not log.exists():
        return Counter()
    return Counter(line.split()[1] for line in log.read_text().splitlines()
                   if line.startswith(kind + " "))


def _start_run(flow: Path, db: str, log: Path, cwd: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "CRASH_LOG": str(log), "PYTHONPATH": str(cwd)}
    return plaitproc.popen(["run", str(flow), "--db", db,
                             "--quiet"], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, text=False)


async def _state(db: str, workflow: str, known: set[str]) -> tuple[str | None, dict[str, str],
                                                                 dict[str, int], str | None]:
    """The newest run of ``workflow`` not seen before: its id, step statuses, attempts."""
    store = open_store(db)
    await store.open()
    try:
        runs = [r for r in await store.list_runs(RunFilter(workflow=workflow, limit=100))
                if r.run_id not in known]
        if not runs:
            return None, {}, {}, None
        run = runs[0]
        steps = await store.get_steps(run.run_id)
        return (run.run_id, {s.step_id: str(s.status) for s in steps},
                {s.step_id: s.attempts for s in steps}, str(run.status))
    finally:
        await store.close()


async def _resume(db: str, run_id: str) -> tuple[str, dict[str, str], dict[str, int]]:
    store = open_store(db)
    await store.open()
    engine = Engine(store)
    try:
        result = await engine.resume(run_id)
    finally:
        engine.close()
        await store.close()
    return (result.status, {k: v.status for k, v in result.steps.items()},
            {k: v.attempts for k, v in result.steps.items()})


def _wait_for(path: Path, proc: subprocess.Popen[bytes], timeout: float = 30) -> float:
    """Wait until ``path`` exists (the run's first side effect); the time it took."""
    began = time.monotonic()
    while not path.exists() and proc.poll() is None:
        if time.monotonic() - began > timeout:
            raise AssertionError(f"{path} never appeared")
        time.sleep(0.002)
    return time.monotonic() - began


def _measure(flow: Path, db: str, tmp: Path) -> tuple[float, float]:
    """(process start to first side effect, first side effect to exit) of a whole run."""
    log = tmp / "measure.log"
    began = time.monotonic()
    proc = _start_run(flow, db, log, tmp)
    startup = _wait_for(log, proc)
    assert proc.wait(timeout=60) == 0, "the workflow must complete when not killed"
    return startup, time.monotonic() - began - startup


@pytest.mark.parametrize("name", sorted(WORKFLOWS))
def test_runs_killed_at_any_moment_resume_without_rerunning_completed_steps(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "crashmod.py").write_text(STEPS_MODULE)
    flow = tmp_path / f"{name}.yaml"
    flow.write_text(textwrap.dedent(WORKFLOWS[name]))
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    monkeypatch.syspath_prepend(str(tmp_path))
    workflow = f"crash-{name}"
    startup, running = _measure(flow, db, tmp_path)
    rng = random.Random(f"{SEED}-{name}")
    known: set[str] = set()
    interrupted = 0
    for attempt in range(MAX_TRIES_PER_WORKFLOW):
        if interrupted >= KILLS_PER_WORKFLOW:
            break
        log = tmp_path / f"side-effects-{attempt}.log"
        monkeypatch.setenv("CRASH_LOG", str(log))
        proc = _start_run(flow, db, log, tmp_path)
        if rng.random() < 0.2:  # anywhere in the process's life, start-up included
            time.sleep(rng.uniform(0, startup + running))
        else:  # while the run executes: after its first side effect
            _wait_for(log, proc)
            time.sleep(rng.uniform(0, running))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        run_id, before, attempts_before, status = asyncio.run(_state(db, workflow, known))
        if run_id is None:
            continue  # killed before the run was stored: nothing to resume
        known.add(run_id)
        if status == "completed":
            continue  # killed after the run ended: nothing was interrupted
        interrupted += 1
        committed = {s for s, st in before.items() if st == "completed"}
        starts_before = _counts(log, "start")
        final, after, attempts_after = asyncio.run(_resume(db, run_id))
        where = f"{name}: kill #{attempt} (seed {SEED}) of run {run_id}"
        assert final == "completed", f"{where}: resumed run ended {final}: {after}"
        starts_after = _counts(log, "start")
        for step in committed:
            assert starts_after[step] == starts_before[step], (
                f"{where}: step {step!r} was completed before the kill and ran again")
        skipped = EXPECTED_SKIPPED.get(name, set())
        for step, st in after.items():
            assert st == ("skipped" if step in skipped else "completed"), (where, step, st)
        for step, st in before.items():
            if st == "running":  # the interrupted attempt counts as a failed attempt
                assert attempts_after[step] > attempts_before[step], (where, step)
        done = _counts(log, "done")
        ran_python = {s for s in after if s not in skipped and s not in ("check", "wait",
                                                                         "total")}
        for step in ran_python:
            assert done[step] >= 1, f"{where}: {step!r} completed without running"
    assert interrupted >= KILLS_PER_WORKFLOW, (
        f"{name}: only {interrupted} kills interrupted a run in {MAX_TRIES_PER_WORKFLOW} tries")
