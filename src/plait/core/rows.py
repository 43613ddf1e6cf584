"""What is stored about each step of a run, and the changes the run loop persists.

``StepRuntime`` is one step's row (mutable, owned by the run's state), and the one row
type: the store's ``StepRecord`` is this row with the run and step it belongs to, and a
row is copied only by ``copy``/``copy_as`` (by keyword).  ``StepChange``
and ``AttemptChange`` are what the state hands the loop to commit (``drain``), in
order; the stores write them.  ``StepsView`` is ``steps.<id>`` as templates see it.
``MapItems`` counts the items of an expanded map step (``mapitems``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from .model import JSON, JSONDict
from .states import StepStatus

SomeRow = TypeVar("SomeRow", bound="StepRuntime")


@dataclass(slots=True)
class StepRuntime:
    """Everything stored about one step of one run (mutable; owned by RunState)."""

    status: StepStatus = StepStatus.PENDING
    attempts: int = 0
    output: JSON = None
    error: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    skip_reason: str | None = None
    fallback_used: bool = False
    next_attempt_at: float | None = None
    worker: str | None = None

    def copy(self) -> StepRuntime:
        """A new row with this row's values (what the state owns of a stored row)."""
        return self.copy_as(StepRuntime)

    def copy_as(self, cls: type[SomeRow], **extra: Any) -> SomeRow:
        """This row's values in a new ``cls`` (this class or a subclass: ``extra`` gives
        the fields the subclass adds).  The one field-by-field copy of a step row."""
        return cls(status=self.status, attempts=self.attempts, output=self.output,
                   error=self.error, started_at=self.started_at,
                   finished_at=self.finished_at, skip_reason=self.skip_reason,
                   fallback_used=self.fallback_used, next_attempt_at=self.next_attempt_at,
                   worker=self.worker, **extra)


# Changes are NamedTuples, not frozen dataclasses: the loop makes several per step, and
# a frozen dataclass pays object.__setattr__ per field (3x slower to build).
# The hot path (a step's start, success and drain) builds them with ``new_change``,
# tuple.__new__ over the fields in order, skipping the generated __new__: it pays in
# `benchmarks/child.py chain:2000 db=memory://` under callgrind (2% of a step's
# instructions); everywhere else they are built plainly.
new_change = tuple.__new__


class StepChange(NamedTuple):
    """One transition of one step, with the step's full row after it (what to store)."""

    step: str
    source: StepStatus
    target: StepStatus
    at: float
    # the step's row at the end of its batch, never changed afterwards: a copy, or the
    # core's own row once final (a final row is never written again)
    row: StepRuntime


class AttemptChange(NamedTuple):
    """An attempt started (``ended`` False) or ended, with its outcome."""

    step: str
    attempt: int
    at: float
    ended: bool
    status: str  # running | completed | failed | cancelled
    error: str | None = None
    worker: str | None = None
    fallback: bool = False


class StepsView(Mapping[str, JSONDict]):
    """``steps.<id>`` in templates: ``{"output", "status"}`` of any step of the run."""

    __slots__ = ("_index", "_rows")

    def __init__(self, rows: list[StepRuntime], index: dict[str, int]) -> None:
        self._rows, self._index = rows, index

    def __getitem__(self, key: str) -> JSONDict:
        row = self._rows[self._index[key]]
        output = row.output if row.status is StepStatus.COMPLETED else None
        return {"output": output, "status": str(row.status)}

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)


@dataclass(slots=True)
class MapItems:
    """The items of one expanded map step (rows ``first .. first + count - 1``)."""

    first: int
    count: int
    limit: int  # items running at once, at most
    queued: int = 0  # items released so far (in order)
    ended: int = 0  # items that reached a final status
    failed: str | None = None  # why the map fails (the first item that failed)
