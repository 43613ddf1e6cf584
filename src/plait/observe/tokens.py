"""LLM token usage: one ``Tokens`` value, the ``usage`` notes it is read from, and the
roll-up of a run's tokens over its child runs (``workflow`` and ``loop`` steps, and map
items of those types), at any depth.

Pure: the callers (``observe.metrics``, ``rundoc.llm_calls``) read the store.  A child run
is found two ways, both without the store: under its parent *run* through its
``parent_run_id``, and under its parent *step* through its id, which derives from the
parent run, the step and a key (``"0"``, or a loop's iteration: ``child_run_id``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..core.child_ids import child_run_id
from ..core.model import JSON, JSONDict
from ..steps.traits import traits
from ..store.base import EventRecord

__all__ = ["Tokens", "by_step", "is_cache_hit", "parent_steps", "tokens_of", "usage_of",
           "with_descendants"]

@dataclass(frozen=True, slots=True)
class Tokens:
    """LLM token usage (sums of ``usage`` notes)."""

    prompt: int = 0
    completion: int = 0
    total: int = 0

    def __add__(self, other: Tokens) -> Tokens:
        return Tokens(self.prompt + other.prompt, self.completion + other.completion,
                      self.total + other.total)

    def __bool__(self) -> bool:
        return bool(self.prompt or self.completion or self.total)

    def to_json(self) -> JSONDict:
        return {"prompt_tokens": self.prompt, "completion_tokens": self.completion,
                "total_tokens": self.total}

    def text(self) -> str:
        return f"{self.total:,} (prompt {self.prompt:,}, completion {self.completion:,})"


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def usage_of(event: EventRecord) -> Tokens | None:
    """The token usage an ``llm`` attempt's history note records, else None."""
    usage = event.data.get("usage") if event.kind == "note" else None
    if not isinstance(usage, dict):
        return None
    return Tokens(_count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens")),
                  _count(usage.get("total_tokens")))


def is_cache_hit(event: EventRecord) -> bool:
    cache = event.data.get("cache") if event.kind == "note" else None
    return isinstance(cache, dict) and cache.get("hit") is True


def tokens_of(events: Iterable[EventRecord]) -> Tokens:
    """The tokens of a run's own steps: the sum of its ``usage`` notes."""
    out = Tokens()
    for event in events:
        usage = usage_of(event)
        if usage is not None:
            out = out + usage
    return out


# ------------------------------------------------------------------ child runs


def parent_steps(definition: JSON, step_ids: Sequence[str]) -> list[tuple[str, int]]:
    """(step id, most children) of the steps that start child runs (a type with the
    ``child_runs`` trait: ``workflow``, ``loop``), and the items (among ``step_ids``) of
    a map (``expands``) whose inline step is one."""
    steps = definition.get("steps") if isinstance(definition, dict) else None
    out: list[tuple[str, int]] = []
    items: dict[str, int] = {}
    for step in steps if isinstance(steps, list) else []:
        if not isinstance(step, dict):
            continue
        kind = traits(step.get("type"))
        inline = step.get("step") if kind.expands else None
        if isinstance(inline, dict) and traits(inline.get("type")).child_runs:
            items[str(step.get("id"))] = _most(inline)
        elif kind.child_runs is not None:
            out.append((str(step.get("id")), kind.child_runs(step)))
    if items:
        out += [(sid, items[base]) for sid in step_ids if sid.endswith("]")
                and (base := sid.rpartition("[")[0]) in items]
    return out


def _most(step: JSONDict) -> int:
    count = traits(step.get("type")).child_runs
    return count(step) if count is not None else 0


def with_descendants(parents: Mapping[str, str | None],
                     own: Mapping[str, Tokens]) -> dict[str, Tokens]:
    """Run id -> its ``own`` tokens plus those of its descendants among ``parents``
    (run id -> ``parent_run_id``).  Each run is visited once: O(runs)."""
    children: dict[str, list[str]] = {}
    for run_id, parent in parents.items():
        if parent is not None and parent != run_id and parent in parents:
            children.setdefault(parent, []).append(run_id)
    out: dict[str, Tokens] = {}
    seen: set[str] = set()
    for root in parents:
        _fill(root, children, own, out, seen)
    return out


def _fill(root: str, children: Mapping[str, list[str]], own: Mapping[str, Tokens],
          out: dict[str, Tokens], seen: set[str]) -> None:
    """Post-order without recursion (nesting has no depth limit); ``seen`` cuts a
    cycle of parents, which ids derived from the parent cannot form anyway."""
    stack = [(root, False)]
    while stack:
        run_id, expanded = stack.pop()
        if expanded:
            below = [out.get(child, Tokens()) for child in children.get(run_id, ())]
            out[run_id] = sum(below, own.get(run_id, Tokens()))
        elif run_id not in seen:
            seen.add(run_id)
            stack.append((run_id, True))
            stack.extend((child, False) for child in children.get(run_id, ()))


def by_step(run_id: str, steps: Sequence[tuple[str, int]],
            rolled: Mapping[str, Tokens]) -> dict[str, Tokens]:
    """Step -> the rolled-up tokens of the child runs it started, for the ``steps``
    (``parent_steps``) of run ``run_id``; children missing from ``rolled`` count 0
    (keys are tried in order up to the first missing one)."""
    out: dict[str, Tokens] = {}
    for step_id, most in steps:
        for key in range(most):
            child = rolled.get(child_run_id(run_id, step_id, str(key)))
            if child is None:
                break
            out[step_id] = out.get(step_id, Tokens()) + child
    return out
