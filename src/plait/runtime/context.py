"""What a step's code sees of its run."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from ..core.model import JSON

_log = logging.getLogger("plait.step")


@dataclass(frozen=True, slots=True, kw_only=True)
class StepContext:
    """Passed to a step function that declares a ``ctx`` parameter.

    ``idempotency_key`` is the same for every attempt of a step in a run (including an
    attempt re-run after a crash), so external side effects can be deduplicated."""

    run_id: str
    step_id: str
    attempt: int
    idempotency_key: str
    input: JSON
    state: Mapping[str, JSON]
    outputs: Mapping[str, JSON]
    logger: logging.LoggerAdapter[logging.Logger]


def make_context(*, run_id: str, step_id: str, attempt: int, input: JSON,
                 state: Mapping[str, JSON], outputs: Mapping[str, JSON]) -> StepContext:
    return StepContext(run_id=run_id, step_id=step_id, attempt=attempt,
                       idempotency_key=f"{run_id}:{step_id}", input=input, state=state,
                       outputs=outputs,
                       logger=logging.LoggerAdapter(_log, {"run_id": run_id,
                                                           "step_id": step_id}))
