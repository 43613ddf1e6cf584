"""The benchmark workloads, as plain data shared by every adapter, and the step body.

A workload is a DAG of named steps.  Every step does real (small) work: it receives its
parents' outputs and returns a JSON object, ``step_value(name, parent_outputs)``; a
sleep step (``duration > 0``) first sleeps for ``duration`` seconds.  Adapters for
plait, the raw asyncio baseline and every peer engine build their own graph from the
same data and call the same ``step_value``, so the numbers compare engines, not
workloads, and ``Workload.expected_output()`` says what a complete run must return (the
harness checks it after every measured run: no engine can skip work).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

StepValue = dict[str, Any]  # {"step": name, "n": int}


def step_value(name: str, parents: Iterable[Mapping[str, Any]]) -> StepValue:
    """The one step body every engine runs: a pure function of the parents' outputs.
    ``n`` counts the paths from a root to this step, so a wrong or missing parent
    output anywhere changes the sinks' values."""
    return {"step": name, "n": 1 + sum(parent["n"] for parent in parents)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    name: str
    steps: tuple[str, ...]  # topological order
    parents: dict[str, tuple[str, ...]]
    duration: dict[str, float] = field(default_factory=dict)  # seconds of sleep; missing = none

    @property
    def size(self) -> int:
        return len(self.steps)

    @property
    def edges(self) -> int:
        return sum(len(p) for p in self.parents.values())

    @property
    def sleeps(self) -> bool:
        return any(d > 0 for d in self.duration.values())

    def critical_path(self) -> float:
        """Longest sum of durations along any path: the floor for the makespan."""
        finish: dict[str, float] = {}
        for step in self.steps:
            start = max((finish[p] for p in self.parents[step]), default=0.0)
            finish[step] = start + self.duration.get(step, 0.0)
        return max(finish.values(), default=0.0)

    def sinks(self) -> list[str]:
        """Steps no other step depends on, in topological order."""
        children = self.children()
        return [s for s in self.steps if not children[s]]

    def expected_output(self) -> dict[str, StepValue]:
        """What a complete run returns: ``{sink: its step_value}`` (plait's default run
        output is the outputs of its completed sink steps)."""
        value: dict[str, StepValue] = {}
        for step in self.steps:
            value[step] = step_value(step, (value[p] for p in self.parents[step]))
        return {s: value[s] for s in self.sinks()}

    def children(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {s: [] for s in self.steps}
        for step in self.steps:
            for p in self.parents[step]:
                out[p].append(step)
        return out


def chain(n: int = 1000) -> Workload:
    steps = tuple(f"s{i}" for i in range(n))
    parents = {s: ((steps[i - 1],) if i else ()) for i, s in enumerate(steps)}
    return Workload(name=f"chain-{n}", steps=steps, parents=parents)


def fanout(n: int = 1000) -> Workload:
    mids = tuple(f"m{i}" for i in range(n))
    steps = ("src", *mids, "sink")
    parents: dict[str, tuple[str, ...]] = {"src": ()}
    parents.update(dict.fromkeys(mids, ("src",)))
    parents["sink"] = mids
    return Workload(name=f"fanout-1-{n}-1", steps=steps, parents=parents)


def random_layers(n: int = 500, layers: int = 10, seed: int = 7) -> Workload:
    """n steps in `layers` layers; each step past the first layer has 1-3 parents
    drawn from the layer before it (seeded, so every engine gets the same graph)."""
    rng = random.Random(seed)
    per = n // layers
    grid = [[f"l{layer}_{i}" for i in range(per)] for layer in range(layers)]
    parents: dict[str, tuple[str, ...]] = {}
    for layer, names in enumerate(grid):
        for name in names:
            if layer == 0:
                parents[name] = ()
            else:
                k = rng.randint(1, 3)
                parents[name] = tuple(sorted(rng.sample(grid[layer - 1], k)))
    steps = tuple(s for names in grid for s in names)
    return Workload(name=f"random-{n}-in-{layers}-layers", steps=steps, parents=parents)


def unbalanced(branches: int = 4, long: float = 0.4, short: float = 0.05) -> Workload:
    """`branches` parallel chains of `branches` steps between a root and a sink.  In
    chain b, the step at depth b is long and the others are short, so every depth level
    holds one long step.  An eager scheduler finishes in about long + (branches-1)*short;
    a level-by-level (superstep) scheduler pays `long` at every level."""
    steps: list[str] = ["root"]
    parents: dict[str, tuple[str, ...]] = {"root": ()}
    duration: dict[str, float] = {}
    tails: list[str] = []
    for b in range(branches):
        prev = "root"
        for d in range(branches):
            name = f"b{b}_d{d}"
            steps.append(name)
            parents[name] = (prev,)
            duration[name] = long if d == b else short
            prev = name
        tails.append(prev)
    steps.append("sink")
    parents["sink"] = tuple(tails)
    return Workload(name="unbalanced-sleeps", steps=tuple(steps), parents=parents,
                    duration=duration)


def parallel_sleeps(n: int = 200, seconds: float = 0.1) -> Workload:
    steps = tuple(f"p{i}" for i in range(n))
    return Workload(name=f"parallel-{n}-sleeps", steps=steps,
                    parents=dict.fromkeys(steps, ()), duration=dict.fromkeys(steps, seconds))


def standard() -> list[Workload]:
    """The workloads every engine runs (issue: benchmarks)."""
    return [chain(1000), fanout(1000), random_layers(), unbalanced(), parallel_sleeps()]


def wide_random(n: int = 100_000, edges: int = 200_000, layers: int = 100,
                seed: int = 7) -> Workload:
    """n steps in `layers` equal layers and about `edges` edges: every step past the
    first layer gets at least one parent from the layer before it, and the remaining
    edges are spread over those steps at random (seeded).  Wide and shallow, so it
    stresses graph building, validation and planning at scale rather than depth."""
    rng = random.Random(seed)
    per = max(1, n // layers)
    grid = [[f"w{layer}_{i}" for i in range(per)] for layer in range(layers)]
    later = [name for names in grid[1:] for name in names]
    extra = [1] * len(later)
    for i in rng.choices(range(len(later)), k=max(0, edges - len(later))):
        extra[i] += 1
    counts = dict(zip(later, extra))
    parents: dict[str, tuple[str, ...]] = dict.fromkeys(grid[0], ())
    for layer in range(1, layers):
        for name in grid[layer]:
            k = min(counts[name], per)  # a step cannot have more parents than the layer holds
            parents[name] = tuple(sorted(rng.sample(grid[layer - 1], k)))
    steps = tuple(s for names in grid for s in names)
    return Workload(name=f"wide-{len(steps)}-{sum(map(len, parents.values()))}e",
                    steps=steps, parents=parents)
