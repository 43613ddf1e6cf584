"""The pages of ``GET /api/runs/{id}``: a run's document with its steps in pages, so a
run of any size is read as answers of bounded size.

A run of at most ``STEPS_PER_PAGE`` steps is one document, exactly ``plait show
--json``'s (no paging field).  A bigger run's first page is that document with the
first ``STEPS_PER_PAGE`` step entries (in the run's step order: the definition's, then
map items by index), only the attempts and logs of those steps (and the run's own
logs), and ``"steps_next"``: the cursor of the next page, given back as
``?steps_after=CURSOR``.  Every later page is the same document with the next steps;
``steps_next`` is null on the last.  A cursor counts the steps before its page: steps
only ever join a run at its end, so pages read while the run goes on neither repeat nor
skip a step.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..core.model import JSONDict
from ..rundoc.records import LogRecord, show_json
from ..store.base import AttemptRecord, RunRecord, StepRecord
from .errors import ApiError

__all__ = ["CURSOR_PARAMETER", "STEPS_PER_PAGE", "parse_steps_after", "run_page"]

STEPS_PER_PAGE = 2_000
CURSOR_PARAMETER = "steps_after"
_MAX_CURSOR = 2**63 - 1  # what a database's integer offset holds
_CURSOR = re.compile(r"[1-9][0-9]{0,18}")  # ASCII digits only (str.isdigit takes more)


def parse_steps_after(text: str | None) -> int:
    """How many steps come before the page ``text`` (a ``steps_next`` value) asks for;
    0 without a cursor.  400 naming the parameter for anything else."""
    if text is None:
        return 0
    if _CURSOR.fullmatch(text) is None or int(text) > _MAX_CURSOR:
        raise _bad_cursor(text, "pass the `steps_next` value of the previous page")
    return int(text)


def _bad_cursor(text: str, hint: str) -> ApiError:
    shown = text if len(text) <= 40 else text[:40] + "…"
    return ApiError(400, "invalid_cursor", f"invalid {CURSOR_PARAMETER} {shown!r}: {hint}",
                    {CURSOR_PARAMETER: shown})


def run_page(run: RunRecord, steps: Sequence[StepRecord],
             attempts: Sequence[AttemptRecord], logs: Sequence[LogRecord],
             after: int = 0) -> JSONDict:
    """The document of the page after ``after`` steps (see the module docstring)."""
    if after == 0 and len(steps) <= STEPS_PER_PAGE:
        return show_json(run, steps, attempts, logs)
    if after > len(steps):
        raise _bad_cursor(str(after), f"run {run.run_id} has {len(steps)} steps")
    page = steps[after:after + STEPS_PER_PAGE]
    ids = {s.step_id for s in page}
    value = show_json(run, page, [a for a in attempts if a.step_id in ids],
                      [log for log in logs if log.step in ids
                       or (log.step is None and after == 0)])
    end = after + len(page)
    value["steps_next"] = str(end) if end < len(steps) else None
    return value
