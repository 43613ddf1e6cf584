"""Property-based tests of the run state machine, driven without asyncio.

A random DAG (random edges respecting an order, trigger rules, ``allow_failure``,
conditions with then/else branches, ``when`` guards) is run by a small driver that
plays the run loop: it pops ready steps up to the concurrency, finishes running attempts
in a random order with random outcomes (success, retryable failure, fatal failure),
keeps retries on a fake clock, and sometimes cancels the run.  After every event it
checks the invariants; at the end it checks every verdict against an independent
reading of the trigger rules.

A last property runs small random DAGs through the real asyncio engine.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from plait import Retry, StepContext, Workflow
from plait.core import effects as fx
from plait.core import expressions
from plait.core.events import AttemptEnded
from plait.core.model import TRIGGERS
from plait.core.retry import ErrorInfo
from plait.core.runstate import AttemptChange, RunState, StepChange, StepRuntime
from plait.core.states import FINAL_STEP_STATES, STEP_TRANSITIONS, RunStatus, StepStatus
from plait.runtime.engine import Engine
from plait.store.memory import MemoryStore

from .helpers import load

S = StepStatus
# the loaded profile scales these (HYPOTHESIS_PROFILE=thorough explores much further)
BASE_EXAMPLES = settings.default.max_examples
OUTCOMES = ("ok", "retry", "fatal")
WEIGHTED_OUTCOMES = ("ok", "ok", "ok", "retry", "retry", "fatal")
RETRYABLE = ErrorInfo(type="ValueError", message="flaky", names=("ValueError",))
FATAL = ErrorInfo(type="FatalError", message="no", names=("FatalError", "StepError"),
                  retryable=False)


# ---------------------------------------------------------------- random workflows


@dataclass
class Plan:
    definition: dict[str, Any]
    input: dict[str, bool]
    outcomes: dict[str, list[str]]  # per step, the outcome of each attempt
    results: dict[str, bool]  # per condition step, the result it evaluates to
    concurrency: int
    cancel_at: int | None  # cancel the run after this many events (None: never)
    seed: int
    max_retries: dict[str, int] = field(default_factory=dict)
    flags: dict[str, bool] = field(default_factory=dict)  # state key value per writer


@st.composite
def plans(draw: st.DrawFn, max_steps: int = 40, on_failure: str | None = None) -> Plan:
    n = draw(st.integers(1, max_steps))
    ids = [f"s{i}" for i in range(n)]
    is_condition = [draw(st.integers(0, 5)) == 0 for _ in range(n)]
    steps: list[dict[str, Any]] = []
    inputs: dict[str, bool] = {}
    outcomes: dict[str, list[str]] = {}
    results: dict[str, bool] = {}
    retries: dict[str, int] = {}
    flags: dict[str, bool] = {}  # steps whose output sets a state key: its value
    branches: dict[int, tuple[list[str], list[str]]] = {
        i: ([], []) for i in range(n) if is_condition[i]}
    for i, sid in enumerate(ids):
        parents = sorted(draw(st.sets(st.integers(0, i - 1), max_size=min(i, 3)))) \
            if i else []
        step: dict[str, Any] = {"id": sid}
        if is_condition[i]:
            step.update(type="condition", **{"if": "{{ true }}"})
            results[sid] = draw(st.booleans())
        else:
            step.update(type="transform", value=i)
        if parents:
            step["depends_on"] = [ids[p] for p in parents]
        step["trigger"] = draw(st.sampled_from(TRIGGERS))
        if draw(st.integers(0, 4)) == 0:
            step["allow_failure"] = True
        if draw(st.integers(0, 4)) == 0:
            plain_parents = [p for p in parents if not is_condition[p]]
            if plain_parents and draw(st.booleans()):
                # read a parent's shared-state key (replayed from outputs on restore)
                p = draw(st.sampled_from(plain_parents))
                flags[ids[p]] = draw(st.booleans()) if ids[p] not in flags else flags[ids[p]]
                steps[p]["outputs"] = [f"k{p}"]
                step["when"] = f"{{{{ state.get('k{p}', false) }}}}"
            else:
                key = f"w{i}"
                inputs[key] = draw(st.booleans())
                step["when"] = f"{{{{ input.{key} }}}}"
        # a step may sit on one branch of an earlier condition
        conditions = [c for c in range(i) if is_condition[c]]
        if conditions and draw(st.integers(0, 3)) == 0:
            c = draw(st.sampled_from(conditions))
            side = draw(st.sampled_from((0, 1)))
            branches[c][side].append(sid)
        max_retries = draw(st.integers(0, 3))
        retries[sid] = max_retries
        step["retry"] = {"max_retries": max_retries, "initial_delay": 1, "backoff": 2.0,
                         "jitter": 0.5, "max_delay": 10}
        outcomes[sid] = draw(st.lists(st.sampled_from(WEIGHTED_OUTCOMES),
                                      min_size=max_retries + 1,
                                      max_size=max_retries + 1))
        steps.append(step)
    for c, (then, else_) in branches.items():
        steps[c]["then"], steps[c]["else"] = then, else_
    if on_failure is None:
        on_failure = draw(st.sampled_from(("continue", "fail_fast")))
    definition = {"name": "prop", "steps": steps, "on_failure": on_failure}
    cancel_at = draw(st.none() | st.integers(0, 2 * n))
    return Plan(definition=definition, input=inputs, outcomes=outcomes, results=results,
                concurrency=draw(st.integers(1, 6)), cancel_at=cancel_at,
                seed=draw(st.integers(0, 2**32 - 1)), max_retries=retries, flags=flags)


# ---------------------------------------------------------------- the driver


def _fields(row: StepRuntime) -> tuple[object, ...]:
    return (row.status, row.attempts, row.output, row.error, row.started_at,
            row.finished_at, row.skip_reason, row.fallback_used, row.next_attempt_at,
            row.worker)


class Driver:
    """Plays the run loop over a RunState and checks invariants after every event."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.checked = load(plan.definition)
        self.graph = self.checked.graph
        self.state = RunState(self.checked, run_id="r", input=plan.input)
        self.rand = random.Random(plan.seed)
        self.now = 0.0
        self.events = 0
        self.running: list[int] = []
        self.retry_at: dict[int, float] = {}  # queued retries, due at
        self.ready: set[int] = set()  # queued and due (the core's ready heap)
        self.replayed = [S.PENDING] * self.graph.size
        self.step_changes: list[StepChange] = []
        # each drained row and its fields when drained: a store keeps the row itself
        self.snapshots: list[tuple[StepRuntime, tuple[object, ...]]] = []
        self.attempt_changes: list[AttemptChange] = []
        self.cancelled = False
        self.began_with: dict[int, list[StepStatus]] = {}
        self.completed_before_crash: set[str] = set()
        self.crash_at: set[int] = set()
        self.crashes = 0
        self.interrupted_total = 0

    # -- bookkeeping

    def drain(self) -> None:
        out = self.state.drain()
        if isinstance(out, tuple):
            steps, attempts = out
        else:  # an older shape: one mixed list
            steps = [c for c in out if isinstance(c, StepChange)]
            attempts = [c for c in out if isinstance(c, AttemptChange)]
        index = self.graph.index
        last_target = {ch.step: ch.target for ch in steps}
        for ch in steps:
            i = index[ch.step]
            assert ch.source is self.replayed[i], (
                f"{ch.step}: change from {ch.source} but it was {self.replayed[i]}")
            assert ch.target in STEP_TRANSITIONS[ch.source], (
                f"{ch.step}: {ch.source} -> {ch.target} is not in the table")
            # the row is what the store keeps: the step as it is at the end of the batch
            assert ch.row.status is last_target[ch.step]
            self.replayed[i] = ch.target
            if ch.source is S.PENDING and ch.target is S.QUEUED:
                self.ready.add(i)
        self.step_changes.extend(steps)
        self.snapshots.extend((ch.row, _fields(ch.row)) for ch in steps)
        self.attempt_changes.extend(attempts)

    def check_invariants(self) -> None:
        rows = self.state.rows
        for snap, fields in self.snapshots:
            assert _fields(snap) == fields, "a drained row changed after the drain"
        assert [r.status for r in rows] == self.replayed
        for i, row in enumerate(rows):
            limit = self.plan.max_retries[self.graph.ids[i]] + 1
            assert row.attempts <= limit, f"{self.graph.ids[i]} ran {row.attempts} attempts"
            if row.status is S.PENDING and not self.state.halting \
                    and i not in self.state.when_due:
                # eager: a step whose parents are all final is judged at once (or its
                # `when` is being rendered off the loop: see settle_guards)
                assert not all(rows[p].status in FINAL_STEP_STATES
                               for p in self.graph.parents[i]), self.graph.ids[i]

    # -- events

    def launch(self) -> None:
        limit = self.plan.concurrency
        while len(self.running) < limit:
            i = self.state.pop_ready()
            if i is None:
                break
            assert i in self.ready, f"{self.graph.ids[i]} popped but not ready"
            assert self.graph.ids[i] not in self.completed_before_crash, "re-run"
            best = max(self.checked.priority[j] for j in self.ready)
            assert self.checked.priority[i] == best, "not the longest remaining path"
            self.ready.discard(i)
            parents = [self.state.rows[p].status for p in self.graph.parents[i]]
            assert all(s in FINAL_STEP_STATES for s in parents), (
                f"{self.graph.ids[i]} began before its parents were final: {parents}")
            self.began_with.setdefault(i, parents)
            attempt = self.state.begin(i, self.now)
            assert attempt == self.state.rows[i].attempts
            self.running.append(i)
        self.drain()

    def finish_one(self) -> None:
        i = self.running.pop(self.rand.randrange(len(self.running)))
        sid = self.graph.ids[i]
        attempt = self.state.rows[i].attempts
        assert attempt <= len(self.plan.outcomes[sid]), f"{sid}: attempt {attempt} too many"
        outcome = self.plan.outcomes[sid][attempt - 1]
        if outcome == "ok":
            output: Any = ({"result": self.plan.results[sid]} if sid in self.plan.results
                           else {"step": sid})
            if sid in self.plan.flags:
                output[f"k{self.graph.index[sid]}"] = self.plan.flags[sid]
            self.state.succeed(i, output, self.now)
        else:
            error = RETRYABLE if outcome == "retry" else FATAL
            self.ended(i, error)
        self.drain()
        if self.state.halting:
            self.stop_running("fail_fast")

    def ended(self, i: int, error: ErrorInfo) -> None:
        """An attempt of step ``i`` failed: the state decides (retry or fail)."""
        done = self.state.apply(AttemptEnded(i=i, kind="error", at=self.now,
                                                error=error, rand=self.rand.random()))
        for effect in done:
            if isinstance(effect, fx.RetryStep):
                assert error.retryable
                assert effect.due >= self.now + 1.0
                self.retry_at[i] = effect.due
            else:  # a failure under fail_fast halts the run (see finish_one)
                assert isinstance(effect, fx.CancelRunning), effect
                assert self.state.halting

    def stop_running(self, reason: str) -> None:
        for i in self.running:
            self.state.cancel_step(i, self.now, reason)
        self.running.clear()
        self.drain()

    def cancel_run(self) -> None:
        self.cancelled = True
        self.state.halt("cancelled on request", cancelled=True)
        self.stop_running("cancelled on request")

    def crash_and_restore(self) -> None:
        """The process dies between two events; a new one restores the run from what was
        stored (the last row of every step change) and goes on."""
        stored: dict[str, StepRuntime] = {}
        for ch in self.step_changes:
            stored[ch.step] = ch.row
        completed_before = {sid for sid, r in stored.items() if r.status is S.COMPLETED}
        state = RunState.restore(self.checked, run_id="r", input=self.plan.input,
                                 rows=stored, now=self.now)
        self.state = state
        self.running = []
        rows = state.rows
        self.ready = {i for i, r in enumerate(rows) if r.status is S.QUEUED
                      and (r.next_attempt_at is None or r.next_attempt_at <= self.now)}
        self.retry_at = {i: at for at, i in state.queued_later()}
        assert not (self.ready & set(self.retry_at))
        state.start(self.now)
        self.drain()
        interrupted = list(state.interrupted)
        for i in interrupted:
            # the attempt that was running died with the process: a failed attempt
            sid = self.graph.ids[i]
            self.plan.outcomes[sid][rows[i].attempts - 1] = "retry"
            self.ended(i, RETRYABLE)
        state.interrupted.clear()
        self.drain()
        self.completed_before_crash |= completed_before
        self.crashes += 1
        self.interrupted_total += len(interrupted)

    def settle_guards(self) -> None:
        """What the runtime does with a `when` the core could not render on the loop:
        it renders it elsewhere and hands the value back, between other events."""
        due, self.state.when_due = self.state.when_due, []
        for i in due:
            text = self.state.spec.steps[i].when or ""
            value: Any
            try:
                value = expressions.render(text, self.state.context(i))
            except expressions.RenderError as exc:
                value = exc
            self.state.settle_when(i, value, self.now)
        self.drain()

    def fire_retries(self) -> None:
        due = min(self.retry_at.values())
        self.now = max(self.now, due)
        for i, at in list(self.retry_at.items()):
            if at <= self.now:
                del self.retry_at[i]
                if self.state.rows[i].status is S.QUEUED:
                    self.state.retry_due(i)
                    self.ready.add(i)

    def run(self) -> None:
        self.state.start(self.now)
        self.drain()
        bound = sum(len(o) for o in self.plan.outcomes.values()) * 3 + \
            3 * self.graph.size + 10
        for _ in range(bound):
            self.check_invariants()
            if self.state.done:
                break
            if self.events in self.crash_at:
                self.crash_at.discard(self.events)
                self.crash_and_restore()
                if self.state.done:
                    break
            self.launch()
            if self.plan.cancel_at is not None and self.events >= self.plan.cancel_at \
                    and not self.cancelled and not self.state.halting:
                self.cancel_run()
            elif self.state.when_due and (not self.running or self.rand.random() < 0.5):
                self.settle_guards()
            elif self.running:
                self.finish_one()
            elif self.state.halting:
                self.retry_at.clear()
                self.state.cancel_unstarted(self.now, "halted")
                self.ready.clear()
                self.drain()
            elif self.retry_at:
                self.fire_retries()
            else:
                raise AssertionError("the run cannot make progress: "
                                     f"{[str(r.status) for r in self.state.rows]}")
            self.events += 1
            self.now += 1.0
        self.check_invariants()
        assert self.state.done, "the run did not end within the bound"
        assert all(r.status in FINAL_STEP_STATES for r in self.state.rows)


# ---------------------------------------------------------------- the oracle


def expected_verdict(driver: Driver, i: int) -> StepStatus | None:
    """What the trigger rules say about a step judged with its parents' final statuses: None when
    it runs, else the status it ends in without running."""
    spec = driver.checked.spec
    step = spec.steps[i]
    rows = driver.state.rows
    completed = failed = skipped = 0
    for p in driver.graph.parents[i]:
        status = rows[p].status
        tolerated = status is S.FAILED and spec.steps[p].allow_failure
        if status is S.COMPLETED or (tolerated and step.trigger != "one_failed"):
            completed += 1
        elif status is S.SKIPPED:
            skipped += 1
        else:
            failed += 1  # failed, upstream_failed, cancelled
    has_parents = bool(driver.graph.parents[i])
    rule = step.trigger
    verdict: StepStatus | None = None
    if not has_parents or rule == "all_done":
        verdict = None
    elif rule == "one_failed":
        verdict = None if failed else S.SKIPPED
    elif failed:
        verdict = S.UPSTREAM_FAILED
    elif rule == "none_failed":
        verdict = None
    elif rule == "all_success" and skipped or completed == 0:
        verdict = S.SKIPPED
    if verdict is not None:
        return verdict
    for cond, branch in driver.checked.guards[i]:
        crow = rows[cond]
        if crow.status is not S.COMPLETED or bool(crow.output["result"]) is not branch:
            return S.SKIPPED
    if step.when is not None:
        inner = step.when.strip("{} ")
        if inner.startswith("input."):
            value = driver.plan.input[inner.removeprefix("input.")]
        else:  # state.get('k<p>', false): the writer's flag once it completed
            p = int(inner.split("'k", 1)[1].split("'", 1)[0])
            writer = driver.graph.ids[p]
            value = rows[p].status is S.COMPLETED and driver.plan.flags[writer]
        if not value:
            return S.SKIPPED
    return None


def expected_run(outcomes: list[str]) -> tuple[StepStatus, int]:
    """Final status and attempts of a step that runs, from its attempt outcomes."""
    for n, outcome in enumerate(outcomes, start=1):
        if outcome == "ok":
            return S.COMPLETED, n
        if outcome == "fatal":
            return S.FAILED, n
    return S.FAILED, len(outcomes)


@pytest.mark.parametrize("on_failure", ["continue", "fail_fast"])
@given(data=st.data())
@settings(max_examples=max(100, BASE_EXAMPLES))
def test_random_runs_follow_the_run_rules(on_failure: str, data: st.DataObject) -> None:
    plan = data.draw(plans(on_failure=on_failure), label="plan")
    driver = Driver(plan)
    driver.run()
    state, rows, ids = driver.state, driver.state.rows, driver.graph.ids
    halted = state.halting
    event(f"on_failure={driver.checked.spec.on_failure} cancelled={driver.cancelled}")
    event(f"final run status={state.run_status()}")
    event(f"any retry={any(r.attempts > 1 for r in rows)}")
    event(f"conditions={bool(plan.results)}")
    for r in rows:
        event(f"step status {r.status}")

    for i, row in enumerate(rows):
        sid = ids[i]
        if row.status is S.CANCELLED:
            assert halted, f"{sid} cancelled although the run never halted"
            assert row.skip_reason
            continue
        verdict = expected_verdict(driver, i)
        if verdict is None:
            status, attempts = expected_run(plan.outcomes[sid])
            assert (row.status, row.attempts) == (status, attempts), sid
            assert row.started_at is not None and row.finished_at is not None
            assert row.started_at <= row.finished_at
        else:
            assert row.status is verdict, f"{sid}: {row.status} != {verdict}"
            assert row.attempts == 0
            assert row.skip_reason, f"{sid} {row.status} without a reason"
        if row.status is S.COMPLETED:
            assert row.output is not None

    # the run's final status
    failed_hard = any(r.status is S.FAILED and not driver.checked.spec.steps[i].allow_failure
                      for i, r in enumerate(rows))
    if driver.cancelled:
        expected = RunStatus.CANCELLED
    elif failed_hard:
        expected = RunStatus.FAILED
    else:
        expected = RunStatus.COMPLETED
    assert state.run_status() is expected
    if driver.checked.spec.on_failure == "continue" and not driver.cancelled:
        assert not halted

    # attempts: each started attempt ends once, numbered 1..n per step
    started = [(a.step, a.attempt) for a in driver.attempt_changes if not a.ended]
    ended = [(a.step, a.attempt) for a in driver.attempt_changes if a.ended]
    assert sorted(started) == sorted(ended)
    assert len(set(started)) == len(started)
    for i, row in enumerate(rows):
        numbers = sorted(n for s, n in started if s == ids[i])
        assert numbers == list(range(1, row.attempts + 1))


@given(data=st.data())
@settings(max_examples=max(100, BASE_EXAMPLES))
def test_a_run_restored_after_crashes_ends_as_the_rules_say(data: st.DataObject) -> None:
    """Random crash points: completed steps never run again, an interrupted
    attempt counts as a failed attempt and is retried, and every verdict still follows
    the trigger table."""
    plan = data.draw(plans(on_failure="continue"), label="plan")
    plan.cancel_at = None
    driver = Driver(plan)
    n = driver.graph.size
    driver.crash_at = set(data.draw(st.lists(st.integers(0, 2 * n), min_size=1, max_size=4),
                                    label="crash points"))
    driver.run()
    event(f"crashed={driver.crashes} interrupted attempts>0={driver.interrupted_total > 0}")
    rows, ids = driver.state.rows, driver.graph.ids
    for i, row in enumerate(rows):
        verdict = expected_verdict(driver, i)
        if verdict is None:
            status, attempts = expected_run(plan.outcomes[ids[i]])
            assert (row.status, row.attempts) == (status, attempts), ids[i]
        else:
            assert row.status is verdict, ids[i]
    for sid in driver.completed_before_crash:
        assert rows[driver.graph.index[sid]].status is S.COMPLETED


@given(plan=plans(max_steps=12))
@settings(max_examples=BASE_EXAMPLES)
def test_step_changes_replay_to_the_final_rows(plan: Plan) -> None:
    driver = Driver(plan)
    driver.run()
    replay: dict[str, StepStatus] = dict.fromkeys(driver.graph.ids, S.PENDING)
    for ch in driver.step_changes:
        assert replay[ch.step] is ch.source
        replay[ch.step] = ch.target
    assert [replay[sid] for sid in driver.graph.ids] == [r.status for r in driver.state.rows]
    # the last recorded row of each step is the step's final row
    last = {ch.step: ch.row for ch in driver.step_changes}
    for sid, row in zip(driver.graph.ids, driver.state.rows, strict=True):
        assert last[sid].status is row.status
        assert last[sid].attempts == row.attempts
        assert last[sid].output == row.output


# ---------------------------------------------------------------- the real engine


@dataclass
class EnginePlan:
    parents: list[list[int]]
    outcomes: list[list[str]]
    triggers: list[str]
    allow: list[bool]
    sleeps: list[float]
    concurrency: int
    on_failure: str
    pool: int | None  # a pool of this size shared by every step (None: no pool)


@st.composite
def engine_plans(draw: st.DrawFn) -> EnginePlan:
    n = draw(st.integers(1, 7))
    return EnginePlan(
        parents=[sorted(draw(st.sets(st.integers(0, i - 1), max_size=min(i, 3))))
                 if i else [] for i in range(n)],
        outcomes=[draw(st.lists(st.sampled_from(WEIGHTED_OUTCOMES), min_size=1, max_size=3))
                  for _ in range(n)],
        triggers=[draw(st.sampled_from(TRIGGERS)) for _ in range(n)],
        allow=[draw(st.integers(0, 3)) == 0 for _ in range(n)],
        sleeps=[draw(st.sampled_from((0.0, 0.0, 0.002, 0.01))) for _ in range(n)],
        concurrency=draw(st.integers(1, 4)),
        on_failure=draw(st.sampled_from(("continue", "continue", "fail_fast"))),
        pool=draw(st.none() | st.integers(1, 3)),
    )


def _step_fn(outcomes: list[str], calls: list[int], i: int, sleep: float) -> Any:
    async def fn(ctx: StepContext) -> Any:
        calls[i] += 1
        assert ctx.attempt == calls[i]
        await asyncio.sleep(sleep)
        outcome = outcomes[ctx.attempt - 1]
        if outcome == "retry":
            raise ValueError("flaky")
        if outcome == "fatal":
            from plait import FatalError
            raise FatalError("no")
        return {"step": i}
    return fn


@given(engine_plans())
@settings(max_examples=max(30, BASE_EXAMPLES // 2))
def test_the_engine_completes_random_dags(plan: EnginePlan) -> None:
    n = len(plan.parents)
    calls = [0] * n
    pools = {"p": {"concurrency": plan.pool}} if plan.pool else None
    wf = Workflow("engprop", concurrency=plan.concurrency, on_failure=plan.on_failure,
                  pools=pools)
    for i in range(n):
        wf.add_step(f"s{i}", _step_fn(plan.outcomes[i], calls, i, plan.sleeps[i]),
                    depends_on=[f"s{p}" for p in plan.parents[i]],
                    trigger=plan.triggers[i], allow_failure=plan.allow[i],
                    pool="p" if plan.pool else None,
                    retry=Retry(max_retries=len(plan.outcomes[i]) - 1, initial_delay=0.001,
                                jitter=0.0))
    checked = wf.validate()

    async def go() -> Any:
        engine = Engine(MemoryStore(), rand=lambda: 0.0)
        try:
            result = await asyncio.wait_for(engine.run(checked, {}), timeout=20)
            if plan.pool:
                assert engine.pools.get(checked.spec.pools["p"]).active == 0
            return result
        finally:
            engine.close()

    result = asyncio.run(go())
    event(f"on_failure={plan.on_failure} status={result.status}")
    assert result.status in ("completed", "failed")
    halted = False
    for i in range(n):
        step = result.steps[f"s{i}"]
        assert step.attempts <= len(plan.outcomes[i])
        if step.status == "cancelled":
            halted = True
            assert plan.on_failure == "fail_fast"
            assert calls[i] <= step.attempts  # cancelled maybe before its call began
            continue
        assert step.status in ("completed", "failed", "skipped", "upstream_failed")
        assert calls[i] == step.attempts
        if step.attempts and not (plan.on_failure == "fail_fast" and step.status == "failed"):
            status, attempts = expected_run(plan.outcomes[i])
            assert (step.status, step.attempts) == (str(status), attempts)
    hard = any(result.steps[f"s{i}"].status == "failed" and not plan.allow[i]
               for i in range(n))
    assert result.status == ("failed" if hard else "completed")
    assert not halted or hard
