"""``runtime.continuation.stuck``: when a recorded decision is reported as not applied."""

from __future__ import annotations

from plait.core.model import JSONDict
from plait.core.states import RunStatus, StepStatus
from plait.runtime.continuation import NOBODY, NOTE, SETTLE_S, stuck, stuck_text
from plait.store.base import EventRecord, RunRecord, StepRecord

RUN = "r" * 32
DECIDED_AT = 1_000.0


def _run(status: RunStatus = RunStatus.WAITING, owner: str | None = None) -> RunRecord:
    return RunRecord(run_id=RUN, workflow="w", version=1, fingerprint="f", status=status,
                     input={}, created_at=0.0, owner=owner)


def _steps(status: StepStatus = StepStatus.WAITING) -> list[StepRecord]:
    return [StepRecord(run_id=RUN, step_id="ok", status=status)]


def _note(seq: int, at: float, data: JSONDict) -> EventRecord:
    return EventRecord(run_id=RUN, seq=seq, at=at, kind="note", step_id="ok", data=data)


DECISION = _note(1, DECIDED_AT, {"approval": {"decision": "approved", "by": "ada"}})
FAILURE = _note(2, DECIDED_AT + 1, {NOTE: {"error": "no module named 'x'",
                                           "command": f"plait resume {RUN}"}})


def test_a_noted_failure_is_reported_at_once() -> None:
    entry = stuck(_run(), _steps(), [DECISION, FAILURE], now=DECIDED_AT + 1)
    assert entry == {"step": "ok", "error": "no module named 'x'",
                     "command": f"plait resume {RUN}",
                     "decided_at": "1970-01-01T00:16:40Z",
                     "failed_at": "1970-01-01T00:16:41Z"}
    assert stuck_text(entry) == (f"decision on ok recorded, could not continue: no module "
                                 f"named 'x'; continue it with: plait resume {RUN}")


def test_a_decision_nobody_applied_is_reported_after_settling() -> None:
    assert stuck(_run(), _steps(), [DECISION], now=DECIDED_AT + 1) is None
    entry = stuck(_run(), _steps(), [DECISION], now=DECIDED_AT + SETTLE_S)
    assert entry is not None and entry["error"] == NOBODY and entry["failed_at"] is None


def test_nothing_is_reported_once_applied_ended_or_executed() -> None:
    events = [DECISION, FAILURE]
    now = DECIDED_AT + SETTLE_S
    assert stuck(_run(), _steps(StepStatus.COMPLETED), events, now=now) is None
    assert stuck(_run(RunStatus.CANCELLED), _steps(), events, now=now) is None
    assert stuck(_run(owner="h:1"), _steps(), events, now=now, alive=lambda o: True) is None
    assert stuck(_run(owner="h:1"), _steps(), events, now=now,
                 alive=lambda o: False) is not None
    assert stuck(_run(), _steps(), [], now=now) is None  # waiting for a decision still
