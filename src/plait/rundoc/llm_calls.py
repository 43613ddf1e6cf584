"""What ``plait show`` and the API show of a run's model calls: the messages each ``llm``
step sent (its ``llm_request`` history notes) and the tokens (its ``usage`` notes),
rolled up to the run with those of its child runs.

JSON (``plait show --json`` and ``GET /api/runs/{id}``):

- every step entry gains ``"llm"``: null, or for a step that sent a model request
  ``{"model", "attempt", "messages": [{"role", "content"}, ...], "cut"}`` (the latest
  attempt's request; ``cut`` null unless the messages were cut to the bound) and
  ``"usage"``: null, or ``{"prompt_tokens", "completion_tokens", "total_tokens"}`` of
  every attempt of the step and, for a ``workflow`` or ``loop`` step (or a map item of
  one), of its child runs and theirs;
- the run gains ``"usage"`` (the three counts of the run and all its descendants),
  ``"llm_tokens"`` (their ``total_tokens``) and ``"llm_budget"``: null, or for a run
  whose definition sets ``limits.max_llm_tokens`` ``{"max_llm_tokens", "used"}``, where
  ``used`` is the count the budget is judged by (``Store.llm_tokens``: every call sent,
  the child runs' included; ``steps.budget``).

Child runs are found as ``plait show`` finds them (their ids derive from the run, the
step and the iteration), at most ``MAX_CHILD_RUNS`` per roll-up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..core.child_ids import child_run_id
from ..core.model import JSON, JSONDict
from ..errors import RunNotFound, StoreError
from ..observe.tokens import Tokens, parent_steps, usage_of
from ..store.base import EventRecord, RunRecord, Store
from .notes import latest_notes

MAX_CHILD_RUNS = 1_000  # read per roll-up: a map of 10,000 child workflows stops there
MAX_DEPTH = 32


def step_tokens(events: Sequence[EventRecord]) -> dict[str, Tokens]:
    """Step -> the tokens of all its attempts (its ``usage`` notes)."""
    out: dict[str, Tokens] = {}
    for event in events:
        tokens = usage_of(event)
        if tokens is not None and event.step_id is not None:
            out[event.step_id] = out.get(event.step_id, Tokens()) + tokens
    return out


def requests(events: Sequence[EventRecord]) -> dict[str, JSONDict]:
    """Step -> the model request its latest attempt sent (its ``llm_request`` note)."""
    return latest_notes(events, "llm_request")


def request_json(note: JSONDict) -> JSONDict:
    """A step entry's ``llm``: the request as the note keeps it."""
    messages = note.get("messages")
    return {"model": note.get("model"), "attempt": note.get("attempt"),
            "messages": messages if isinstance(messages, list) else [],
            "cut": note.get("cut") if isinstance(note.get("cut"), str) else None}


# ------------------------------------------------------------------ the roll-up


@dataclass(slots=True)
class RollUp:
    """The tokens of one run: its steps' own, and those of each step's child runs."""

    own: dict[str, Tokens]
    children: dict[str, Tokens]
    reads: int = 0  # child runs read so far (bounded by MAX_CHILD_RUNS)
    # (limits.max_llm_tokens, the stored count) of a run with a token budget
    budget: tuple[int, int] | None = None

    def of_step(self, step_id: str) -> Tokens:
        return self.own.get(step_id, Tokens()) + self.children.get(step_id, Tokens())

    @property
    def total(self) -> Tokens:
        out = Tokens()
        for tokens in [*self.own.values(), *self.children.values()]:
            out = out + tokens
        return out

    @property
    def in_children(self) -> Tokens:
        out = Tokens()
        for tokens in self.children.values():
            out = out + tokens
        return out


async def roll_up(store: Store, run: RunRecord, events: Sequence[EventRecord],
                  step_ids: Sequence[str], definition: JSON) -> RollUp:
    """The tokens of ``run`` (whose history is ``events``, whose steps ``step_ids``,
    whose definition ``definition``: None when not stored) and of its descendants."""
    counter = RollUp(own={}, children={})
    rolled = await _roll_up(store, run, events, step_ids, counter, 0, definition)
    limits = definition.get("limits") if isinstance(definition, dict) else None
    limit = limits.get("max_llm_tokens") if isinstance(limits, dict) else None
    if isinstance(limit, int) and not isinstance(limit, bool):
        rolled.budget = (limit, await store.llm_tokens(run.run_id))
    return rolled


async def _roll_up(store: Store, run: RunRecord, events: Sequence[EventRecord],
                   step_ids: Sequence[str], counter: RollUp, depth: int,
                   definition: JSON) -> RollUp:
    result = RollUp(own=step_tokens(events), children={})
    if depth >= MAX_DEPTH:
        return result
    for step_id, child in await _child_runs(store, run, step_ids, counter, definition):
        child_events = await store.get_events(child.run_id)
        child_steps = [s.step_id for s in await store.get_steps(child.run_id)]
        sub = await _roll_up(store, child, child_events, child_steps, counter, depth + 1,
                             await _definition(store, child))
        result.children[step_id] = result.children.get(step_id, Tokens()) + sub.total
    return result


async def _child_runs(store: Store, run: RunRecord, step_ids: Sequence[str],
                      counter: RollUp, definition: JSON) -> list[tuple[str, RunRecord]]:
    """(step, child run) of every child run the run's steps started, in order."""
    out: list[tuple[str, RunRecord]] = []
    for step_id, most in parent_steps(definition, step_ids):
        for key in range(most):
            if counter.reads >= MAX_CHILD_RUNS:
                return out
            try:
                child = await store.get_run(child_run_id(run.run_id, step_id, str(key)))
            except RunNotFound:
                break
            counter.reads += 1
            out.append((step_id, child))
    return out


async def _definition(store: Store, run: RunRecord) -> JSON:
    try:
        return (await store.get_workflow(run.workflow, run.version)).definition
    except StoreError:
        return None


# ------------------------------------------------------------------ the JSON


def add_llm(value: JSONDict, events: Sequence[EventRecord], rolled: RollUp) -> JSONDict:
    """``plait show --json`` and the API's run document: ``llm`` and ``usage`` on every
    step entry, ``usage`` and ``llm_tokens`` on the run (see the module docstring)."""
    sent = requests(events)
    steps = value.get("steps")
    for step_id, entry in steps.items() if isinstance(steps, dict) else ():
        if isinstance(entry, dict):
            note = sent.get(step_id)
            entry["llm"] = request_json(note) if note is not None else None
            tokens = rolled.of_step(step_id)
            entry["usage"] = tokens.to_json() if tokens or step_id in rolled.own else None
    total = rolled.total
    value["usage"] = total.to_json()
    value["llm_tokens"] = total.total
    budget = rolled.budget
    value["llm_budget"] = None if budget is None else {"max_llm_tokens": budget[0],
                                                       "used": budget[1]}
    return value
