"""Judging a step whose parents are all final: queue it, skip it, or mark it
upstream_failed.

The trigger rule is checked first, then the guards of the conditions the step is a
branch of, then its ``when``.  A ``when`` that is not cheap to render is left to the
runtime (``when_due``), which renders it off the event loop and hands the value back
(``settle_when``).  A ``when`` that cannot render fails the step.
"""

from __future__ import annotations

from . import expressions
from .model import JSON, StepSpec
from .runrows import (
    CANCELLED,
    COMPLETED,
    FAILED,
    PENDING,
    QUEUED,
    SKIPPED,
    UPSTREAM_FAILED,
    RunRows,
)
from .states import StepStatus

_FAILED_LIKE = frozenset({FAILED, UPSTREAM_FAILED, CANCELLED})


class Judging(RunRows):
    """The rules that judge a step once its parents are final (see the module
    docstring)."""

    __slots__ = ()

    def _judge(self, i: int, now: float) -> None:
        """All parents are final: queue, skip or mark upstream_failed."""
        step = self.spec.steps[i]
        rows = self.rows
        if step.trigger != "one_failed" and step.when is None and not self.checked.guards[i]:
            # the common case: every trigger rule but one_failed queues a step whose
            # parents all completed
            for p in self.graph.parents[i]:
                if rows[p].status is not COMPLETED:
                    break
            else:
                self._queue(i, now)
                return
        verdict = self._trigger(i, step)
        if verdict is None and self.checked.guards[i]:
            verdict = self._guard(i)
        if verdict is None and step.when is not None:
            text = step.when
            if expressions.is_template(text) and not expressions.is_cheap(text):
                # may take up to its time bound: the runtime renders it off the event
                # loop and hands the value to settle_when; the step stays pending
                self.when_due.append(i)
                return
            verdict = self._when(i, step, now)
            if verdict is not None and verdict[0] is FAILED:
                return  # the step was failed by its `when` (already recorded)
        self._settle(i, verdict, now)

    def _settle(self, i: int, verdict: tuple[StepStatus, str] | None, now: float) -> None:
        """Queue the judged step (no verdict), or end it as the verdict says."""
        if verdict is None:
            self._queue(i, now)
            return
        row = self.rows[i]
        target, reason = verdict
        self._move(i, target, now)
        row.skip_reason, row.finished_at = reason, now
        self._record(i, PENDING, target, now)
        self._finished(i, now)

    def _trigger(self, i: int, step: StepSpec) -> tuple[StepStatus, str] | None:
        parents = self.graph.parents[i]
        if not parents or step.trigger == "all_done":
            return None
        completed = failed = skipped = 0
        first_failed = first_skipped = ""
        steps, rows = self.spec.steps, self.rows
        for p in parents:
            status = rows[p].status
            if status is COMPLETED:
                completed += 1
            elif status is SKIPPED:
                skipped += 1
                first_skipped = first_skipped or steps[p].id
            elif status is FAILED and steps[p].allow_failure and \
                    step.trigger != "one_failed":
                completed += 1  # a tolerated failure does not hold up its children
            elif status in _FAILED_LIKE:
                failed += 1
                first_failed = first_failed or steps[p].id
        rule = step.trigger
        if rule == "one_failed":
            return None if failed else (SKIPPED, "trigger one_failed: no parent failed")
        if failed:
            return (UPSTREAM_FAILED, f"parent {first_failed!r} did not complete")
        if rule == "none_failed":
            return None
        if rule == "all_success" and skipped:
            return (SKIPPED, f"trigger all_success: parent {first_skipped!r} was skipped")
        if completed == 0:
            return (SKIPPED, "all parents were skipped")
        return None

    def _guard(self, i: int) -> tuple[StepStatus, str] | None:
        for cond, branch in self.checked.guards[i]:
            row = self.rows[cond]
            cid = self.spec.steps[cond].id
            if row.status is not COMPLETED:
                return (SKIPPED, f"condition {cid!r} did not complete")
            result = row.output.get("result") if isinstance(row.output, dict) else None
            if bool(result) is not branch:
                side = "then" if branch else "else"
                return (SKIPPED, f"condition {cid!r} was {bool(result)!s} and this step "
                        f"is in its {side} branch")
        return None

    def _when(self, i: int, step: StepSpec, now: float) -> tuple[StepStatus, str] | None:
        text = step.when or ""
        try:
            # a literal is the loader's spelling of a YAML boolean (`when: false`)
            value = expressions.render(text, self.context(i)) \
                if expressions.is_template(text) \
                else bool(text) and text.strip().lower() != "false"
        except expressions.RenderError as exc:
            return self._when_failed(i, step, exc, now)
        return self._when_verdict(step, value)

    def _when_failed(self, i: int, step: StepSpec, exc: Exception,
                     now: float) -> tuple[StepStatus, str]:
        self._move(i, QUEUED, now)
        self._record(i, PENDING, QUEUED, now)
        self.fail(i, f"TemplateError: step {step.id!r}, field 'when': {exc} in "
                  f"template {step.when!r}", now)
        return (FAILED, "")

    @staticmethod
    def _when_verdict(step: StepSpec, value: JSON) -> tuple[StepStatus, str] | None:
        if expressions.truthy(value):
            return None
        return (SKIPPED, f"when was false: {step.when}")

    def settle_when(self, i: int, value: JSON | expressions.RenderError, now: float) -> None:
        """The value of step ``i``'s ``when``, rendered off the loop (see ``when_due``),
        or the error that rendering raised: queue, skip or fail the step as ``_judge``
        would have.  Nothing happens when the step is no longer pending (the run was
        cancelled meanwhile)."""
        if self.rows[i].status is not PENDING or self.halting:
            return
        step = self.spec.steps[i]
        if isinstance(value, expressions.RenderError):
            self._when_failed(i, step, value, now)
            return
        self._settle(i, self._when_verdict(step, value), now)

