"""What a finished (or stopped) run looks like to callers: the ``--json`` shape of docs/cli.md."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from ..core.model import JSON, JSONDict
from ..core.rows import StepRuntime
from ..core.timestamps import iso as iso  # where it lived: still importable here
from ..store.base import RunRecord, StepRecord


@dataclass(slots=True)
class StepResult:
    """What a caller reads of one step's row (``from_record``), in the ``--json`` shape."""

    status: str
    attempts: int
    output: JSON
    error: str | None
    started_at: float | None
    finished_at: float | None
    skip_reason: str | None
    fallback_used: bool
    # completed from the step cache without running (``cache:``; docs/caching.md)
    cached: bool = False

    @classmethod
    def from_record(cls, rec: StepRuntime, cached: bool = False) -> StepResult:
        """What a caller sees of a step's row (a stored record or the run loop's row)."""
        return cls(status=str(rec.status), attempts=rec.attempts, output=rec.output,
                   error=rec.error, started_at=rec.started_at, finished_at=rec.finished_at,
                   skip_reason=rec.skip_reason, fallback_used=rec.fallback_used,
                   cached=cached)

    @property
    def duration_s(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return self.finished_at - self.started_at

    def to_json(self) -> JSONDict:
        return {"status": self.status, "attempts": self.attempts, "output": self.output,
                "error": self.error, "started_at": iso(self.started_at),
                "finished_at": iso(self.finished_at), "skip_reason": self.skip_reason,
                "fallback_used": self.fallback_used, "cached": self.cached}


class StepResults(Mapping[str, StepResult]):
    """``RunResult.steps``: step id -> StepResult in definition order.  Each result is
    built when first read and kept (the same object on every read), so a run of
    100,000 steps pays nothing at its end for the steps nobody looks at.  The rows
    read are the finished run's, which no longer change."""

    __slots__ = ("_built", "_cached", "_index", "_rows")

    def __init__(self, index: Mapping[str, int], rows: Sequence[StepRuntime],
                 cached: frozenset[str] = frozenset()) -> None:
        self._index, self._rows, self._cached = index, rows, cached
        self._built: dict[str, StepResult] = {}

    @classmethod
    def of_records(cls, records: Sequence[StepRecord],
                   cached: frozenset[str] = frozenset()) -> StepResults:
        return cls({rec.step_id: i for i, rec in enumerate(records)}, records, cached)

    def __getitem__(self, key: str) -> StepResult:
        built = self._built.get(key)
        if built is None:
            built = self._built[key] = StepResult.from_record(
                self._rows[self._index[key]], key in self._cached)
        return built

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __repr__(self) -> str:
        return f"StepResults({dict(self.items())!r})"


@dataclass(slots=True, kw_only=True)
class RunResult:
    run_id: str
    workflow: str
    version: int
    fingerprint: str
    status: str
    output: JSON
    error: str | None
    started_at: float | None
    finished_at: float | None
    steps: Mapping[str, StepResult] = field(default_factory=dict)
    retry_of: str | None = None
    # step -> what it waits for (``waiting`` of its --json entry), read from the run's
    # history by the CLI when the run waits; a step not in it has ``waiting: null``
    waits: Mapping[str, JSONDict] = field(default_factory=dict)

    @classmethod
    def from_records(cls, run: RunRecord, steps: list[StepRecord],
                     cached: frozenset[str] = frozenset()) -> RunResult:
        """``cached``: the steps completed from the step cache (read from history)."""
        return cls(run_id=run.run_id, workflow=run.workflow, version=run.version,
                   fingerprint=run.fingerprint, status=str(run.status), output=run.output,
                   error=run.error, started_at=run.started_at, finished_at=run.finished_at,
                   steps=StepResults.of_records(steps, cached),
                   retry_of=run.retry_of)

    @property
    def duration_s(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return round(self.finished_at - self.started_at, 6)

    def __repr__(self) -> str:  # compact: results can hold 100,000 steps
        return (f"RunResult(run_id={self.run_id!r}, workflow={self.workflow!r}, "
                f"status={self.status!r}, steps={len(self.steps)})")

    @property
    def ok(self) -> bool:
        return self.status == "completed"

    def to_json(self) -> JSONDict:
        """Exactly the object ``plait run --json`` prints (docs/cli.md)."""
        return {"run_id": self.run_id, "workflow": self.workflow, "version": self.version,
                "status": self.status, "output": self.output, "error": self.error,
                "duration_s": self.duration_s,
                "steps": {sid: {**s.to_json(), "waiting": self.waits.get(sid)}
                          for sid, s in self.steps.items()}}
