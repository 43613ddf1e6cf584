"""plait against the engines users would pick instead; writes benchmarks/peers/RESULTS.md.

    bash benchmarks/peers/run.sh [--only plait,langgraph] [--skip-big] [--out FILE]

(run.sh makes the peers' own venv and runs this file with it.)  Every (engine, workload)
pair runs in a fresh interpreter through ../child.py: the peers with this venv's Python,
plait and the raw asyncio floor with the project's venv (PLAIT_PYTHON overrides), so no
peer is ever installed beside plait.  Each run has a timeout and a time budget for its
repeats; the whole benchmark takes about 8-10 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from harness import Job, Measurement, fmt_num, fmt_s, log, machine_header, measure, met, table  # noqa: E402

NOOP_SPECS = ("chain:1000", "fanout:1000", "random_layers")
SLEEP_SPECS = ("unbalanced", "parallel_sleeps")
BIG_SPEC = "chain:100000"
BIG_STEPS = 100_000
PROBE_SPEC = "chain:10000"
PROBE_STEPS = 10_000
BIG_CAP_S = 60.0  # an engine whose estimated 100,000-chain build + run exceeds this is skipped

NOOP_REPEATS, SLEEP_REPEATS, WARMUP = 5, 3, 1
BUDGET_S = 30.0  # measured seconds per (engine, workload) before repeats stop early
TIMEOUT_S = 300.0

# Targets from the issue "benchmarks against the engines users would pick instead".
MIN_GAIN = {"langgraph": 10.0, "prefect": 100.0}
MAX_MAKESPAN_RATIO = 1.05
LEVEL_BARRIER_RATIO = 1.5


def project_python() -> str:
    venv = HERE.parent.parent / ".venv" / "bin" / "python"
    return os.environ.get("PLAIT_PYTHON") or (str(venv) if venv.exists() else sys.executable)


@dataclass(frozen=True, slots=True, kw_only=True)
class Engine:
    key: str
    label: str
    adapter: str
    python: str = sys.executable
    level_by_level: bool = False  # runs the DAG in barriers: a step waits for its level


def engines() -> list[Engine]:
    own = project_python()
    return [
        Engine(key="plait", label="plait", adapter="plait_adapter:PlaitAdapter", python=own),
        Engine(key="asyncio", label="raw asyncio", adapter="baseline:BaselineAdapter",
               python=own),
        Engine(key="langgraph", label="LangGraph", adapter="langgraph_adapter:LangGraphAdapter",
               level_by_level=True),
        Engine(key="prefect", label="Prefect", adapter="prefect_adapter:PrefectAdapter"),
        Engine(key="hamilton", label="Hamilton (sync)",
               adapter="hamilton_adapter:HamiltonSyncAdapter"),
        Engine(key="hamilton-async", label="Hamilton (async)",
               adapter="hamilton_adapter:HamiltonAsyncAdapter"),
        Engine(key="dask", label="Dask (threads)", adapter="dask_adapter:DaskAdapter"),
        Engine(key="dbos", label="DBOS (SQLite)", adapter="dbos_adapter:DbosAdapter",
               level_by_level=True),
        Engine(key="graphlib", label="graphlib + threads",
               adapter="graphlib_adapter:GraphlibAdapter"),
    ]


Results = dict[tuple[str, str], Measurement]  # (engine key, spec) -> measurement


def job_for(eng: Engine, spec: str) -> Job:
    noop = spec not in SLEEP_SPECS
    return Job(adapter=eng.adapter, spec=spec, python=eng.python,
               repeats=NOOP_REPEATS if noop else SLEEP_REPEATS,
               warmup=WARMUP, timeout_s=TIMEOUT_S, budget_s=BUDGET_S)


def run_one(eng: Engine, job: Job) -> Measurement:
    log(f"  {eng.label:<22} {job.spec}")
    m = measure(job)
    log(f"    -> {m.problem or fmt_s(m.median_s)} ({m.elapsed_s:.0f} s)")
    return m


def _total_s(m: Measurement) -> float:
    """What one more run costs: building the graph plus running it."""
    return float(m.data.get("build_s", 0.0)) + m.median_s


def linear_skip(small: Measurement | None) -> str | None:
    """First gate for the big chain: the 1,000-chain cost, scaled linearly."""
    if small is None or not small.ok:
        return "no 1,000-step chain result to extrapolate from"
    estimate = _total_s(small) * BIG_STEPS / small.steps
    if estimate > BIG_CAP_S:
        return (f"skipped: its 1,000-chain cost ({small.per_step_us:,.0f} µs/step) scales to "
                f"~{estimate:,.0f} s per run, over the {BIG_CAP_S:.0f} s cap")
    return None


def growth_skip(small: Measurement, probe: Measurement) -> str | None:
    """Second gate: a 10,000-chain probe shows how the cost really grows (some engines are
    superlinear), extrapolated as a power law to 100,000 steps."""
    if not probe.ok:
        return f"skipped: the {probe.steps or PROBE_STEPS:,}-chain probe failed: {probe.problem}"
    growth = _total_s(probe) / _total_s(small)  # for 10x the steps
    estimate = _total_s(probe) * growth ** (math.log(BIG_STEPS / probe.steps, 10))
    if estimate > BIG_CAP_S:
        return (f"skipped: 1,000 -> 10,000 steps cost {growth:.0f}× more "
                f"({_total_s(small):.2f} s -> {_total_s(probe):.1f} s with graph build), "
                f"which extrapolates to ~{estimate:,.0f} s, over the {BIG_CAP_S:.0f} s cap")
    return None


def _skipped(eng: Engine, spec: str, reason: str) -> Measurement:
    log(f"  {eng.label:<22} {reason}")
    return Measurement(job=job_for(eng, spec), data={"unsupported": reason}, elapsed_s=0)


def measure_big(eng: Engine, res: Results) -> None:
    """The 100,000-step chain, for the engines that can hold it within the cap."""
    small = res.get((eng.key, "chain:1000"))
    reason = linear_skip(small)
    if reason or small is None:
        res[eng.key, PROBE_SPEC] = _skipped(eng, PROBE_SPEC, reason or "")
        res[eng.key, BIG_SPEC] = _skipped(eng, BIG_SPEC, reason or "")
        return
    probe_job = Job(adapter=eng.adapter, spec=PROBE_SPEC, python=eng.python, repeats=1,
                    timeout_s=BIG_CAP_S)
    probe = res[eng.key, PROBE_SPEC] = run_one(eng, probe_job)
    reason = growth_skip(small, probe)
    if reason:
        res[eng.key, BIG_SPEC] = _skipped(eng, BIG_SPEC, reason)
        return
    job = Job(adapter=eng.adapter, spec=BIG_SPEC, python=eng.python, repeats=1,
              timeout_s=4 * BIG_CAP_S)
    res[eng.key, BIG_SPEC] = run_one(eng, job)


def measure_all(engs: list[Engine], big: bool) -> Results:
    res: Results = {}
    for spec in NOOP_SPECS + SLEEP_SPECS:
        log(spec)
        for eng in engs:
            res[eng.key, spec] = run_one(eng, job_for(eng, spec))
    if big:
        log(f"{PROBE_SPEC} probe and {BIG_SPEC}")
        for eng in engs:
            measure_big(eng, res)
    return res


# --- report ------------------------------------------------------------------------------

def workload_rows(res: Results, engs: list[Engine], spec: str) -> list[list[object]]:
    plait = res.get(("plait", spec))
    noop = spec not in SLEEP_SPECS
    rows: list[list[object]] = []
    for eng in engs:
        m = res.get((eng.key, spec))
        if m is None:
            continue
        if m.problem:
            rows.append([eng.label, "", m.problem, "", "", "", "", ""])
            continue
        vs_plait = (f"{m.median_s / plait.median_s:,.1f}×"
                    if plait is not None and plait.ok and eng.key != "plait" else "—")
        rows.append([eng.label, len(m.data["walls"]), fmt_s(m.median_s),
                     fmt_num(m.per_step_us) if noop else "—",
                     "—" if noop else f"{m.makespan_ratio:.2f}",
                     fmt_s(m.data.get("build_s")), m.peak_text(), vs_plait])
    return rows


def target_rows(res: Results, engs: list[Engine]) -> list[list[object]]:
    rows: list[list[object]] = []
    for spec in NOOP_SPECS:
        for key, gain in MIN_GAIN.items():
            rows.append(_gain_row(res, spec, key, gain))
    for spec in SLEEP_SPECS:
        rows.append(_makespan_row(res, engs, spec))
    return rows


def _gain_row(res: Results, spec: str, key: str, gain: float) -> list[object]:
    plait, peer = res.get(("plait", spec)), res.get((key, spec))
    name = key.capitalize() if key != "langgraph" else "LangGraph"
    label = f"{_workload_name(res, spec)}: per-step overhead ≥ {gain:g}× lower than {name}"
    if plait is None or peer is None or not plait.ok or not peer.ok:
        why = (plait.problem if plait is not None and not plait.ok
               else peer.problem if peer is not None else "not measured")
        return [label, f"no measurement ({why})", met(None)]
    ratio = peer.per_step_us / plait.per_step_us
    return [label, f"{name} {peer.per_step_us:,.0f} µs vs plait {plait.per_step_us:,.1f} µs "
            f"= {ratio:,.1f}×", met(ratio >= gain)]


def _makespan_row(res: Results, engs: list[Engine], spec: str) -> list[object]:
    """The makespan target holds where level-by-level engines cannot get under 1.5×."""
    levelled = {e.label: res[e.key, spec].makespan_ratio for e in engs
                if e.level_by_level and (e.key, spec) in res and res[e.key, spec].ok}
    shown = ", ".join(f"{label} {ratio:.2f}×" for label, ratio in levelled.items())
    applies = bool(levelled) and min(levelled.values()) >= LEVEL_BARRIER_RATIO
    label = (f"{_workload_name(res, spec)}: plait makespan ≤ {MAX_MAKESPAN_RATIO:g}× critical "
             f"path, where level-by-level engines are ≥ {LEVEL_BARRIER_RATIO:g}× "
             f"({shown or 'none measured'})")
    plait = res.get(("plait", spec))
    if plait is None or not plait.ok:
        return [label, f"no measurement ({plait.problem if plait else 'not run'})", met(None)]
    measured = f"{plait.makespan_ratio:.3f}×"
    if not applies:
        return [label, measured + " (target does not apply: a level-by-level engine is "
                f"under {LEVEL_BARRIER_RATIO:g}× here)", met(None)]
    return [label, measured, met(plait.makespan_ratio <= MAX_MAKESPAN_RATIO)]


def _workload_name(res: Results, spec: str) -> str:
    for (_, s), m in res.items():
        if s == spec and "workload" in m.data:
            return str(m.data["workload"])
    return spec


def notes(res: Results, engs: list[Engine]) -> list[str]:
    lines = ["## Notes", ""]
    for eng in engs:
        found = [(spec, m) for (key, spec), m in res.items() if key == eng.key]
        version = next((m.data["version"] for _, m in found if "version" in m.data), "?")
        setup = max((m.data.get("setup_s", 0.0) for _, m in found), default=0.0)
        extra = f"; setup before the first run: up to {fmt_s(setup)}" if setup > 0.5 else ""
        lines.append(f"- **{eng.label}** {version}{extra}")
        lines += [f"  - {c}" for c in _configs(res, found)]
    lines += ["", _expressible(res)]
    return lines + [""] + EXPLANATIONS


def _configs(res: Results, found: list[tuple[str, Measurement]]) -> list[str]:
    """Each configuration an adapter reported (e.g. its thread count), with where."""
    where: dict[str, list[str]] = {}
    for spec, m in found:
        if m.data.get("notes"):
            where.setdefault(str(m.data["notes"]), []).append(_workload_name(res, spec))
    if len(where) == 1:
        return [f"{next(iter(where))} (all workloads)"]
    return [f"{config}: {', '.join(names)}" for config, names in where.items()]


def _expressible(res: Results) -> str:
    cannot = [f"{key} on {_workload_name(res, spec)}: {m.data['unsupported']}"
              for (key, spec), m in res.items()
              if spec in NOOP_SPECS + SLEEP_SPECS and "unsupported" in m.data]
    if not cannot:
        return "Every engine expressed every standard workload."
    return "Not expressible: " + "; ".join(cannot) + "."


EXPLANATIONS = [
    "How each engine runs the DAG (see the adapter modules for the code). Every step, in "
    "every engine, receives its parents' outputs and returns `{\"step\": name, \"n\": 1 + "
    "sum(parent[\"n\"] for parent in parents)}` (`workloads.step_value`); every run's "
    "output (the sinks' values) is checked against the workload's expected value.",
    "",
    "- plait: `Workflow.add_step(id, async fn, depends_on=...)`, the step reading "
    "`ctx.outputs`, `run_async(db=\"memory://\")`.",
    "- raw asyncio: a hand-written ready queue (counters of unfinished parents, a task per "
    "ready step); the floor.",
    "- LangGraph: StateGraph, one async node per step, waiting edges for joins, `Send` for "
    "fan-outs (fanout-1-1000-1 and parallel-200-sleeps become one node sent N times), a "
    "dict of outputs with a merging reducer (each Send carries its parents' outputs), no "
    "checkpointer. Runs in supersteps, i.e. level "
    "by level.",
    "- Prefect: one `@task` run per step via `.submit(name, [parent futures])` in a `@flow` "
    "(Prefect resolves the futures to their results), "
    "ephemeral local API on SQLite (started before timing). Sleep tasks are async.",
    "- Hamilton: one function per step, parameters named after parents (module generated "
    "from source). The sync driver runs one node at a time; on sleep workloads it gets the "
    "FutureAdapter thread pool. The async driver awaits async nodes as tasks.",
    "- Dask: `dask.delayed(pure=False)` per step, `dask.compute(scheduler=\"threads\")`; "
    "sync steps (`time.sleep`).",
    "- DBOS: `@DBOS.step` per step inside one `@DBOS.workflow`, SQLite system database. DBOS "
    "needs a deterministic step start order for replay, so steps start level by level "
    "(tasks created in order, then gathered): a level barrier.",
    "- graphlib: `TopologicalSorter` + `ThreadPoolExecutor`, eager; sync steps.",
    "",
    "Thread-pool engines use sync "
    "`time.sleep` steps with enough threads that no sleeper waits for one (counts above). "
    "Per-step overhead = median wall / steps on the per-step (sleepless) workloads; makespan ratio = median "
    "wall / critical path on sleep workloads; 'vs plait' = engine's median wall / plait's. "
    "Peak MB = ru_maxrss of the measuring process (interpreter, imports, graph, run), "
    "plus ' + N' for the peak RSS of helper processes the engine started (Prefect's "
    "local API server).",
]


def report(res: Results, engs: list[Engine]) -> str:
    lines = machine_header("plait vs peer engines", [
        f"repeats: median of up to {NOOP_REPEATS} per-step runs and {SLEEP_REPEATS} sleep "
        f"runs, each after {WARMUP} warm-up run, fewer once an engine's runs took "
        f"{BUDGET_S:.0f} s (the 'runs' column); the 10,000 and 100,000-step chains: one "
        "run, no warm-up; each (engine, workload) in a fresh interpreter",
    ])
    lines += ["## Targets", ""]
    lines += table(["target", "measured", "met?"], target_rows(res, engs))
    specs = NOOP_SPECS + SLEEP_SPECS + tuple(
        s for s in (PROBE_SPEC, BIG_SPEC) if any(spec == s for _, spec in res))
    for spec in specs:
        lines += [f"## {_workload_name(res, spec)}", ""]
        lines += table(["engine", "runs", "median wall", "per step (µs)",
                        "makespan / critical path", "graph build", "peak MB", "vs plait"],
                       workload_rows(res, engs, spec))
    return "\n".join(lines + notes(res, engs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="plait vs peer engines")
    parser.add_argument("--only", help="comma-separated engine keys (default: all)")
    parser.add_argument("--skip-big", action="store_true", help="skip the 100,000-step chain")
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    args = parser.parse_args(argv)

    engs = engines()
    if args.only:
        keep = set(args.only.split(","))
        engs = [e for e in engs if e.key in keep]
    res = measure_all(engs, big=not args.skip_big)
    args.out.write_text(report(res, engs))
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
