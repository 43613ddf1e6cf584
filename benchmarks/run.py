"""plait's own benchmarks against the raw asyncio floor; writes benchmarks/RESULTS.md.

    python benchmarks/run.py            full run (about 2-4 minutes), writes RESULTS.md
    python benchmarks/run.py --quick    smoke run (fewer repeats, 10,000-step scale
                                        workloads), prints the report, writes nothing
    python benchmarks/run.py --db 'sqlite:///{tmp}/bench.db'
                                        also measure plait on that store ({tmp}: a fresh
                                        temporary directory per measuring process) on
                                        the standard workloads, with the durable targets

Every (engine, workload) pair runs in its own interpreter (child.py), so timings and peak
memory are the engine's alone.  Exit status: 1 if any measurement failed, or with
--strict if a target was missed; 0 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness import (
    HERE,
    Job,
    Measurement,
    fmt_num,
    fmt_s,
    log,
    machine_header,
    measure,
    merge,
    met,
    table,
)

BASELINE = "baseline:BaselineAdapter"
PLAIT = "plait_adapter:PlaitAdapter"
MEMORY = "memory://"

NOOP_SPECS = ("chain:1000", "fanout:1000", "random_layers")
SLEEP_SPECS = ("unbalanced", "parallel_sleeps")

# Targets from the issue "core" (memory store).
MAX_OVERHEAD_VS_ASYNCIO = 3.0
MAX_MAKESPAN_RATIO = 1.05
MAX_VALIDATE_PLAN_S = 1.0
MAX_SCALE_RATIO = 1.5
MAX_PEAK_MB = 400.0
# durable targets (issue "durable runs on SQLite"): persist-before-execute rates
DURABLE_SPECS = ("chain:1000", "fanout:1000")
DURABLE_MIN_STEPS_S = 5_000  # synchronous=NORMAL
DURABLE_MIN_STEPS_S_FULL = 1_000  # synchronous=FULL


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """How much to repeat.  Every (engine, workload) runs in `rounds` fresh processes,
    interleaved with the other engine's, each doing warm-up then its repeats; medians
    are over all rounds' runs (full mode: 15 per no-op workload, 3 per sleep workload
    and per 100,000-step workload)."""

    rounds: int
    noop_repeats: int  # per round
    sleep_repeats: int
    warmup: int
    scale_n: int
    scale_repeats: int

    def runs(self, repeats: int) -> int:
        return self.rounds * repeats


FULL = Plan(rounds=3, noop_repeats=5, sleep_repeats=5, warmup=1, scale_n=100_000,
            scale_repeats=1)
QUICK = Plan(rounds=1, noop_repeats=3, sleep_repeats=1, warmup=1, scale_n=10_000,
             scale_repeats=1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Engine:
    label: str
    adapter: str
    db: str | None = None  # plait's store URL; None for the baseline

    def job(self, spec: str, repeats: int, warmup: int) -> Job:
        options = {"db": self.db} if self.db else {}
        return Job(adapter=self.adapter, spec=spec, repeats=repeats, warmup=warmup,
                   options=options, timeout_s=300)


def engines(dbs: list[str]) -> list[Engine]:
    out = [Engine(label="raw asyncio", adapter=BASELINE),
           Engine(label="plait", adapter=PLAIT, db=MEMORY)]
    out += [Engine(label=store_label(db), adapter=PLAIT, db=db)
            for db in dbs if db != MEMORY]
    return out


def store_label(db: str) -> str:
    """``plait (sqlite)``, ``plait (sqlite, FULL)``: the store and its durability."""
    scheme = db.split(":", 1)[0]
    sync = db.partition("synchronous=")[2].split("&")[0].upper()
    return f"plait ({scheme}, {sync})" if sync else f"plait ({scheme})"


def durable(engs: list[Engine]) -> list[Engine]:
    return [e for e in engs if e.db is not None and e.db != MEMORY]


def run_all(job: Job) -> Measurement:
    log(f"  {job.adapter.split(':')[0]:<14} {job.spec:<22} {job.options or ''}")
    result = measure(job)
    if result.problem:
        log(f"    -> {result.problem}")
    return result


def measure_rounds(plan: Plan, engs: list[Engine], spec: str, repeats: int,
                   warmup: int) -> Results:
    """All engines on one workload, `plan.rounds` times, engines alternating."""
    parts: dict[str, list[Measurement]] = {e.label: [] for e in engs}
    for _ in range(plan.rounds):
        for eng in engs:
            parts[eng.label].append(run_all(eng.job(spec, repeats, warmup)))
    return {(label, spec): merge(ms) for label, ms in parts.items()}


# --- the three parts of the report -----------------------------------------------------

Results = dict[tuple[str, str], Measurement]  # (engine label, spec) -> measurement


def measure_standard(plan: Plan, engs: list[Engine]) -> Results:
    out: Results = {}
    for spec in NOOP_SPECS + SLEEP_SPECS:
        noop = spec in NOOP_SPECS
        repeats = plan.noop_repeats if noop else plan.sleep_repeats
        out.update(measure_rounds(plan, engs, spec, repeats, plan.warmup))
    return out


def scale_specs(n: int) -> list[tuple[str, str]]:
    """(small, large) workload pairs whose per-step costs are compared."""
    return [("chain:1000", f"chain:{n}"),
            ("wide_random:1000:2000", f"wide_random:{n}:{2 * n}")]


def measure_scale(plan: Plan, engs: list[Engine], known: Results) -> Results:
    # durable stores are measured on the standard workloads only: 100,000 durable steps
    # take minutes per run and the scale targets are for the memory store
    engs = [e for e in engs if e not in durable(engs)]
    out: Results = {}
    for small, large in scale_specs(plan.scale_n):
        if not all((e.label, small) in known for e in engs):
            out.update(measure_rounds(plan, engs, small, plan.noop_repeats, plan.warmup))
        out.update(measure_rounds(plan, engs, large, plan.scale_repeats, 0))
    return out


def standard_rows(res: Results, engs: list[Engine]) -> list[list[object]]:
    rows: list[list[object]] = []
    for spec in NOOP_SPECS + SLEEP_SPECS:
        base = res["raw asyncio", spec]
        for eng in engs:
            m = res[eng.label, spec]
            if m.problem:
                rows.append([m.data.get("workload", spec), eng.label, m.problem]
                            + [""] * 8)
                continue
            noop = spec in NOOP_SPECS
            ratio = m.median_s / base.median_s if base.ok else None
            rows.append([m.data["workload"], eng.label, m.steps, m.data["edges"],
                         fmt_s(m.first_s), fmt_s(m.median_s),
                         fmt_num(m.per_step_us) if noop else "—",
                         fmt_num(m.cpu_per_step_us) if noop else "—",
                         "—" if noop else f"{m.makespan_ratio:.3f}",
                         fmt_num(ratio, 2) + "×" if ratio else "—",
                         fmt_num(m.peak_mb, 0)])
    return rows


def scale_rows(res: Results, engs: list[Engine], n: int) -> list[list[object]]:
    rows: list[list[object]] = []
    for pair in scale_specs(n):
        for spec in pair:
            for eng in engs:
                m = res[eng.label, spec]
                if m.problem:
                    rows.append([spec, eng.label, m.problem] + [""] * 8)
                    continue
                rows.append([m.data["workload"], eng.label, m.steps, m.data["edges"],
                             fmt_s(m.data.get("build_s")), fmt_s(m.phase("validate_s")),
                             fmt_s(m.phase("plan_s")), fmt_s(m.median_s),
                             fmt_num(m.per_step_us), fmt_num(m.cpu_per_step_us),
                             fmt_num(m.peak_mb, 0)])
    return rows


Check = tuple[str, str, str, bool | None]  # target, measured, threshold, met


def _guard(fn: Callable[[], Check], label: str, threshold: str) -> Check:
    """A target whose measurement failed is reported as not met, with the reason."""
    try:
        return fn()
    except (KeyError, ZeroDivisionError, TypeError) as exc:
        return (label, f"no measurement ({type(exc).__name__}: {exc})", threshold, False)


def target_checks(res: Results, n: int, engs: list[Engine]) -> list[Check]:
    checks: list[Check] = []
    for eng in durable(engs):
        for spec in DURABLE_SPECS:
            floor = DURABLE_MIN_STEPS_S_FULL if "FULL" in eng.label else DURABLE_MIN_STEPS_S
            checks.append(_guard(lambda e=eng, s=spec, f=floor: _durable_check(res, e, s, f),
                                 f"{spec} on {eng.label}", f"≥ {floor:,} steps/s"))
    for spec in NOOP_SPECS:
        checks.append(_guard(lambda s=spec: _overhead_check(res, s), spec, "≤ 3×"))
    for spec in SLEEP_SPECS:
        checks.append(_guard(lambda s=spec: _makespan_check(res, s), spec, "≤ 1.05×"))
    for small, large in scale_specs(n):
        checks.append(_guard(lambda s=large: _validate_plan_check(res, s), large, "< 1 s"))
        checks.append(_guard(lambda a=small, b=large: _scale_check(res, a, b), large, "≤ 1.5×"))
        checks.append(_guard(lambda s=large: _memory_check(res, s), large, "< 400 MB"))
    return checks


def _durable_check(res: Results, eng: Engine, spec: str, floor: int) -> Check:
    d, m = _ok(res[eng.label, spec]), _ok(res["plait", spec])
    rate = d.steps / d.median_s
    share = (d.per_step_us - m.per_step_us) / d.per_step_us
    return (f"{d.data['workload']} on {eng.label}: steps per second (persist before "
            f"execute; the store's share of the per-step cost in brackets)",
            f"{rate:,.0f} steps/s = {d.per_step_us:.0f} µs per step "
            f"(store {share:.0%}: {d.per_step_us - m.per_step_us:.0f} µs over memory)",
            f"≥ {floor:,} steps/s", rate >= floor)


def _ok(m: Measurement) -> Measurement:
    if m.problem:
        raise KeyError(m.problem)
    return m


def _overhead_check(res: Results, spec: str) -> Check:
    p, b = _ok(res["plait", spec]), _ok(res["raw asyncio", spec])
    ratio = p.per_step_us / b.per_step_us
    cpu = p.cpu_per_step_us / b.cpu_per_step_us
    return (f"{p.data['workload']}: per-step overhead vs raw asyncio",
            f"{p.per_step_us:.1f} µs vs {b.per_step_us:.1f} µs = {ratio:.2f}× "
            f"(CPU time: {cpu:.2f}×)",
            f"≤ {MAX_OVERHEAD_VS_ASYNCIO:g}×", ratio <= MAX_OVERHEAD_VS_ASYNCIO)


def _makespan_check(res: Results, spec: str) -> Check:
    p = _ok(res["plait", spec])
    return (f"{p.data['workload']}: makespan / critical path",
            f"{fmt_s(p.median_s)} / {fmt_s(p.data['critical_path_s'])} = "
            f"{p.makespan_ratio:.3f}×",
            f"≤ {MAX_MAKESPAN_RATIO:g}×", p.makespan_ratio <= MAX_MAKESPAN_RATIO)


def _validate_plan_check(res: Results, spec: str) -> Check:
    p = _ok(res["plait", spec])
    total = float(p.data["phases"]["validate_s"]) + float(p.data["phases"]["plan_s"])
    return (f"{p.data['workload']}: validate() + plan()", fmt_s(total),
            f"< {MAX_VALIDATE_PLAN_S:g} s", total < MAX_VALIDATE_PLAN_S)


def _scale_check(res: Results, small: str, large: str) -> Check:
    a, b = _ok(res["plait", small]), _ok(res["plait", large])
    ratio = b.per_step_us / a.per_step_us
    cpu = b.cpu_per_step_us / a.cpu_per_step_us
    return (f"per-step cost, {b.data['workload']} vs {a.data['workload']}",
            f"{b.per_step_us:.1f} µs vs {a.per_step_us:.1f} µs = {ratio:.2f}× "
            f"(CPU time: {cpu:.2f}×)",
            f"≤ {MAX_SCALE_RATIO:g}×", ratio <= MAX_SCALE_RATIO)


def _memory_check(res: Results, spec: str) -> Check:
    p = _ok(res["plait", spec])
    return (f"{p.data['workload']}: peak memory of the run process",
            f"{p.peak_mb:.0f} MB", f"< {MAX_PEAK_MB:g} MB", p.peak_mb < MAX_PEAK_MB)


def report(plan: Plan, engs: list[Engine], std: Results, scale: Results,
           quick: bool) -> tuple[list[str], list[Check]]:
    any_plait = next(iter(m for (label, _), m in std.items() if label == "plait"))
    version = any_plait.data.get("version", "not importable")
    lines = machine_header("plait benchmarks" + (" (quick smoke run)" if quick else ""), [
        f"plait: {version}; stores: {', '.join(e.db or '—' for e in engs if e.db)}",
        f"repeats: median of {plan.runs(plan.noop_repeats)} no-op runs, "
        f"{plan.runs(plan.sleep_repeats)} sleep runs and {plan.runs(plan.scale_repeats)} "
        f"runs at scale, from {plan.rounds} fresh interpreter(s) per (engine, workload) "
        f"interleaved with the other engines' (each after {plan.warmup} warm-up run, "
        "except at scale)",
        "peak memory: the measuring process's ru_maxrss (interpreter + imports + workload "
        "data + graph + run); build, validate() and plan(): median over the processes",
    ])
    checks = target_checks({**std, **scale}, plan.scale_n, engs)
    lines += ["## Targets (memory store unless a store is named)", ""]
    lines += table(["target", "measured", "threshold", "met?"],
                   [[c[0], c[1], c[2], met(c[3])] for c in checks])
    lines += ["## Standard workloads", "",
              "Per-step overhead = median wall time / steps (no-op workloads); CPU per "
              "step = median process CPU time / steps, which other processes' load does "
              "not inflate. Makespan ratio = median wall time / critical path (sleep "
              "workloads; sleeps are `asyncio.sleep`). First run = the first run in a "
              "fresh process (lazy imports, cold caches), not part of the median.", ""]
    lines += table(["workload", "engine", "steps", "edges", "first run", "median wall",
                    "wall per step (µs)", "CPU per step (µs)", "makespan / critical path",
                    "× raw asyncio", "peak MB"],
                   standard_rows(std, engs))
    lines += [f"## Scale ({plan.scale_n:,} steps)", "",
              "build = `Workflow` + `add_step` for every step; validate and plan timed "
              "separately; run = median wall of a whole run.", ""]
    lines += table(["workload", "engine", "steps", "edges", "build", "validate()", "plan()",
                    "run", "wall per step (µs)", "CPU per step (µs)", "peak MB"],
                   scale_rows({**std, **scale}, [e for e in engs if e not in durable(engs)],
                              plan.scale_n))
    return lines, checks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="plait's own benchmarks")
    parser.add_argument("--quick", action="store_true", help="fast smoke run; writes nothing")
    parser.add_argument("--db", action="append", default=[],
                        help="extra plait store URL to measure besides memory://")
    parser.add_argument("--out", type=Path, help="report path (default RESULTS.md, "
                        "not written in --quick mode unless given)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)

    plan = QUICK if args.quick else FULL
    engs = engines(args.db)
    log("standard workloads")
    std = measure_standard(plan, engs)
    log(f"scale ({plan.scale_n:,} steps)")
    scale = measure_scale(plan, engs, std)
    lines, checks = report(plan, engs, std, scale, args.quick)
    text = "\n".join(lines)
    out = args.out or (None if args.quick else HERE / "RESULTS.md")
    if out:
        out.write_text(text)
        log(f"wrote {out}")
    else:
        print(text)
    failed = any(m.data.get("error") for m in {**std, **scale}.values())
    missed = any(c[3] is False for c in checks)
    return 1 if failed or (args.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
