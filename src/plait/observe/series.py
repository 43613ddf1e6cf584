"""Which label values plait's Prometheus series take: a bounded set, whatever is stored.

Workflow and step labels come from names, so their number is bounded twice:

- by folding: a map item counts under its map step (``series_name``: ``fetch[3]`` is
  ``fetch``), so the size of a run never adds a series;
- by a budget: at most ``MAX_WORKFLOWS`` workflows and ``MAX_STEPS`` (workflow, step)
  pairs get series of their own; the others count under ``OTHER`` (a workflow's other
  steps as ``(workflow, OTHER)``, other workflows as ``(OTHER, OTHER)``), so registering
  many definitions, or one with very many steps, cannot flood a scrape either.

The store's metrics keep the first names in name order (``Labels.chosen``: the same
choice at every scrape while no name sorting before them arrives); the live counters
keep the first names they meet (``Labels`` as is), since a counter once exposed stays.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..store.observations import series_name

__all__ = ["MAX_STEPS", "MAX_WORKFLOWS", "OTHER", "Labels"]

OTHER = "(other)"  # never a workflow name or step id (parentheses are not allowed in them)
MAX_WORKFLOWS = 100
MAX_STEPS = 1_000  # (workflow, step) pairs, over all workflows


class Labels:
    """The budget of label values (see the module docstring): ``workflow(name)`` and
    ``step(workflow, step)`` give the labels to count under, admitting new names while
    the budget lasts."""

    def __init__(self, max_workflows: int = MAX_WORKFLOWS, max_steps: int = MAX_STEPS) -> None:
        self.max_workflows, self.max_steps = max_workflows, max_steps
        self._workflows: set[str] = set()
        self._steps: set[tuple[str, str]] = set()

    @classmethod
    def chosen(cls, workflows: Iterable[str], steps: Iterable[tuple[str, str]], *,
               max_workflows: int = MAX_WORKFLOWS, max_steps: int = MAX_STEPS) -> Labels:
        """The budget spent on the first names in name order."""
        labels = cls(max_workflows, max_steps)
        for workflow in sorted({series_name(w) for w in workflows}):
            labels.workflow(workflow)
        for workflow, step in sorted({(series_name(w), series_name(s)) for w, s in steps}):
            labels.step(workflow, step)
        return labels

    def workflow(self, name: str) -> str:
        folded = series_name(name)
        if folded in self._workflows:
            return folded
        if len(self._workflows) < self.max_workflows:
            self._workflows.add(folded)
            return folded
        return OTHER

    def step(self, workflow: str, step: str) -> tuple[str, str]:
        w = self.workflow(workflow)
        if w == OTHER:
            return OTHER, OTHER
        pair = (w, series_name(step))
        if pair in self._steps:
            return pair
        if len(self._steps) < self.max_steps:
            self._steps.add(pair)
            return pair
        return w, OTHER
