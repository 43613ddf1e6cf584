"""Drive plait through its public Python API (plait.run and friends) on a Workload.

Every step is added programmatically with `Workflow.add_step`, its parents as
`depends_on`, and a body that computes ``workloads.step_value`` from its parents'
outputs, written in one of the ways the README teaches (option ``style``):

- ``ctx``: one shared ``async def step(ctx: StepContext)`` reading ``ctx.outputs``
  (the parents' outputs) and ``ctx.step_id``;
- ``params``: per step, an ``async def`` whose parameters are named after its parents
  (``async def s5(s4)``; the fan-in sink of fan-out 1->1,000->1 has 1,000 parameters);
  plait binds each parameter to that step's output.  The functions are generated from
  source (``exec``) because their parameter names come from the workload;
- ``sync``: the ``ctx`` body as a plain ``def`` (plait runs it in its thread pool);
- ``noop``: a parameterless ``async def`` returning None (the old shape; an extra row,
  never the headline, and its run output is ``{sink: None}``).

A sleep step awaits ``asyncio.sleep`` (``time.sleep`` when sync) before its body.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Callable
from typing import Any

from workloads import StepValue, Workload, step_value

from plait import RunResult, StepContext, Workflow

StepFn = Callable[..., Any]
STYLES = ("ctx", "params", "sync", "noop")

# the default limits (docs/definitions.md); a definition past them must raise them explicitly.
DEFAULT_MAX_STEPS = 100_000
DEFAULT_MAX_DEPTH = 1_000


async def ctx_step(ctx: StepContext) -> StepValue:
    return step_value(ctx.step_id, ctx.outputs.values())


def sync_ctx_step(ctx: StepContext) -> StepValue:
    return step_value(ctx.step_id, ctx.outputs.values())


async def noop_step() -> None:
    return None


def _ctx_sleeper(seconds: float) -> StepFn:
    async def sleep_step(ctx: StepContext) -> StepValue:
        await asyncio.sleep(seconds)
        return step_value(ctx.step_id, ctx.outputs.values())
    return sleep_step


def _sync_sleeper(seconds: float) -> StepFn:
    def sleep_step(ctx: StepContext) -> StepValue:
        time.sleep(seconds)
        return step_value(ctx.step_id, ctx.outputs.values())
    return sleep_step


def _noop_sleeper(seconds: float) -> StepFn:
    async def sleep_step() -> None:
        await asyncio.sleep(seconds)
    return sleep_step


def params_step(name: str, parents: tuple[str, ...], seconds: float = 0.0) -> StepFn:
    """``async def NAME(P1, P2, ...): return step_value("NAME", (P1, P2, ...))``: a
    function written the way a user writes one by hand, its parameters named after the
    parent steps (step ids in the workloads are Python identifiers)."""
    args = ", ".join(parents)
    sleep = f"    await asyncio.sleep({seconds!r})\n" if seconds > 0 else ""
    source = (f"async def {name}({args}):\n{sleep}"
              f"    return step_value({name!r}, ({args}{',' if parents else ''}))\n")
    namespace: dict[str, Any] = {"asyncio": asyncio, "step_value": step_value,
                                 "__name__": __name__}
    exec(compile(source, f"<step {name}>", "exec"), namespace)
    fn: StepFn = namespace[name]
    return fn


def _depth(workload: Workload) -> int:
    """Steps on the longest path (a chain of n steps has depth n)."""
    level: dict[str, int] = {}
    for step in workload.steps:
        level[step] = 1 + max((level[p] for p in workload.parents[step]), default=0)
    return max(level.values(), default=0)


def _shared(style: str) -> tuple[StepFn, Callable[[float], StepFn]]:
    """The function of a step that does not sleep, and the factory of sleeping ones."""
    return {"ctx": (ctx_step, _ctx_sleeper), "sync": (sync_ctx_step, _sync_sleeper),
            "noop": (noop_step, _noop_sleeper)}[style]


def build_workflow(workload: Workload, style: str = "ctx") -> Workflow:
    """A plait Workflow with one step per Workload step and one dependency per edge."""
    if style not in STYLES:
        raise ValueError(f"style {style!r}: expected one of {', '.join(STYLES)}")
    kwargs: dict[str, Any] = {"concurrency": max(16, workload.size)}
    depth = _depth(workload)
    if workload.size > DEFAULT_MAX_STEPS or depth > DEFAULT_MAX_DEPTH:
        # A deep chain must raise the limits, as the definition format allows.  `Limits` is not
        # in plait's __all__ yet, hence the import from the model module.
        from plait.core.model import Limits
        kwargs["limits"] = Limits(max_steps=max(DEFAULT_MAX_STEPS, workload.size),
                                  max_depth=max(DEFAULT_MAX_DEPTH, depth))
    wf = Workflow(workload.name, **kwargs)
    if style == "params":
        for step in workload.steps:
            parents = workload.parents[step]
            fn = params_step(step, parents, workload.duration.get(step, 0.0))
            wf.add_step(step, fn, depends_on=list(parents))
        return wf
    plain, sleeper = _shared(style)
    sleepers: dict[float, StepFn] = {}  # one function per distinct duration, shared
    for step in workload.steps:
        seconds = workload.duration.get(step, 0.0)
        fn = plain if seconds <= 0 else sleepers.setdefault(seconds, sleeper(seconds))
        wf.add_step(step, fn, depends_on=list(workload.parents[step]))
    return wf


def expected_output(workload: Workload, style: str = "ctx") -> dict[str, Any]:
    """What a complete run of ``build_workflow(workload, style)`` returns."""
    if style == "noop":
        return dict.fromkeys(workload.sinks())
    return workload.expected_output()


async def run_workflow(wf: Workflow, db: Any = "memory://", input: Any = None) -> RunResult:
    result = await wf.run_async({} if input is None else input, db=db)
    if result.status != "completed":
        raise RuntimeError(f"plait run ended {result.status!r}, not 'completed'")
    return result


class PlaitAdapter:
    """The bench adapter shape (see child.py) around build_workflow / run_workflow.

    `db` is a store URL; `{tmp}` in it becomes a fresh temporary directory, so a durable
    store (`sqlite:///{tmp}/bench.db`) starts empty in every measuring process.
    `style` is the step style (module docstring)."""

    engine = "plait"

    def __init__(self, db: str = "memory://", style: str = "ctx") -> None:
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if "{tmp}" in db:
            self._tmp = tempfile.TemporaryDirectory(prefix="plait-bench-")
            db = db.replace("{tmp}", self._tmp.name)
        self.db = db
        self.style = style

    def version(self) -> str:
        from importlib.metadata import PackageNotFoundError, version
        try:
            return version("plait")
        except PackageNotFoundError:
            return "unknown (not installed as a package)"

    def unsupported(self, workload: Workload) -> str | None:
        return None

    def build(self, workload: Workload) -> Workflow:
        return build_workflow(workload, self.style)

    def expected(self, workload: Workload) -> dict[str, Any]:
        return expected_output(workload, self.style)

    def timings(self, wf: Workflow) -> dict[str, float]:
        """validate() and plan() timed on their own: both must stay fast at 100k steps."""
        out: dict[str, float] = {}
        for phase in ("validate", "plan"):
            start = time.perf_counter()
            getattr(wf, phase)()
            out[f"{phase}_s"] = time.perf_counter() - start
        return out

    async def arun(self, wf: Workflow) -> Any:
        return (await run_workflow(wf, self.db)).output

    def teardown(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()

    def notes(self) -> str:
        return f"steps: {self.style}"
