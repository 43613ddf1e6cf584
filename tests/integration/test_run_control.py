"""``plait.get_run`` / ``resume`` / ``approve`` and their async twins, through the
public API, on a named memory store, SQLite and PostgreSQL (where the workers continue
a decided run), plus the warning about step functions defined in ``__main__``."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import plait
from plait import (
    DecisionTaken,
    RunError,
    RunNotFound,
    StepNotFound,
    StepNotWaiting,
    Workflow,
)

pytestmark = pytest.mark.slow  # starts a worker and a Python process


def publish(input: dict[str, object]) -> dict[str, object]:
    return {"draft": input.get("topic", "none")}


def ship(review: dict[str, object]) -> str:
    return f"shipped (approved by {review['by']})"


def gated() -> Workflow:
    wf = Workflow(f"gated-{uuid.uuid4().hex[:6]}")
    wf.add_step("publish", publish)
    wf.add_step("review", type="approval", depends_on=["publish"])
    wf.add_step("ship", ship, depends_on=["review"])
    return wf


@pytest.fixture(params=["memory", "sqlite",
                        pytest.param("postgresql", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store URL: a named memory store (shared within the process), a SQLite file,
    a PostgreSQL database of the module."""
    if request.param == "memory":
        yield f"memory://control-{uuid.uuid4().hex[:8]}"
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'runs.db'}"
    else:
        yield str(request.getfixturevalue("pg_database"))


def _pg(db: str) -> bool:
    return db.startswith("postgresql")


async def test_get_run_is_the_result_the_run_returned(db: str) -> None:
    wf = Workflow(f"plain-{uuid.uuid4().hex[:6]}")
    wf.add_step("publish", publish)
    ran = await wf.run_async({"topic": "agents"}, db=db)
    read = await plait.get_run_async(ran.run_id, db=db)
    assert read.to_json() == ran.to_json()
    assert (read.version, read.fingerprint) == (ran.version, ran.fingerprint)


async def test_approve_records_the_decision_and_the_first_one_stands(db: str) -> None:
    ran = await gated().run_async({"topic": "agents"}, db=db)
    assert ran.status == "waiting"
    waiting = await plait.get_run_async(ran.run_id, db=db)
    assert waiting.steps["review"].status == "waiting"
    decided = await plait.approve_async(ran.run_id, "review", data={"ok": 1}, db=db,
                                        by="ada")
    if _pg(db):  # handed to the workers: one continues it
        assert decided.status == "running"
        decided = await _driven_by_a_worker(db, ran.run_id)
    assert decided.status == "completed", decided.error
    assert decided.steps["review"].output["by"] == "ada"
    assert decided.steps["ship"].output == "shipped (approved by ada)"
    with pytest.raises(DecisionTaken) as caught:
        await plait.approve_async(ran.run_id, "review", approved=False, db=db, by="bob")
    assert caught.value.decision["by"] == "ada"
    assert "already approved by ada" in str(caught.value)


async def _driven_by_a_worker(db: str, run_id: str) -> plait.RunResult:
    from plait.runtime.worker import Worker

    async with plait.connect(db) as held:
        worker = Worker(held.store, name="w1", concurrency=2, lease=2.0, poll=0.1,
                        grace=2.0, schedules=False)
        task = asyncio.create_task(worker.run())
        try:
            for _ in range(200):
                result = await plait.get_run_async(run_id, db=held)
                if result.status in ("completed", "failed"):
                    return result
                await asyncio.sleep(0.05)
            raise AssertionError(f"run {run_id} was not continued by a worker")
        finally:
            worker.stop()
            await asyncio.wait_for(task, 15)


# on PostgreSQL the workers continue a decided run: covered by the approval above
@pytest.mark.parametrize("db", ["memory", "sqlite"], indirect=True)
async def test_a_rejection_fails_the_run(db: str) -> None:
    ran = await gated().run_async({}, db=db)
    rejected = await plait.approve_async(ran.run_id, "review", approved=False, db=db)
    assert rejected.status == "failed"
    assert rejected.steps["review"].status == "failed"


async def test_unknown_runs_and_steps_and_steps_that_do_not_wait_are_named(db: str) -> None:
    ran = await gated().run_async({}, db=db)
    with pytest.raises(RunNotFound):
        await plait.get_run_async("no-such-run", db=db)
    with pytest.raises(RunNotFound):
        await plait.approve_async("no-such-run", "review", db=db)
    with pytest.raises(StepNotFound, match="has no step 'reviw'.*did you mean 'review'"):
        await plait.approve_async(ran.run_id, "reviw", db=db)
    with pytest.raises(StepNotWaiting) as caught:
        await plait.approve_async(ran.run_id, "publish", db=db)
    assert isinstance(caught.value, RunError)
    assert (caught.value.step_id, caught.value.status) == ("publish", "completed")


async def test_resume_continues_a_stored_run_and_returns_a_finished_one_as_is(
        db: str) -> None:
    from plait.runtime.engine import Engine  # to store a run nobody executed

    wf = gated()
    async with plait.connect(db) as held:
        engine = Engine(held.store)
        try:
            run = await engine.submit(wf.validate(), {"topic": "t"})
        finally:
            engine.close()
    resumed = await plait.resume_async(run.run_id, db=db)
    assert resumed.status == "waiting"
    assert resumed.steps["publish"].output == {"draft": "t"}
    again = await plait.resume_async(run.run_id, db=db)  # waiting: nothing to run
    assert again.steps["publish"].attempts == 1


async def test_an_unnamed_memory_store_works_through_its_handle() -> None:
    async with plait.connect("memory://") as held:
        ran = await gated().run_async({}, db=held)
        done = await plait.approve_async(ran.run_id, "review", db=held)
        assert done.status == "completed"
        assert (await plait.get_run_async(ran.run_id, db=held)).status == "completed"
    with pytest.raises(RunNotFound):  # another unnamed memory store: its own runs
        await plait.get_run_async(ran.run_id, db="memory://")


def test_the_sync_functions_on_sqlite(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    ran = gated().run({}, db=db)
    assert plait.get_run(ran.run_id, db=db).status == "waiting"
    assert plait.resume(ran.run_id, db=db).status == "waiting"
    done = plait.approve(ran.run_id, "review", db=db, by="ada")
    assert done.status == "completed"
    assert plait.get_run(ran.run_id, db=db).steps["ship"].status == "completed"
    with pytest.raises(RunNotFound):  # a file that does not exist is not created
        plait.get_run(ran.run_id, db=f"sqlite:///{tmp_path / 'other.db'}")
    assert not (tmp_path / "other.db").exists()


SCRIPT = """
    import warnings
    import plait
    from plait import Workflow

    warnings.simplefilter("always")  # every warning shown: plait says it once

    wf = Workflow("pub")

    @wf.step
    def publish(input):
        return "draft"

    wf.add_step("review", type="approval", depends_on=["publish"])
    wf.run({}, db="memory://")                       # not durable: no warning
    first = wf.run({}, db="sqlite:///runs.db")       # warns
    wf.run({}, db="sqlite:///runs.db")               # said once
    print(plait.approve(first.run_id, "review", db="sqlite:///runs.db").status)
"""


def test_steps_defined_in_main_warn_once_for_a_durable_run(tmp_path: Path) -> None:
    script = tmp_path / "publish.py"
    script.write_text(textwrap.dedent(SCRIPT))
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, text=True,
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["completed"]  # this script can continue it itself
    warned = [line for line in proc.stderr.splitlines() if "UserWarning" in line]
    assert len(warned) == 1, proc.stderr
    assert warned[0].startswith(f"{script}:16: UserWarning: workflow 'pub' calls "
                                f"functions defined in __main__ (publish)")
    assert "`plait resume` and `plait approve` in another process cannot import them" \
        in warned[0]
    assert "Move the step functions to a module" in warned[0]
