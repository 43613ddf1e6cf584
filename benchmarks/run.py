"""plait's own benchmarks against the raw asyncio floor; writes benchmarks/RESULTS.md.

    python benchmarks/run.py            full run (a few minutes), writes RESULTS.md
    python benchmarks/run.py --quick    smoke run (< 1 min: fewer repeats and runs,
                                        10,000-step scale), prints, writes nothing
    python benchmarks/run.py --db 'sqlite:///{tmp}/bench.db'
                                        also measure plait on that store ({tmp}: a fresh
                                        temporary directory per measuring process) on
                                        the per-step and sleep workloads, with the
                                        durable targets

Every step does real work: it receives its parents' outputs and returns a JSON object
(``workloads.step_value``), in raw asyncio and in every plait style, and every run's
output is checked against the workload's expected value (child.py).  Every (engine,
workload) pair runs in its own interpreter (child.py), so timings and peak memory are
the engine's alone; rounds of the engines alternate.  Many small runs
(many_runs.py) and CLI start-up (cli_startup.py) run as their own processes.  Exit
status: 1 if any measurement failed, or with --strict if a target was missed; 0
otherwise.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import (
    HERE,
    Job,
    Measurement,
    command_text,
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

PER_STEP_SPECS = ("chain:1000", "fanout:1000", "random_layers")
SLEEP_SPECS = ("unbalanced", "parallel_sleeps")

# Targets (issue 10 "speed where users feel it"; makespan, scale and FULL from earlier
# issues).
MAX_PER_STEP_VS_ASYNCIO = 2.0
MAX_MAKESPAN_RATIO = 1.05
MAX_VALIDATE_PLAN_S = 1.0
MAX_SCALE_RATIO = 1.5
MAX_PEAK_MB = 400.0
DURABLE_MIN_STEPS_S = {"chain:1000": 5_000, "fanout:1000": 10_000}  # synchronous=NORMAL
DURABLE_MIN_STEPS_S_FULL = 1_000  # synchronous=FULL
MANY_MIN_SQLITE_RUNS_S = 2_000
MANY_MIN_SQLITE_SHARE = 0.30
MANY_MIN_MEMORY_RUNS_S = 5_000
MAX_MAP_PER_ITEM_VS_FANOUT = 1.5  # issue 12: map item vs static fan-out step
MAP_N = 10_000
CLI_MAX_HELP_S = 0.150
CLI_MAX_RUN_S = 0.300


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """How much to repeat.  Every (engine, workload) runs in `rounds` fresh processes,
    interleaved with the other engines', each doing warm-up then its repeats; medians
    are over all rounds' runs."""

    rounds: int
    step_repeats: int  # per round
    sleep_repeats: int
    warmup: int
    scale_n: int
    scale_repeats: int
    many_runs: int  # per store
    many_chunk: int
    cli_n: int

    def runs(self, repeats: int) -> int:
        return self.rounds * repeats


FULL = Plan(rounds=3, step_repeats=5, sleep_repeats=5, warmup=1, scale_n=100_000,
            scale_repeats=1, many_runs=2_000, many_chunk=250, cli_n=15)
QUICK = Plan(rounds=1, step_repeats=3, sleep_repeats=1, warmup=1, scale_n=10_000,
             scale_repeats=1, many_runs=200, many_chunk=100, cli_n=3)

PER_STEP, SLEEP, SCALE = "per-step", "sleep", "scale"


@dataclass(frozen=True, slots=True, kw_only=True)
class Engine:
    label: str
    adapter: str
    options: dict[str, str] = field(default_factory=dict)
    kinds: frozenset[str] = frozenset({PER_STEP, SLEEP})

    def job(self, spec: str, repeats: int, warmup: int) -> Job:
        return Job(adapter=self.adapter, spec=spec, repeats=repeats, warmup=warmup,
                   options=dict(self.options), timeout_s=300)

    @property
    def db(self) -> str | None:
        return self.options.get("db")


RAW = "raw asyncio"
RAW_THREADS = "raw asyncio + threads"
CTX = "plait, ctx"
PARAMS = "plait, params"
SYNC = "plait, sync def"
NOOP = "plait, no-op"


def engines(dbs: list[str]) -> list[Engine]:
    every = frozenset({PER_STEP, SLEEP, SCALE})
    out = [Engine(label=RAW, adapter=BASELINE, kinds=every),
           Engine(label=RAW_THREADS, adapter=BASELINE, options={"threads": "1"},
                  kinds=frozenset({PER_STEP})),
           Engine(label=CTX, adapter=PLAIT, options={"style": "ctx", "db": MEMORY},
                  kinds=every),
           Engine(label=PARAMS, adapter=PLAIT, options={"style": "params", "db": MEMORY}),
           Engine(label=SYNC, adapter=PLAIT, options={"style": "sync", "db": MEMORY},
                  kinds=frozenset({PER_STEP})),
           Engine(label=NOOP, adapter=PLAIT, options={"style": "noop", "db": MEMORY},
                  kinds=frozenset({PER_STEP}))]
    out += [Engine(label=store_label(db) + ", ctx", adapter=PLAIT,
                   options={"style": "ctx", "db": db})
            for db in dbs if db != MEMORY]
    return out


def store_label(db: str) -> str:
    """``plait (sqlite, NORMAL)``, ``plait (sqlite, FULL)``: the store and its durability
    (SQLite's default is NORMAL)."""
    scheme = db.split(":", 1)[0]
    sync = db.partition("synchronous=")[2].split("&")[0].upper()
    if scheme == "sqlite":
        sync = sync or "NORMAL"
    return f"plait ({scheme}, {sync})" if sync else f"plait ({scheme})"


def durable(engs: list[Engine]) -> list[Engine]:
    return [e for e in engs if e.db not in (None, MEMORY)]


def of_kind(engs: list[Engine], kind: str) -> list[Engine]:
    return [e for e in engs if kind in e.kinds]


Results = dict[tuple[str, str], Measurement]  # (engine label, spec) -> measurement


def run_one(job: Job) -> Measurement:
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
            parts[eng.label].append(run_one(eng.job(spec, repeats, warmup)))
    return {(label, spec): merge(ms) for label, ms in parts.items()}


def measure_workloads(plan: Plan, engs: list[Engine]) -> Results:
    out: Results = {}
    for spec in PER_STEP_SPECS:
        out.update(measure_rounds(plan, of_kind(engs, PER_STEP), spec, plan.step_repeats,
                                  plan.warmup))
    for spec in SLEEP_SPECS:
        out.update(measure_rounds(plan, of_kind(engs, SLEEP), spec, plan.sleep_repeats,
                                  plan.warmup))
    return out


def scale_specs(n: int) -> list[tuple[str, str]]:
    """(small, large) workload pairs whose per-step costs are compared."""
    return [("chain:1000", f"chain:{n}"),
            ("wide_random:1000:2000", f"wide_random:{n}:{2 * n}")]


def measure_scale(plan: Plan, engs: list[Engine], known: Results) -> Results:
    # durable stores are measured on the standard workloads only: 100,000 durable steps
    # take minutes per run and the scale targets are for the memory store
    engs = of_kind(engs, SCALE)
    out: Results = {}
    for small, large in scale_specs(plan.scale_n):
        if not all((e.label, small) in known for e in engs):
            out.update(measure_rounds(plan, engs, small, plan.step_repeats, plan.warmup))
        out.update(measure_rounds(plan, engs, large, plan.scale_repeats, 0))
    return out


# --- many small runs and CLI start-up: scripts of their own ----------------------------

def script_command(script: str, args: list[str]) -> str:
    return " ".join([f"benchmarks/{script}", *args])


def run_script(script: str, args: list[str], timeout_s: float) -> dict[str, Any]:
    """Run benchmarks/SCRIPT ARGS --out FILE in a fresh interpreter; its JSON, or
    ``{"error": ...}``."""
    log(f"  {script} {' '.join(args)}")
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, str(HERE / script), *args, "--out", str(out)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout_s:.0f} s"}
        if not out.exists():
            tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-5:])
            return {"error": f"exited {done.returncode} without a result: {tail}"}
        data: dict[str, Any] = json.loads(out.read_text())
    if "error" in data:
        log(f"    -> {data['error']}")
    return data


def many_args(plan: Plan) -> list[str]:
    return ["--runs", str(plan.many_runs), "--concurrency", "50", "--chunk",
            str(plan.many_chunk)]


def cli_args(plan: Plan) -> list[str]:
    return ["--n", str(plan.cli_n)]


def map_args(plan: Plan) -> list[str]:
    return ["--n", str(MAP_N), "--repeat", "1" if plan.rounds == 1 else "3"]


def map_rows(mapped: dict[str, Any], plan: Plan) -> list[list[object]]:
    """Rows of "map over 10,000 items" (benchmarks/map_speed.py)."""
    cmd = f"`{script_command('map_speed.py', map_args(plan))}`"
    if "error" in mapped:
        return [["—", mapped["error"], "", "", "", "", cmd]]
    return [[f"map over {mapped['n']:,} items", store, fmt_s(m["map_s"]),
             f"{m['map_per_item_us']:.0f}", f"{m['static_per_step_us']:.0f}",
             f"{m['ratio']:.2f}", cmd]
            for store, m in mapped["stores"].items()]


def map_checks(mapped: dict[str, Any], plan: Plan) -> list[Check]:
    cmd = f"`{script_command('map_speed.py', map_args(plan))}`"
    if "error" in mapped:
        return [Check("map per item vs static fan-out per step", mapped["error"],
                      f"<= {MAX_MAP_PER_ITEM_VS_FANOUT}x", None, cmd)]
    return [Check(f"map over {mapped['n']:,} items, {store}: per item vs static fan-out "
                  "per step", f"{m['ratio']:.2f}x ({m['map_per_item_us']:.0f} µs vs "
                  f"{m['static_per_step_us']:.0f} µs)", f"<= {MAX_MAP_PER_ITEM_VS_FANOUT}x",
                  m["ratio"] <= MAX_MAP_PER_ITEM_VS_FANOUT, cmd)
            for store, m in mapped["stores"].items()]


# --- targets -----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Check:
    target: str
    measured: str
    threshold: str
    met: bool | None
    command: str


def _guard(fn: Callable[[], Check], label: str, threshold: str, command: str) -> Check:
    """A target whose measurement failed is reported as not met, with the reason."""
    try:
        return fn()
    except (KeyError, ZeroDivisionError, TypeError, ValueError) as exc:
        return Check(label, f"no measurement ({type(exc).__name__}: {exc})", threshold,
                     False, command)


def _ok(m: Measurement) -> Measurement:
    if m.problem:
        raise KeyError(m.problem)
    return m


def _cmd(res: Results, label: str, spec: str) -> str:
    m = res.get((label, spec))
    return f"`{command_text(m.job)}`" if m is not None else "—"


def _vs(res: Results, a: tuple[str, str], b: tuple[str, str]) -> str:
    return f"{_cmd(res, *a)} vs {_cmd(res, *b)}"


def target_checks(res: Results, many: dict[str, Any], cli: dict[str, Any], plan: Plan,
                  engs: list[Engine]) -> list[Check]:
    checks: list[Check] = []
    limit = f"≤ {MAX_PER_STEP_VS_ASYNCIO:g}×"
    for label, floor in ((CTX, RAW), (PARAMS, RAW), (SYNC, RAW_THREADS)):
        for spec in PER_STEP_SPECS:
            cmd = _vs(res, (label, spec), (floor, spec))
            checks.append(_guard(lambda a=label, b=floor, s=spec, c=cmd:
                                 _per_step_check(res, a, b, s, c),
                                 f"{spec}, {label}: per step vs {floor}", limit, cmd))
    for eng in durable(engs):
        for spec in DURABLE_MIN_STEPS_S:
            floor_rate = (DURABLE_MIN_STEPS_S_FULL if "FULL" in eng.label
                          else DURABLE_MIN_STEPS_S[spec])
            cmd = _cmd(res, eng.label, spec)
            checks.append(_guard(lambda e=eng, s=spec, f=floor_rate, c=cmd:
                                 _durable_check(res, e, s, f, c),
                                 f"{spec} on {eng.label}", f"≥ {floor_rate:,} steps/s", cmd))
    checks += _many_checks(many, plan)
    checks += _cli_checks(cli, plan)
    for label in (CTX, PARAMS):
        for spec in SLEEP_SPECS:
            cmd = _cmd(res, label, spec)
            checks.append(_guard(lambda a=label, s=spec, c=cmd: _makespan_check(res, a, s, c),
                                 f"{spec}, {label}", f"≤ {MAX_MAKESPAN_RATIO:g}×", cmd))
    for small, large in scale_specs(plan.scale_n):
        cmd = _cmd(res, CTX, large)
        checks.append(_guard(lambda s=large, c=cmd: _validate_plan_check(res, s, c), large,
                             f"< {MAX_VALIDATE_PLAN_S:g} s", cmd))
        both = _vs(res, (CTX, large), (CTX, small))
        checks.append(_guard(lambda a=small, b=large, c=both: _scale_check(res, a, b, c),
                             large, f"≤ {MAX_SCALE_RATIO:g}×", both))
        checks.append(_guard(lambda s=large, c=cmd: _memory_check(res, s, c), large,
                             f"< {MAX_PEAK_MB:g} MB", cmd))
    return checks


def _per_step_check(res: Results, label: str, floor: str, spec: str, cmd: str) -> Check:
    p, b = _ok(res[label, spec]), _ok(res[floor, spec])
    ratio = p.per_step_us / b.per_step_us
    cpu = p.cpu_per_step_us / b.cpu_per_step_us
    return Check(f"{p.data['workload']}, {label}: per step vs {floor} (same step body)",
                 f"{p.per_step_us:.1f} µs vs {b.per_step_us:.1f} µs = {ratio:.2f}× "
                 f"(CPU time: {cpu:.2f}×)",
                 f"≤ {MAX_PER_STEP_VS_ASYNCIO:g}×", ratio <= MAX_PER_STEP_VS_ASYNCIO, cmd)


def _durable_check(res: Results, eng: Engine, spec: str, floor: int, cmd: str) -> Check:
    d, m = _ok(res[eng.label, spec]), _ok(res[CTX, spec])
    rate = d.steps / d.median_s
    share = (d.per_step_us - m.per_step_us) / d.per_step_us
    return Check(f"{d.data['workload']} on {eng.label}: steps per second (persist "
                 f"before execute; the store's share of the per-step cost in brackets)",
                 f"{rate:,.0f} steps/s = {d.per_step_us:.0f} µs per step (store "
                 f"{share:.0%}: {d.per_step_us - m.per_step_us:.0f} µs over memory)",
                 f"≥ {floor:,} steps/s", rate >= floor, cmd)


def _makespan_check(res: Results, label: str, spec: str, cmd: str) -> Check:
    p = _ok(res[label, spec])
    return Check(f"{p.data['workload']}, {label}: makespan / critical path",
                 f"{fmt_s(p.median_s)} / {fmt_s(p.data['critical_path_s'])} = "
                 f"{p.makespan_ratio:.3f}×",
                 f"≤ {MAX_MAKESPAN_RATIO:g}×", p.makespan_ratio <= MAX_MAKESPAN_RATIO, cmd)


def _validate_plan_check(res: Results, spec: str, cmd: str) -> Check:
    p = _ok(res[CTX, spec])
    total = float(p.data["phases"]["validate_s"]) + float(p.data["phases"]["plan_s"])
    return Check(f"{p.data['workload']}: validate() + plan()", fmt_s(total),
                 f"< {MAX_VALIDATE_PLAN_S:g} s", total < MAX_VALIDATE_PLAN_S, cmd)


def _scale_check(res: Results, small: str, large: str, cmd: str) -> Check:
    a, b = _ok(res[CTX, small]), _ok(res[CTX, large])
    ratio = b.per_step_us / a.per_step_us
    cpu = b.cpu_per_step_us / a.cpu_per_step_us
    return Check(f"per-step cost, {b.data['workload']} vs {a.data['workload']} ({CTX})",
                 f"{b.per_step_us:.1f} µs vs {a.per_step_us:.1f} µs = {ratio:.2f}× "
                 f"(CPU time: {cpu:.2f}×)",
                 f"≤ {MAX_SCALE_RATIO:g}×", ratio <= MAX_SCALE_RATIO, cmd)


def _memory_check(res: Results, spec: str, cmd: str) -> Check:
    p = _ok(res[CTX, spec])
    return Check(f"{p.data['workload']}, {CTX}: peak memory of the run process",
                 f"{p.peak_mb:.0f} MB", f"< {MAX_PEAK_MB:g} MB", p.peak_mb < MAX_PEAK_MB,
                 cmd)


def _many_checks(many: dict[str, Any], plan: Plan) -> list[Check]:
    cmd = f"`{script_command('many_runs.py', many_args(plan))}`"
    kinds = ["url", "connect"] if many.get("connect", False) else ["url"]
    out: list[Check] = []
    for kind in kinds:
        how = ("`db=URL` per call" if kind == "url"
               else "one `plait.connect(url)` handle")
        name = f"4-step diamond, 50 runs at once, {how}"
        out.append(_guard(lambda k=kind, n=name: _rate_check(many, f"sqlite, {k}", n,
                                                             MANY_MIN_SQLITE_RUNS_S, cmd),
                          f"{name}: SQLite", f"≥ {MANY_MIN_SQLITE_RUNS_S:,} runs/s", cmd))
        out.append(_guard(lambda k=kind, n=name: _share_check(many, k, n, cmd),
                          f"{name}: SQLite / memory", f"≥ {MANY_MIN_SQLITE_SHARE:.0%}", cmd))
        out.append(_guard(lambda k=kind, n=name: _rate_check(many, f"memory, {k}", n,
                                                             MANY_MIN_MEMORY_RUNS_S, cmd),
                          f"{name}: memory", f"≥ {MANY_MIN_MEMORY_RUNS_S:,} runs/s", cmd))
    return out


def _spread(values: list[float], digits: int = 0) -> str:
    return f"{min(values):,.{digits}f}-{max(values):,.{digits}f}"


def _rate_check(many: dict[str, Any], mode: str, name: str, floor: int, cmd: str) -> Check:
    if "error" in many:
        raise ValueError(many["error"])
    m = many["modes"][mode]
    store = mode.split(",")[0]
    return Check(f"{name}: {'SQLite (a fresh file)' if store == 'sqlite' else 'memory'} "
                 f"runs per second",
                 f"{m['runs_per_s']:,.0f} runs/s ({m['runs']:,} runs; chunks "
                 f"{_spread(m['chunk_rates'])})",
                 f"≥ {floor:,} runs/s", m["runs_per_s"] >= floor, cmd)


def _share_check(many: dict[str, Any], kind: str, name: str, cmd: str) -> Check:
    if "error" in many:
        raise ValueError(many["error"])
    r = many[f"sqlite_over_memory_{kind}"]
    return Check(f"{name}: SQLite's rate / memory's (same process, interleaved chunks)",
                 f"{r['ratio']:.0%} (per round {_spread([x * 100 for x in r['per_round']])}%)",
                 f"≥ {MANY_MIN_SQLITE_SHARE:.0%}", r["ratio"] >= MANY_MIN_SQLITE_SHARE, cmd)


def _cli_checks(cli: dict[str, Any], plan: Plan) -> list[Check]:
    cmd = f"`{script_command('cli_startup.py', cli_args(plan))}`"
    out: list[Check] = []
    for name, limit, what in (("help", CLI_MAX_HELP_S, "`plait --help`"),
                              ("run", CLI_MAX_RUN_S, "`plait run` of a two-step workflow "
                               "file, default SQLite store")):
        out.append(_guard(lambda n=name, lim=limit, w=what: _cli_check(cli, n, lim, w, cmd),
                          f"{what}: whole process", f"< {limit * 1000:.0f} ms", cmd))
    return out


def _cli_check(cli: dict[str, Any], name: str, limit: float, what: str, cmd: str) -> Check:
    if "error" in cli:
        raise ValueError(cli["error"])
    med, walls = float(cli["median_s"][name]), [float(w) for w in cli["walls"][name]]
    return Check(f"{what}: whole-process wall time (median of {len(walls)})",
                 f"{fmt_s(med)} (spread {_spread([w * 1000 for w in walls])} ms)",
                 f"< {limit * 1000:.0f} ms", med < limit, cmd)


# --- the report --------------------------------------------------------------------------

def _spread_us(m: Measurement) -> str:
    walls = [float(w) for w in m.data["walls"]]
    return _spread([w / m.steps * 1e6 for w in walls], 1)


def per_step_rows(res: Results, engs: list[Engine]) -> list[list[object]]:
    rows: list[list[object]] = []
    for spec in PER_STEP_SPECS:
        base = res[RAW, spec]
        for eng in of_kind(engs, PER_STEP):
            m = res[eng.label, spec]
            cmd = f"`{command_text(m.job)}`"
            if m.problem:
                rows.append([m.data.get("workload", spec), eng.label, m.problem]
                            + [""] * 8 + [cmd])
                continue
            ratio = m.median_s / base.median_s if base.ok else None
            rows.append([m.data["workload"], eng.label, m.steps, m.data["edges"],
                         fmt_s(m.first_s), fmt_s(m.median_s), fmt_num(m.per_step_us),
                         _spread_us(m), fmt_num(m.cpu_per_step_us),
                         fmt_num(ratio, 2) + "×" if ratio else "—",
                         fmt_num(m.peak_mb, 0), cmd])
    return rows


def sleep_rows(res: Results, engs: list[Engine]) -> list[list[object]]:
    rows: list[list[object]] = []
    for spec in SLEEP_SPECS:
        for eng in of_kind(engs, SLEEP):
            m = res[eng.label, spec]
            cmd = f"`{command_text(m.job)}`"
            if m.problem:
                rows.append([m.data.get("workload", spec), eng.label, m.problem]
                            + [""] * 4 + [cmd])
                continue
            rows.append([m.data["workload"], eng.label, m.steps, fmt_s(m.first_s),
                         fmt_s(m.median_s), f"{m.makespan_ratio:.3f}",
                         fmt_num(m.peak_mb, 0), cmd])
    return rows


def scale_rows(res: Results, engs: list[Engine], n: int) -> list[list[object]]:
    rows: list[list[object]] = []
    for pair in scale_specs(n):
        for spec in pair:
            for eng in of_kind(engs, SCALE):
                m = res[eng.label, spec]
                cmd = f"`{command_text(m.job)}`"
                if m.problem:
                    rows.append([spec, eng.label, m.problem] + [""] * 8 + [cmd])
                    continue
                rows.append([m.data["workload"], eng.label, m.steps, m.data["edges"],
                             fmt_s(m.data.get("build_s")), fmt_s(m.phase("validate_s")),
                             fmt_s(m.phase("plan_s")), fmt_s(m.median_s),
                             fmt_num(m.per_step_us), fmt_num(m.cpu_per_step_us),
                             fmt_num(m.peak_mb, 0), cmd])
    return rows


def many_rows(many: dict[str, Any], plan: Plan) -> list[list[object]]:
    cmd = f"`{script_command('many_runs.py', many_args(plan))}`"
    if "error" in many:
        return [["—", many["error"], "", "", "", cmd]]
    return [[mode.split(", ")[0], mode.split(", ")[1], f"{m['runs']:,}",
             fmt_s(m["seconds"]), f"{m['runs_per_s']:,.0f}", _spread(m["chunk_rates"]), cmd]
            for mode, m in many["modes"].items()]


def cli_rows(cli: dict[str, Any], plan: Plan) -> list[list[object]]:
    cmd = f"`{script_command('cli_startup.py', cli_args(plan))}`"
    if "error" in cli:
        return [[cli["error"], "", "", "", cmd]]
    return [[f"`{cli['commands'][name]}`", len(walls), fmt_s(cli["median_s"][name]),
             _spread([w * 1000 for w in walls]) + " ms", cmd]
            for name, walls in cli["walls"].items()]


def report(plan: Plan, engs: list[Engine], res: Results, many: dict[str, Any],
           cli: dict[str, Any], command: str, quick: bool,
           mapped: dict[str, Any] | None = None) -> tuple[list[str], list[Check]]:
    version = next((m.data.get("version") for (label, _), m in res.items()
                    if label == CTX and m.data.get("version")), "not importable")
    lines = machine_header("plait benchmarks" + (" (quick smoke run)" if quick else ""), [
        f"produced by: `{command}` (each row's own command below runs one part of it: "
        "from the repository with `.venv/bin/python`, add `--out FILE`)",
        f"plait: {version}; stores: {', '.join(sorted({e.db for e in engs if e.db}))}",
        "steps: every step receives its parents' outputs and returns "
        "`{\"step\": name, \"n\": 1 + sum(parent[\"n\"] for parent in parents)}` "
        "(`workloads.step_value`), in raw asyncio and in plait; every run's output is "
        "checked against the workload's expected value. plait styles: `ctx` = `async def "
        "step(ctx: StepContext)` reading `ctx.outputs`; `params` = `async def` with "
        "parameters named after the parent steps (the fan-out sink has 1,000); `sync def` "
        "= the ctx body as a plain function (thread pool; its floor is raw asyncio "
        "running the same body with `loop.run_in_executor`); `no-op` = the old "
        "parameterless `async def` returning None (extra row, no target)",
        f"repeats: median of {plan.runs(plan.step_repeats)} runs per per-step workload, "
        f"{plan.runs(plan.sleep_repeats)} per sleep workload and "
        f"{plan.runs(plan.scale_repeats)} at scale, from {plan.rounds} fresh "
        f"interpreter(s) per (engine, workload) interleaved with the other engines' "
        f"(each after {plan.warmup} warm-up run, except at scale)",
        "peak memory: the measuring process's ru_maxrss (interpreter + imports + workload "
        "data + graph + run); build, validate() and plan(): median over the processes",
    ])
    checks = target_checks(res, many, cli, plan, engs)
    if mapped is not None:
        checks += map_checks(mapped, plan)
    lines += ["## Targets", ""]
    lines += table(["target", "measured", "threshold", "met?", "command"],
                   [[c.target, c.measured, c.threshold, met(c.met), c.command]
                    for c in checks])
    missed = [c for c in checks if c.met is False]
    lines += ["## Missed targets", ""]
    lines += ([f"- {c.target}: {c.measured} (target {c.threshold})" for c in missed]
              or ["None."])
    lines += [""]
    lines += ["## Per-step workloads", "",
              "Wall per step = median wall time / steps (spread: min-max over the runs); "
              "CPU per step = median process CPU time / steps, which other processes' load "
              "does not inflate. First run = the first run in a fresh process (lazy "
              "imports, cold caches), not part of the median.", ""]
    lines += table(["workload", "engine", "steps", "edges", "first run", "median wall",
                    "wall per step (µs)", "spread (µs)", "CPU per step (µs)",
                    f"× {RAW}", "peak MB", "command"],
                   per_step_rows(res, engs))
    lines += ["## Sleep workloads", "",
              "Makespan ratio = median wall time / critical path (sleeps are "
              "`asyncio.sleep`, then the step body).", ""]
    lines += table(["workload", "engine", "steps", "first run", "median wall",
                    "makespan / critical path", "peak MB", "command"],
                   sleep_rows(res, engs))
    lines += ["## Many small runs", "",
              "A 4-step diamond (`a(input)`, `b(a)`, `c(a)`, `d(b, c)`, real steps), each "
              "run started with `await wf.run_async(input, db=...)`, 50 at once (a "
              "semaphore) in one process; stores interleaved in chunks, after a warm-up. "
              "`url`: a store URL per call; `connect`: one `plait.connect(url)` handle "
              "shared by every run (when plait has it).", ""]
    lines += table(["store", "handle", "runs", "time", "runs/s", "per chunk (runs/s)",
                    "command"], many_rows(many, plan))
    lines += ["## CLI start-up", "",
              "Whole-process wall time of a fresh `plait` process (alternating, after one "
              "warm-up each); `plait run` on the default store `./.plait/plait.db`.", ""]
    lines += table(["command", "runs", "median", "spread", "produced by"],
                   cli_rows(cli, plan))
    if mapped is not None:
        lines += ["## Map over 10,000 items", "",
                  "`src -> map over src's list` against `src -> 10,000 static steps`, the "
                  "same async python body taking its item and returning data; best wall "
                  "time of the repeats / items.", ""]
        lines += table(["workload", "store", "map wall", "map per item (µs)",
                        "static fan-out per step (µs)", "ratio", "command"],
                       map_rows(mapped, plan))
    lines += [f"## Scale ({plan.scale_n:,} steps)", "",
              "build = `Workflow` + `add_step` for every step; validate and plan timed "
              "separately; run = median wall of a whole run (ctx steps).", ""]
    lines += table(["workload", "engine", "steps", "edges", "build", "validate()", "plan()",
                    "run", "wall per step (µs)", "CPU per step (µs)", "peak MB", "command"],
                   scale_rows(res, engs, plan.scale_n))
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
    log("per-step and sleep workloads")
    res = measure_workloads(plan, engs)
    log("many small runs")
    many = run_script("many_runs.py", many_args(plan), timeout_s=600)
    log("CLI start-up")
    cli = run_script("cli_startup.py", cli_args(plan), timeout_s=300)
    log(f"map over {MAP_N:,} items")
    mapped = run_script("map_speed.py", map_args(plan), timeout_s=600)
    log(f"scale ({plan.scale_n:,} steps)")
    res.update(measure_scale(plan, engs, res))
    command = " ".join(["python benchmarks/run.py",
                        *(a if a.startswith("-") else f"'{a}'" for a in (argv or sys.argv[1:]))])
    lines, checks = report(plan, engs, res, many, cli, command, args.quick, mapped)
    text = "\n".join(lines)
    out = args.out or (None if args.quick else HERE / "RESULTS.md")
    if out:
        out.write_text(text)
        log(f"wrote {out}")
    else:
        print(text)
    failed = (any(m.data.get("error") for m in res.values())
              or "error" in many or "error" in cli)
    missed = any(c.met is False for c in checks)
    return 1 if failed or (args.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
