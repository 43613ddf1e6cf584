"""The tokens model calls spent, in the memory store (``Store.add_llm_tokens`` /
``llm_tokens``): per step its calls' usage, per run its budget count."""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence

from .observations import MetricsSnapshot, count_usage, series_name
from .records import TokenUsage


class MemoryTokens:
    def __init__(self) -> None:
        self._runs: dict[str, int] = {}  # run id -> its count (child runs' included)
        self._steps: dict[tuple[str, str], TokenUsage] = {}  # (run, step) -> usage

    def add(self, run_id: str, step_id: str, usage: TokenUsage,
            ancestors: Sequence[str], known: Container[str]) -> int:
        """Add one call's ``usage`` (checked; ``known``: the runs stored)."""
        usage.checked()
        was = self._steps.get((run_id, step_id), TokenUsage())
        self._steps[run_id, step_id] = TokenUsage(was.prompt + usage.prompt,
                                                  was.completion + usage.completion,
                                                  was.total + usage.total)
        for run in dict.fromkeys([run_id, *ancestors]):
            if run in known:
                self._runs[run] = self._runs.get(run, 0) + usage.total
        return self._runs[run_id]

    def count(self, run_id: str) -> int:
        return self._runs.get(run_id, 0)

    def sent_calls(self, run_id: str, step_id: str) -> bool:
        """Whether the step sent model calls (its output's usage then does not count)."""
        return (run_id, step_id) in self._steps

    def fold(self, snapshot: MetricsSnapshot, workflows: Mapping[str, str]) -> None:
        """Add each step's calls to ``snapshot.tokens`` (run id -> workflow: ``workflows``)."""
        for (run_id, step_id), usage in self._steps.items():
            workflow = workflows.get(run_id)
            if workflow is not None:
                count_usage(snapshot, workflow, series_name(step_id), {"usage": {
                    "prompt_tokens": usage.prompt, "completion_tokens": usage.completion,
                    "total_tokens": usage.total}})
