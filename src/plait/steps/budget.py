"""Token budgets: ``limits.max_llm_tokens`` (docs/limits.md, docs/agents.md).

Every model call of a run (each attempt of an ``llm`` step, each ``ctx.llm`` call that
sends a request: a journaled call replayed sends nothing) goes through a
``TokenBudget``:

- before the request is sent, ``refuse_spent`` reads the stored count of the run and of
  every run that started it (``parent_run_id``, at any depth) that has a budget; when
  one has reached its limit (used >= N) the call fails without retry
  (``TokenBudgetSpent``: ``token budget of N spent: M used``);
- once the answer is in, ``count`` adds its usage (from its ``usage`` note) to the
  step's stored tokens (what Prometheus counts) and its ``total_tokens`` to the stored
  count of the run and of each of those ancestors, in one transaction.

So a run's count is the tokens of its own calls and of its child runs' (``workflow``
and ``loop`` steps): a child run spends from its parent's budget, and from its own
when its definition has one.  The count is kept in the store (``Store.add_llm_tokens``),
added to by whichever process sends the call: it holds across the workers of a
cluster and after a crash and ``plait resume``.  Calls sent at once each see the count
before the others' answers: a call in flight when the count crosses N completes and
counts; every call after that is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..core.model import JSON
from ..errors import TokenBudgetSpent
from ..store.records import TokenUsage

if TYPE_CHECKING:
    from ..store.base import Store

_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")

__all__ = ["TokenBudget"]


@dataclass(slots=True)
class TokenBudget:
    """The budgets one sender's calls answer to: built per attempt or ``ctx.llm`` call."""

    store: Store
    run_id: str
    limit: int | None  # the run's own limits.max_llm_tokens
    step: str
    # tokens noted by the call being sent, not counted yet
    pending: TokenUsage = field(default_factory=TokenUsage)
    _chain: list[tuple[str, int | None]] | None = field(default=None, repr=False)

    def noted(self, usage: JSON) -> None:
        """A ``usage`` note of the call: its tokens are counted once it returns."""
        if not isinstance(usage, dict):
            return
        prompt, completion, total = (_count(usage.get(key)) for key in _KEYS)
        was = self.pending
        self.pending = TokenUsage(was.prompt + prompt, was.completion + completion,
                                  was.total + total)

    async def refuse_spent(self) -> None:
        """TokenBudgetSpent when the run's budget, or an ancestor's, is spent."""
        for run_id, limit in await self._budgets():
            if limit is None:
                continue
            used = await self.store.llm_tokens(run_id)
            if used >= limit:
                raise TokenBudgetSpent(limit, used, step=self.step, budget_run=run_id,
                                       own=run_id == self.run_id)

    async def count(self) -> None:
        """Add the tokens noted since the last count: to the step's, and to the count
        of the run and of every run that started it (one store transaction)."""
        usage, self.pending = self.pending, TokenUsage()
        if usage.total or usage.prompt or usage.completion:
            chain = await self._budgets()
            await self.store.add_llm_tokens(self.run_id, self.step, usage,
                                            [run_id for run_id, _ in chain[1:]])

    async def _budgets(self) -> list[tuple[str, int | None]]:
        """(run id, its limit or None) of the run and of each run that started it."""
        if self._chain is None:
            chain: list[tuple[str, int | None]] = [(self.run_id, self.limit)]
            seen = {self.run_id}
            parent = (await self.store.get_run(self.run_id)).parent_run_id
            while parent is not None and parent not in seen:
                seen.add(parent)
                run = await self.store.get_run(parent)
                stored = await self.store.get_workflow(run.workflow, run.version)
                chain.append((parent, _limit_of(stored.definition)))
                parent = run.parent_run_id
            self._chain = chain
        return self._chain


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 \
        else 0


def _limit_of(definition: JSON) -> int | None:
    """``limits.max_llm_tokens`` of a stored definition (validated when stored)."""
    limits = definition.get("limits") if isinstance(definition, dict) else None
    value = limits.get("max_llm_tokens") if isinstance(limits, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None
