"""plait on many workers (PostgreSQL): throughput against pgbench, dispatch latency, a
10,000-step fan-out and recovery after a SIGKILL, as a user runs them.

    python benchmarks/cluster.py [--db postgresql://postgres@127.0.0.1:5432/test]
        [--workers 4] [--concurrency 32] [--quick] [--out FILE] [--md FILE]

Every measurement gets a fresh database (created from ``--db``'s server, dropped
after).  Workers are real ``plait worker`` processes (``--import cluster_steps``, run
from this directory); runs are started the way the README shows (``plait run FILE
--db URL --detach``), and every step is ``cluster_steps.body``: it takes its parents'
outputs and returns a JSON object, as the per-step benchmarks' steps do.  Each run
must complete with the expected output (``workloads.Workload.expected_output``); a
run that does not is an error, not a number.  The harness waits with one ``psql``
count per 0.2 s (a ``plait show`` per poll would take CPU the workers need) and
reads every run with ``plait show --json`` at the end.

- **throughput**: 100 runs of 40 steps (4 layers of 10, each step reading every step
  of the layer above), stored first, then run by ``--workers`` workers started
  together, three times (the median is reported, with all three): steps per second
  from the first body's start to the last body's end (and from the moment every
  worker had started a body), and
  as a ratio to ``pgbench`` (4 clients, a 2-statement transaction: an UPDATE and a
  SELECT of one account) run on the same server just before and just after (the mean
  of the two).  Again with ``--concurrency 8`` and with ``--no-eager`` (reported).
  With 100 runs of width 10 there are up to 1,000 ready steps for the workers' slots:
  ``--concurrency`` decides how many a driver runs itself (eager) and how many go
  through tickets, which is why both are reported.
- **latency**: one 200-step chain on idle workers (the driver runs each child itself:
  eager), again with ``--no-eager`` (each child a ticket, each outcome through the
  inbox; LISTEN/NOTIFY wakes both sides), and (50 steps) with workers that also only
  poll (``--no-listen``, ``--poll 1s``): per edge, from the parent body's return to the
  child body's start (p50, p90, p99).
- **fan-out**: one run 1 -> 10,000 -> 1 (``--quick``: 2,000): makespan and per-step cost.
- **recovery**: a run whose one step sleeps 3 s, on 2 workers with a 2 s lease; the
  worker running it is SIGKILLed one second in; from the kill to the step's next
  attempt starting on the other worker (the lease running out, then the reaper or the
  takeover of the run).
- **bigchain** (only with ``--only bigchain``; ``cluster_bigchain.py``): a 1,000-step
  chain whose first step returns 100 KB against the same chain whose first step
  returns 100 bytes, interleaved, eager and ``--no-eager``: per-step time and ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from workloads import Workload, chain, fanout  # noqa: E402

PLAIT = str(Path(sys.executable).with_name("plait"))
PSQL_ENV = dict(os.environ, PGCONNECT_TIMEOUT="5")


# ----------------------------------------------------------------- databases

def _with_db(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


def _psql(url: str, sql: str) -> None:
    subprocess.run(["psql", url, "-q", "-v", "ON_ERROR_STOP=1", "-c", sql], check=True,
                   env=PSQL_ENV, stdout=subprocess.DEVNULL)


def commits(url: str) -> int:
    """Transactions committed in ``url``'s database so far (pg_stat_database): the
    deterministic cost of a measurement, whatever the machine's noise."""
    name = urlsplit(url).path.lstrip("/")
    out = subprocess.run(["psql", _with_db(url, "postgres"), "-At", "-c",
                          "SELECT xact_commit FROM pg_stat_database "
                          f" WHERE datname = '{name}'"],
                         check=True, env=PSQL_ENV, capture_output=True, text=True).stdout
    return int(out.split()[-1])


@contextlib.contextmanager
def fresh_database(server: str, prefix: str) -> Iterator[str]:
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    _psql(server, f'CREATE DATABASE "{name}"')
    try:
        yield _with_db(server, name)
    finally:
        _psql(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# ------------------------------------------------------------------- pgbench

PGBENCH_SCRIPT = """\\set aid random(1, 100000 * :scale)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
END;
"""


def pgbench(server: str, seconds: float) -> float:
    """Transactions per second of the 2-statement transaction, 4 clients."""
    with fresh_database(server, "plait_pgbench") as url, \
            tempfile.NamedTemporaryFile("w", suffix=".sql") as script:
        script.write(PGBENCH_SCRIPT)
        script.flush()
        subprocess.run(["pgbench", "-i", "-q", "-s", "4", url], check=True, env=PSQL_ENV,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out = subprocess.run(["pgbench", "-n", "-c", "4", "-j", "2", "-T",
                              str(int(seconds)), "-f", script.name, url], check=True,
                             env=PSQL_ENV, capture_output=True, text=True).stdout
    found = re.search(r"tps = ([0-9.]+)", out)
    if found is None:
        raise RuntimeError(f"pgbench printed no tps:\n{out}")
    return float(found.group(1))


# ------------------------------------------------------------------- plait

def definition(work: Workload, name: str, *, slow: set[str] | None = None) -> str:
    """The workload as a plait YAML definition (JSON is YAML)."""
    steps = []
    for step in work.steps:
        spec: dict[str, Any] = {"id": step, "type": "python",
                                "call": "cluster_steps:" + (
                                    "slow" if slow and step in slow else "body")}
        if work.parents[step]:
            spec["depends_on"] = list(work.parents[step])
        steps.append(spec)
    return json.dumps({"name": name, "concurrency": 10_000, "steps": steps})


def layers(width: int = 10, depth: int = 4) -> Workload:
    steps: list[str] = []
    parents: dict[str, tuple[str, ...]] = {}
    above: tuple[str, ...] = ()
    for layer in range(depth):
        row = tuple(f"l{layer}_{i}" for i in range(width))
        for step in row:
            steps.append(step)
            parents[step] = above
        above = row
    return Workload(name=f"layers-{width}x{depth}", steps=tuple(steps), parents=parents)


class Cluster:
    """``n`` ``plait worker`` processes on one database."""

    def __init__(self, url: str, n: int, concurrency: int, *, lease: str = "10s",
                 extra: tuple[str, ...] = ()) -> None:
        self.url, self.n, self.concurrency, self.lease = url, n, concurrency, lease
        self.extra = extra
        self.procs: list[subprocess.Popen[bytes]] = []

    def start_one(self) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [PLAIT, "worker", "--db", self.url, "--concurrency", str(self.concurrency),
             "--import", "cluster_steps", "--lease", self.lease, *self.extra],
            cwd=HERE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True)
        self.procs.append(proc)
        return proc

    def __enter__(self) -> Cluster:
        for _ in range(self.n):
            self.start_one()
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def submit(url: str, path: Path, input: dict[str, Any] | None = None) -> str:
    out = subprocess.run([PLAIT, "run", str(path), "--db", url, "--detach", "--json",
                          "--input", json.dumps(input or {})],
                         check=True, capture_output=True, text=True, cwd=HERE).stdout
    return str(json.loads(out)["run_id"])


def show(url: str, run_id: str) -> dict[str, Any]:
    out = subprocess.run([PLAIT, "show", run_id, "--db", url, "--json"],
                         capture_output=True, text=True, cwd=HERE).stdout
    return dict(json.loads(out))


def unfinished(url: str, run_ids: list[str]) -> int:
    """How many of the runs have not ended, read with one psql query: waiting must not
    take the CPU the measurement needs (a `plait show` per poll is a Python process
    start, about a third of a core-second each)."""
    ids = ",".join(f"'{r}'" for r in run_ids)  # run ids plait generated: hex only
    out = subprocess.run(["psql", url, "-At", "-c",
                          "SELECT count(*) FROM runs WHERE status NOT IN "
                          f"('completed', 'failed', 'cancelled') AND run_id IN ({ids})"],
                         check=True, env=PSQL_ENV, capture_output=True, text=True).stdout
    return int(out.split()[-1])


def wait_all(url: str, run_ids: list[str], timeout: float) -> list[dict[str, Any]]:
    """Wait until every run ended, then read each with `plait show --json`."""
    assert all(re.fullmatch(r"[0-9a-f]+", r) for r in run_ids), run_ids
    deadline = time.monotonic() + timeout
    while unfinished(url, run_ids):
        if time.monotonic() > deadline:
            raise RuntimeError(f"runs unfinished after {timeout}s")
        time.sleep(0.2)
    return [show(url, r) for r in run_ids]


def outputs(shown: dict[str, Any]) -> dict[str, dict[str, Any]]:
    steps = shown["steps"]
    items = steps.items() if isinstance(steps, dict) else ((s["id"], s) for s in steps)
    return {sid: step["output"] for sid, step in items}


def check(work: Workload, shown: dict[str, Any]) -> dict[str, dict[str, Any]]:
    if shown.get("status") != "completed":
        raise RuntimeError(f"run {shown.get('run_id')} ended {shown.get('status')}: "
                           f"{shown.get('error')}")
    outs = outputs(shown)
    for sink, value in work.expected_output().items():
        got = {k: outs[sink][k] for k in ("step", "n")}
        if got != value:
            raise RuntimeError(f"step {sink}: {got}, expected {value}")
    return outs


def edge_latencies(work: Workload, outs: dict[str, dict[str, Any]]) -> list[float]:
    """Per step with parents: from the last parent's return to the step's start."""
    return [outs[s]["t0"] - max(outs[p]["t1"] for p in work.parents[s])
            for s in work.steps if work.parents[s]]


def _epoch(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# ------------------------------------------------------------- measurements

def throughput(server: str, workers: int, concurrency: int, tmp: Path,
               runs: int, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    work = layers()
    path = tmp / "layers.yaml"
    path.write_text(definition(work, "bench-layers"))
    with fresh_database(server, "plait_bench") as url:
        ids = [submit(url, path) for _ in range(runs)]
        before = commits(url)
        with Cluster(url, workers, concurrency, extra=extra):
            shown = wait_all(url, ids, 600)
        time.sleep(0.5)  # the workers' last statistics reach the server
        spent = commits(url) - before
    bodies = [out for s in shown for out in check(work, s).values()]
    start, end = min(o["t0"] for o in bodies), max(o["t1"] for o in bodies)
    # the workers start together with the runs waiting: the first to be ready starts
    # while the others still import and connect (about a third of a core-second each).
    # "all up": from the moment every worker has started a body, the steps started
    # since, to the last body's end (the rate of a cluster already running)
    firsts: dict[int, float] = {}
    for o in bodies:
        firsts[o["pid"]] = min(firsts.get(o["pid"], o["t0"]), o["t0"])
    all_up = max(firsts.values())
    steady = sum(1 for o in bodies if o["t0"] >= all_up)
    # transactions per step: the workers' and this script's polling (plait show) both
    # count, so it is an upper bound of what the engine spends
    return {"runs": runs, "concurrency": concurrency, "options": " ".join(extra),
            "steps": len(bodies), "seconds": round(end - start, 3),
            "steps_per_s": round(len(bodies) / (end - start), 1),
            "workers_that_ran_steps": len(firsts),
            "all_up_after_s": round(all_up - start, 3), "all_up_steps": steady,
            "all_up_steps_per_s": round(steady / (end - all_up), 1) if end > all_up else 0,
            "commits_per_step": round(spent / len(bodies), 2)}


def latency(server: str, workers: int, concurrency: int, tmp: Path, n: int,
            extra: tuple[str, ...] = ()) -> dict[str, Any]:
    work = chain(n)
    path = tmp / "chain.yaml"
    path.write_text(definition(work, "bench-chain"))
    with fresh_database(server, "plait_bench") as url:
        with Cluster(url, workers, concurrency, extra=extra):
            time.sleep(2)  # the workers are up and idle
            before = commits(url)
            run_id = submit(url, path)
            (shown,) = wait_all(url, [run_id], 600)
        time.sleep(0.5)  # the workers' last statistics reach the server
        spent = commits(url) - before
    outs = check(work, shown)
    lat = edge_latencies(work, outs)
    # the two halves of each edge, split at the driver's begin of the child (the step's
    # stored started_at): the parent's completion reaching the driver and being applied,
    # then the child's ticket reaching a worker
    begun = {sid: _epoch(step["started_at"]) for sid, step in shown["steps"].items()}
    applied = [begun[s] - outs[work.parents[s][0]]["t1"] for s in work.steps if work.parents[s]]
    claimed = [outs[s]["t0"] - begun[s] for s in work.steps if work.parents[s]]
    return {"edges": len(lat), "p50_ms": round(pct(lat, 0.5) * 1e3, 2),
            "to_driver_p50_ms": round(pct(applied, 0.5) * 1e3, 2),
            "to_worker_p50_ms": round(pct(claimed, 0.5) * 1e3, 2),
            "p90_ms": round(pct(lat, 0.9) * 1e3, 2), "p99_ms": round(pct(lat, 0.99) * 1e3, 2),
            "mean_ms": round(statistics.fmean(lat) * 1e3, 2),
            "commits_per_step": round(spent / len(outs), 2)}


def fan(server: str, workers: int, concurrency: int, tmp: Path, n: int) -> dict[str, Any]:
    work = fanout(n)
    path = tmp / "fanout.yaml"
    path.write_text(definition(work, "bench-fanout"))
    with fresh_database(server, "plait_bench") as url, Cluster(url, workers, concurrency):
        time.sleep(2)
        began = time.time()
        run_id = submit(url, path)
        (shown,) = wait_all(url, [run_id], 1800)
    outs = check(work, shown)
    end = max(o["t1"] for o in outs.values())
    makespan = end - began
    return {"steps": len(outs), "makespan_s": round(makespan, 2),
            "per_step_us": round(makespan / len(outs) * 1e6, 1)}


def recovery(server: str, tmp: Path, lease: str) -> dict[str, Any]:
    work = chain(3)
    path = tmp / "recovery.yaml"
    path.write_text(definition(work, "bench-recovery", slow={work.steps[1]}))
    with fresh_database(server, "plait_bench") as url, \
            Cluster(url, 2, 2, lease=lease) as cluster:
        time.sleep(2)
        pidfile = tmp / "slow.pid"
        run_id = submit(url, path, {"sleep": 3, "pidfile": str(pidfile)})
        deadline = time.monotonic() + 60
        while not pidfile.exists() or not pidfile.read_text():
            if time.monotonic() > deadline:
                raise RuntimeError("the slow step never started")
            time.sleep(0.02)
        time.sleep(1)
        pid = int(pidfile.read_text())
        killed = time.time()
        os.kill(pid, signal.SIGKILL)
        (shown,) = wait_all(url, [run_id], 300)
        cluster.procs = [p for p in cluster.procs if p.pid != pid]
    outs = check(work, shown)
    slow_out = outs[work.steps[1]]
    return {"lease": lease, "attempt": slow_out["attempt"],
            "kill_to_restart_s": round(slow_out["t0"] - killed, 2)}


def save(result: dict[str, Any], out: str | None) -> None:
    text = json.dumps(result, indent=2)
    if out:
        Path(out).write_text(text + "\n")
    print(text, flush=True)


def _row(what: str, measured: str, threshold: str, met: bool | None) -> str:
    verdict = "—" if met is None else ("yes" if met else "**NO**")
    return f"| {what} | {measured} | {threshold} | {verdict} |"


def report(result: dict[str, Any], command: str) -> str:
    """The Markdown report (``--md``) that the README quotes."""
    tp, lat, poll = result["throughput"], result["latency_notify"], result["latency_poll_only"]
    tp8, tickets, lat_tickets = result["throughput_c8"], result["throughput_no_eager"], \
        result["latency_no_eager"]
    fan_out, rec = result["fanout"], result["recovery"]
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    lines = [
        "# plait on many workers (PostgreSQL)", "",
        "Generated by a script; do not edit by hand.", "",
        f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"- produced by: `{command}`",
        f"- {result['workers']} `plait worker` processes, `--concurrency "
        f"{result['concurrency']}`, on this host with the PostgreSQL server (2 cores "
        f"shared by all of them); load average at the end: {load}",
        "- steps: `cluster_steps.body` (takes its parents' outputs, returns a JSON "
        "object); every run's output checked", "",
        "| target | measured | threshold | met? |", "|---|---|---|---|",
        _row(f"throughput, {tp['runs']} runs x 40 steps started at once (median of "
             f"{len(tp['tries_steps_per_s'])})",
             f"{tp['steps_per_s']:,} steps/s ({tp['steps']} steps in {tp['seconds']} s; "
             f"all {len(tp['tries_steps_per_s'])}: "
             f"{', '.join(f'{x:,}' for x in tp['tries_steps_per_s'])})",
             ">= 2,500 steps/s", tp["steps_per_s"] >= 2500),
        _row("... counted from the moment every worker had started a step (the "
             "workers start with the runs waiting)",
             f"{tp['all_up_steps_per_s']:,} steps/s (all: "
             f"{', '.join(f'{x:,}' for x in tp['tries_all_up_steps_per_s'])})",
             "reported", None),
        _row(f"... the same with `--concurrency {tp8['concurrency']}`",
             f"{tp8['steps_per_s']:,} steps/s ({tp8['seconds']} s)", "reported", None),
        _row("... the same with `--no-eager` (every attempt a ticket: claim, inbox)",
             f"{tickets['steps_per_s']:,} steps/s ({tickets['seconds']} s)", "reported",
             None),
        _row("throughput / pgbench (4 clients, 2-statement transaction, same server)",
             f"{tp['ratio_to_pgbench']:.0%} (pgbench {result['pgbench_tps']['before']:,} "
             f"and {result['pgbench_tps']['after']:,} tps before and after)", ">= 75%",
             tp["ratio_to_pgbench"] >= 0.75),
        _row(f"dispatch latency, LISTEN/NOTIFY ({lat['edges']}-edge chain): p50",
             f"{lat['p50_ms']} ms", "< 5 ms", lat["p50_ms"] < 5),
        _row("dispatch latency, LISTEN/NOTIFY: p99",
             f"{lat['p99_ms']} ms (p90 {lat['p90_ms']} ms)", "< 50 ms", lat["p99_ms"] < 50),
        _row(f"dispatch latency with `--no-eager` (every child a ticket: the parent's "
             f"outcome through the inbox, the child's ticket claimed; {lat_tickets['edges']}"
             f" edges)", f"p50 {lat_tickets['p50_ms']} ms (to the driver "
             f"{lat_tickets['to_driver_p50_ms']} ms, to a worker "
             f"{lat_tickets['to_worker_p50_ms']} ms), p99 {lat_tickets['p99_ms']} ms",
             "reported", None),
        _row(f"dispatch latency, polling only (`--no-eager --no-listen --poll 1s`, "
             f"{poll['edges']} edges)", f"p50 {poll['p50_ms']} ms, p99 {poll['p99_ms']} ms",
             "reported", None),
        _row(f"fan-out 1 -> {fan_out['steps'] - 2:,} -> 1 in one run",
             f"makespan {fan_out['makespan_s']} s, {fan_out['per_step_us']:,} µs per step",
             "reported", None),
        _row(f"recovery after SIGKILL (lease {rec['lease']})",
             f"{rec['kill_to_restart_s']} s from the kill to attempt {rec['attempt']} "
             f"starting elsewhere", "reported", None),
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", default=os.environ.get(
        "PLAIT_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test"))
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="throughput,latency,fanout,recovery",
                    help="the measurements to make, comma-separated (default: all "
                    "four; bigchain, a 1,000-step chain whose first output is 100 KB, "
                    "only when named: cluster_bigchain.py)")
    ap.add_argument("--out", help="write the JSON here")
    ap.add_argument("--md", help="write the Markdown report here (the README quotes it)")
    args = ap.parse_args()
    if shutil.which("pgbench") is None:
        raise SystemExit("pgbench is not installed (Debian: postgresql-client)")
    tmp = Path(tempfile.mkdtemp(prefix="plait-cluster-"))
    seconds = 5 if args.quick else 10
    result: dict[str, Any] = {"workers": args.workers, "concurrency": args.concurrency}
    only = set(args.only.split(","))
    if "throughput" in only:
        runs = 20 if args.quick else 100
        before = pgbench(args.db, seconds)
        # three times (the median is the row; the spread is shown): one measurement
        # lasts under 2 s, and this machine's noise is of the order of 10%
        tries = [throughput(args.db, args.workers, args.concurrency, tmp, runs)
                 for _ in range(1 if args.quick else 3)]
        tries.sort(key=lambda t: float(t["steps_per_s"]))
        result["throughput"] = dict(tries[len(tries) // 2])
        result["throughput"]["tries_steps_per_s"] = [t["steps_per_s"] for t in tries]
        result["throughput"]["tries_all_up_steps_per_s"] = [
            t["all_up_steps_per_s"] for t in tries]
        after = pgbench(args.db, seconds)
        result["throughput_c8"] = throughput(args.db, args.workers, 8, tmp, runs)
        result["throughput_no_eager"] = throughput(args.db, args.workers,
                                                   args.concurrency, tmp, runs, NO_EAGER)
        tps = (before + after) / 2
        result["pgbench_tps"] = {"before": round(before, 1), "after": round(after, 1)}
        result["throughput"]["ratio_to_pgbench"] = round(
            result["throughput"]["steps_per_s"] / tps, 3)
        save(result, args.out)
    if "latency" in only:
        result["latency_notify"] = latency(args.db, args.workers, args.concurrency, tmp,
                                           50 if args.quick else 200)
        result["latency_no_eager"] = latency(args.db, args.workers, args.concurrency, tmp,
                                             50 if args.quick else 200, NO_EAGER)
        result["latency_poll_only"] = latency(args.db, args.workers, args.concurrency,
                                              tmp, 20 if args.quick else 50, POLL_ONLY)
        save(result, args.out)
    if "fanout" in only:
        result["fanout"] = fan(args.db, args.workers, args.concurrency, tmp,
                               2_000 if args.quick else 10_000)
        save(result, args.out)
    if "recovery" in only:
        result["recovery"] = recovery(args.db, tmp, "2s")
        save(result, args.out)
    if "bigchain" in only:  # not in the default: bench-months runs it (MONTHS.md)
        from cluster_bigchain import bigchain

        result["bigchain"] = bigchain(args.db, args.workers, args.concurrency, tmp,
                                      args.quick, NO_EAGER)
        save(result, args.out)
    if args.md and only >= {"throughput", "latency", "fanout", "recovery"}:
        Path(args.md).write_text(report(result, "python benchmarks/cluster.py "
                                        + " ".join(sys.argv[1:])))


NO_EAGER: tuple[str, ...] = ("--no-eager",)
POLL_ONLY: tuple[str, ...] = ("--no-eager", "--no-listen")

if __name__ == "__main__":
    main()
