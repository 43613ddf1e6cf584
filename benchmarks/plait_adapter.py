"""Drive plait through its public Python API (SPEC section 1.2) on a Workload.

Every step is added programmatically with `Workflow.add_step`, its parents as
`depends_on`, and a parameterless `async def` body: a no-op returns None, a sleep step
awaits asyncio.sleep.  Steps take no parameters so that plait resolves no inputs and the
only dependencies are the Workload's edges.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

from workloads import Workload

from plait import RunResult, Workflow

StepFn = Callable[[], Awaitable[None]]

# SPEC section 2 default limits; a definition past them must raise them explicitly.
DEFAULT_MAX_STEPS = 100_000
DEFAULT_MAX_DEPTH = 1_000


async def _noop() -> None:
    return None


def _sleeper(seconds: float) -> StepFn:
    async def sleep_step() -> None:
        await asyncio.sleep(seconds)
    return sleep_step


def _depth(workload: Workload) -> int:
    """Steps on the longest path (a chain of n steps has depth n)."""
    level: dict[str, int] = {}
    for step in workload.steps:
        level[step] = 1 + max((level[p] for p in workload.parents[step]), default=0)
    return max(level.values(), default=0)


def build_workflow(workload: Workload) -> Workflow:
    """A plait Workflow with one step per Workload step and one dependency per edge."""
    kwargs: dict[str, Any] = {"concurrency": max(16, workload.size)}
    depth = _depth(workload)
    if workload.size > DEFAULT_MAX_STEPS or depth > DEFAULT_MAX_DEPTH:
        # A deep chain must raise the limits, as SPEC section 2 allows.  `Limits` is not
        # in plait's __all__ yet, hence the import from the model module.
        from plait.core.model import Limits
        kwargs["limits"] = Limits(max_steps=max(DEFAULT_MAX_STEPS, workload.size),
                                  max_depth=max(DEFAULT_MAX_DEPTH, depth))
    wf = Workflow(workload.name, **kwargs)
    sleepers: dict[float, StepFn] = {}  # one function per distinct duration, shared
    for step in workload.steps:
        seconds = workload.duration.get(step, 0.0)
        fn = _noop if seconds <= 0 else sleepers.setdefault(seconds, _sleeper(seconds))
        wf.add_step(step, fn, depends_on=list(workload.parents[step]))
    return wf


async def run_workflow(wf: Workflow, db: str = "memory://") -> RunResult:
    result = await wf.run_async({}, db=db)
    if result.status != "completed":
        raise RuntimeError(f"plait run ended {result.status!r}, not 'completed'")
    return result


class PlaitAdapter:
    """The bench adapter shape (see child.py) around build_workflow / run_workflow.

    `db` is a store URL; `{tmp}` in it becomes a fresh temporary directory, so a durable
    store (`sqlite:///{tmp}/bench.db`) starts empty in every measuring process."""

    engine = "plait"

    def __init__(self, db: str = "memory://") -> None:
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if "{tmp}" in db:
            self._tmp = tempfile.TemporaryDirectory(prefix="plait-bench-")
            db = db.replace("{tmp}", self._tmp.name)
        self.db = db

    def version(self) -> str:
        from importlib.metadata import PackageNotFoundError, version
        try:
            return version("plait")
        except PackageNotFoundError:
            return "unknown (not installed as a package)"

    def unsupported(self, workload: Workload) -> str | None:
        return None

    def build(self, workload: Workload) -> Workflow:
        return build_workflow(workload)

    def timings(self, wf: Workflow) -> dict[str, float]:
        """validate() and plan() timed on their own: both must stay fast at 100k steps."""
        out: dict[str, float] = {}
        for phase in ("validate", "plan"):
            start = time.perf_counter()
            getattr(wf, phase)()
            out[f"{phase}_s"] = time.perf_counter() - start
        return out

    async def arun(self, wf: Workflow) -> None:
        await run_workflow(wf, self.db)

    def teardown(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
