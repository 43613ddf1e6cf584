"""Months of history on PostgreSQL: the cluster's throughput with ``--runs`` finished
runs in the database, idle and while ``plait prune`` deletes them.

    python benchmarks/prune_load.py [--db postgresql://postgres@127.0.0.1:5432/test]
        [--runs 100000] [--workers 4] [--pairs 2] [--quick]
        [--bigchain FILE] [--out FILE] [--md FILE]

The history: a database of its own (created here, dropped after) where
``--template-runs`` runs (1,000) of a workflow of ``--steps`` independent python steps
(5), each returning 100 bytes, are run through ``plait.connect`` (prune_disk.py's
workflow); the rest of ``--runs`` are copies of their rows (runs, steps, attempts,
events and every other table a run writes) under new run ids, inserted by one SQL
statement per table: the rows real runs leave, filled in seconds.  Then the batch
cluster.py's throughput measures is stored in it: 100 runs (``--quick``: 20) of 40
steps (4 layers of 10, ``cluster_steps:body``), with ``plait run --detach``.

Every round gets a copy of that database (``CREATE DATABASE ... TEMPLATE``) and starts
``--workers`` ``plait worker`` processes (``--concurrency 32``) on it; the batch's steps
per second run from the first body's start to the last body's end, as in cluster.py,
and every run's output is checked.  Rounds alternate (``--pairs`` pairs):

- **idle**: the workers run the batch; then ``plait prune --before T`` alone (no
  workers), timed.
- **prune**: ``plait prune --before T`` starts, then the workers (a quarter of the
  idle round's prune time later, less their 1.5 s start: the batch runs in the middle
  of the prune, not at its start) and run the batch while it deletes the history; the
  prune is timed to its exit.

``T`` is the moment the history was filled (an ISO 8601 time): "now" for the history,
before the batch, so every prune deletes the same rows and leaves the batch's runs.

Reported: the median throughput of each kind, their ratio (target: prune within 20%
of idle), whether the prune was still running when the batch ended, and the prune's
time, runs and rows (its ``--json``), rows/s deleted.  ``--quick``: 5,000 runs, one
pair.  ``--bigchain FILE``: cluster.py's ``--only bigchain`` JSON, whose rows the
report (``--md``, MONTHS.md) shows first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from cluster import (  # noqa: E402
    PLAIT,
    PSQL_ENV,
    Cluster,
    _psql,
    _with_db,
    check,
    definition,
    layers,
    submit,
    wait_all,
)
from harness import machine_header, met, table  # noqa: E402
from prune_disk import run_all, workflow  # noqa: E402

from plait.store.prune import RUN_TABLES  # noqa: E402

TARGET = 0.8  # throughput while pruning at least 80% of idle


def _sql(url: str, query: str) -> str:
    return subprocess.run(["psql", url, "-At", "-v", "ON_ERROR_STOP=1", "-c", query],
                          check=True, env=PSQL_ENV, capture_output=True,
                          text=True).stdout.strip()


def _columns(url: str, name: str) -> list[str]:
    out = _sql(url, "SELECT column_name FROM information_schema.columns "
               f"WHERE table_name = '{name}' AND table_schema = 'public' "
               "AND is_identity = 'NO' AND is_generated = 'NEVER' ORDER BY ordinal_position")
    return out.split()


def copy_history(url: str, copies: int) -> dict[str, int]:
    """Every run in ``url`` ``copies`` more times, with its rows in every table a run
    writes, under new run ids (md5 of the old id and the copy's number: hex, as plait's
    ids are); the rows per table after."""
    _sql(url, "CREATE TABLE copy_map AS SELECT r.id AS old_id, r.run_id AS old_rid, "
         "md5(r.run_id || ':' || k) AS new_rid, NULL::bigint AS new_id "
         f"FROM runs AS r, generate_series(1, {copies}) AS k")
    cols = _columns(url, "runs")
    picked = ", ".join("m.new_rid" if c == "run_id" else f"r.{c}" for c in cols)
    _sql(url, f"INSERT INTO runs ({', '.join(cols)}) SELECT {picked} "
         "FROM runs AS r JOIN copy_map AS m ON m.old_id = r.id")
    _sql(url, "UPDATE copy_map AS m SET new_id = r.id FROM runs AS r "
         "WHERE r.run_id = m.new_rid")
    copied = {"runs": int(_sql(url, "SELECT count(*) FROM runs"))}
    for name, key in RUN_TABLES:
        if _sql(url, f"SELECT count(*) FROM {name}") == "0":
            continue
        cols = _columns(url, name)
        new, old = ("new_id", "old_id") if key == "run" else ("new_rid", "old_rid")
        picked = ", ".join(f"m.{new}" if c == key else f"t.{c}" for c in cols)
        _sql(url, f"INSERT INTO {name} ({', '.join(cols)}) SELECT {picked} "
             f"FROM {name} AS t JOIN copy_map AS m ON m.{old} = t.{key}")
        copied[name] = int(_sql(url, f"SELECT count(*) FROM {name}"))
    _sql(url, "DROP TABLE copy_map")
    _sql(url, "VACUUM ANALYZE")
    return copied


def fill(url: str, runs: int, template_runs: int, steps: int, batch: int,
         tmp: Path) -> tuple[list[str], float, dict[str, Any]]:
    """The history and the batch (stored, not started) in ``url``: the batch's run ids,
    the prunes' cutoff (after the history, before the batch: every prune deletes the
    history and nothing else) and what was filled."""
    began = time.perf_counter()
    template_runs = min(template_runs, runs)
    asyncio.run(run_all(url, workflow(steps), template_runs))
    ran = time.perf_counter() - began
    copied = copy_history(url, runs // template_runs - 1)
    filled = time.perf_counter() - began
    cutoff = time.time()
    path = tmp / "layers.yaml"
    path.write_text(definition(layers(), "bench-layers"))
    ids = [submit(url, path) for _ in range(batch)]
    size = int(_sql(url, "SELECT pg_database_size(current_database())"))
    return ids, cutoff, {"runs": copied["runs"], "template_runs": template_runs,
                 "steps_per_run": steps, "rows": copied, "run_s": round(ran, 1),
                 "fill_s": round(filled, 1), "database_mb": round(size / 2**20)}


def rate(shown: list[dict[str, Any]]) -> dict[str, Any]:
    work = layers()
    bodies = [out for s in shown for out in check(work, s).values()]
    start, end = min(o["t0"] for o in bodies), max(o["t1"] for o in bodies)
    return {"steps": len(bodies), "seconds": round(end - start, 3), "start": start,
            "end": end,
            "steps_per_s": round(len(bodies) / (end - start), 1)}


class Prune:
    """``plait prune --before CUTOFF --json`` in the background, its exit time taken by
    a thread the moment it exits."""

    def __init__(self, url: str, cutoff: float) -> None:
        before = datetime.fromtimestamp(cutoff, UTC).isoformat()
        self.began = time.time()
        self.proc = subprocess.Popen(
            [PLAIT, "prune", "--before", before, "--db", url, "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.out = self.err = ""
        self.ended = 0.0
        self.thread = threading.Thread(target=self._wait, daemon=True)
        self.thread.start()

    def _wait(self) -> None:
        self.out, self.err = self.proc.communicate()
        self.ended = time.time()

    def finish(self) -> dict[str, Any]:
        self.thread.join(timeout=1800)
        if self.thread.is_alive():
            self.proc.kill()
            raise RuntimeError("plait prune still running after 30 minutes")
        if self.proc.returncode != 0:
            raise RuntimeError(f"plait prune exited {self.proc.returncode}: "
                               f"{self.err.strip()}")
        counts = json.loads(self.out)
        seconds = self.ended - self.began
        deleted = counts["runs"] + counts["rows"]
        return {"seconds": round(seconds, 2), "runs": counts["runs"], "rows": deleted,
                "rows_per_s": round(deleted / seconds)}


def one_round(server: str, template: str, ids: list[str], cutoff: float, kind: str,
              workers: int, concurrency: int, delay: float = 0.0) -> dict[str, Any]:
    """One copy of the history, the batch run on it and the history pruned: ``idle``
    (the prune after the batch) or ``prune`` (the workers started ``delay`` s after the
    prune, so that the batch runs in the middle of it)."""
    name = f"plait_prune_load_{uuid.uuid4().hex[:10]}"
    _psql(server, f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    url = _with_db(server, name)
    try:
        if kind == "prune":
            prune_run = Prune(url, cutoff)
            time.sleep(delay)
            with Cluster(url, workers, concurrency):
                got = rate(wait_all(url, ids, 900))
            prune = prune_run.finish()
            got["batch_in_prune_s"] = [round(got["start"] - prune_run.began, 2),
                                       round(got["end"] - prune_run.began, 2)]
            got["prune_still_running_at_batch_end"] = prune_run.ended > got["end"]
        else:
            with Cluster(url, workers, concurrency):
                got = rate(wait_all(url, ids, 900))
            prune = Prune(url, cutoff).finish()
        left = int(_sql(url, "SELECT count(*) FROM runs"))
        if left != len(ids):
            raise RuntimeError(f"{left} runs left after the prune, expected the batch's "
                               f"{len(ids)}")
    finally:
        _psql(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    got.pop("start")
    got.pop("end")
    return {"kind": kind, **got, "prune": prune}


def summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    idle = [r for r in rounds if r["kind"] == "idle"]
    pruning = [r for r in rounds if r["kind"] == "prune"]
    idle_rate = statistics.median(r["steps_per_s"] for r in idle)
    prune_rate = statistics.median(r["steps_per_s"] for r in pruning)
    return {"idle_steps_per_s": round(idle_rate, 1),
            "prune_steps_per_s": round(prune_rate, 1),
            "ratio": round(prune_rate / idle_rate, 3),
            "pair_ratios": [round(p["steps_per_s"] / i["steps_per_s"], 3)
                            for i, p in zip(idle, pruning, strict=True)],
            "overlapped": all(r["prune_still_running_at_batch_end"] for r in pruning),
            "prune_under_load_s": round(statistics.median(r["prune"]["seconds"] for r in pruning), 2),
            "prune_alone_s": round(statistics.median(r["prune"]["seconds"] for r in idle), 2),
            "prune_rows": pruning[0]["prune"]["rows"],
            "prune_under_load_rows_per_s": round(statistics.median(
                r["prune"]["rows_per_s"] for r in pruning)),
            "prune_alone_rows_per_s": round(statistics.median(
                r["prune"]["rows_per_s"] for r in idle))}


def report(result: dict[str, Any], bigchain: dict[str, Any] | None, command: str) -> str:
    s, h = result["summary"], result["history"]
    lines = machine_header("plait after months of use (PostgreSQL)", [
        f"produced by: `{command}` (and `python benchmarks/cluster.py --only bigchain` "
        "for the big-chain rows)",
        f"{result['workers']} `plait worker` processes, `--concurrency "
        f"{result['concurrency']}`, on this host with the PostgreSQL server (2 cores "
        "shared by all of them)",
        f"history: {h['runs']:,} finished runs of {h['steps_per_run']} steps "
        f"({h['template_runs']:,} run through `plait.connect`, the rest copies of their "
        f"rows: {', '.join(f'{t} {n:,}' for t, n in h['rows'].items())}; "
        f"{h['database_mb']:,} MB), filled in {h['fill_s']} s",
        f"batch: {result['batch_runs']} runs x 40 steps (`cluster_steps:body`, every "
        "output checked), stored first, the workers started together"])
    rows: list[list[str]] = []
    if bigchain is not None:
        from cluster_bigchain import rows as bigchain_rows

        rows += bigchain_rows(bigchain)
    rows += [
        [f"throughput with {h['runs']:,} finished runs in the database, while `plait "
         f"prune --before T` deletes them, against idle ({len(s['pair_ratios'])} "
         "interleaved pairs, medians)",
         f"{s['prune_steps_per_s']:,} vs {s['idle_steps_per_s']:,} steps/s: "
         f"{s['ratio']:.0%} (pairs: {', '.join(f'{x:.0%}' for x in s['pair_ratios'])}); "
         "the prune " + ("outlasted every batch" if s["overlapped"]
                         else "**ended before a batch did**"),
         f">= {TARGET:.0%}", met(s["ratio"] >= TARGET)],
        [f"`plait prune` of {h['runs']:,} runs ({s['prune_rows']:,} rows) with the "
         "workers running",
         f"{s['prune_under_load_s']} s, {s['prune_under_load_rows_per_s']:,} rows/s",
         "reported", met(None)],
        ["... the same prune alone (after the idle batch)",
         f"{s['prune_alone_s']} s, {s['prune_alone_rows_per_s']:,} rows/s",
         "reported", met(None)],
    ]
    lines += table(["target", "measured", "threshold", "met?"], rows)
    lines += ["Rounds (in order):", ""]
    lines += table(["round", "steps/s", "batch s", "batch within the prune", "prune s",
                    "prune rows/s"],
                   [[r["kind"], f"{r['steps_per_s']:,}", r["seconds"],
                     "{:.2f}-{:.2f} s".format(*r["batch_in_prune_s"])
                     if "batch_in_prune_s" in r else "before it",
                     r["prune"]["seconds"], f"{r['prune']['rows_per_s']:,}"]
                    for r in result["rounds"]])
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", default=os.environ.get(
        "PLAIT_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test"))
    ap.add_argument("--runs", type=int, help="finished runs (default 100,000; "
                    "--quick 5,000)")
    ap.add_argument("--template-runs", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--pairs", type=int, help="idle/prune pairs (default 2; --quick 1)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--bigchain", help="cluster.py --only bigchain's JSON, for the report")
    ap.add_argument("--out")
    ap.add_argument("--md")
    args = ap.parse_args()
    runs = args.runs or (5_000 if args.quick else 100_000)
    pairs = args.pairs or (1 if args.quick else 2)
    batch = 20 if args.quick else 100
    if runs < 1 or pairs < 1:
        raise SystemExit("--runs and --pairs must be at least 1")
    warnings.filterwarnings("ignore", message="workflow 'hundred_bytes' calls functions")
    template = f"plait_prune_history_{uuid.uuid4().hex[:10]}"
    _psql(args.db, f'CREATE DATABASE "{template}"')
    tmp = Path(tempfile.mkdtemp(prefix="plait-prune-load-"))
    try:
        ids, cutoff, history = fill(_with_db(args.db, template), runs, args.template_runs,
                            args.steps, batch, tmp)
        print(json.dumps(history), file=sys.stderr, flush=True)
        rounds = []
        for _ in range(pairs):
            idle = one_round(args.db, template, ids, cutoff, "idle", args.workers,
                             args.concurrency)
            print(json.dumps(idle), file=sys.stderr, flush=True)
            # the workers take about 1.5 s to start and the batch a few seconds: started
            # a quarter into the prune (as long as the idle round's), the batch runs in
            # its middle rather than at its start
            delay = max(0.0, idle["prune"]["seconds"] / 4 - 1.5)
            rounds += [idle, one_round(args.db, template, ids, cutoff, "prune",
                                       args.workers, args.concurrency, delay)]
            print(json.dumps(rounds[-1]), file=sys.stderr, flush=True)
    finally:
        _psql(args.db, f'DROP DATABASE IF EXISTS "{template}" WITH (FORCE)')
    result = {"workers": args.workers, "concurrency": args.concurrency,
              "batch_runs": batch, "history": history, "rounds": rounds,
              "summary": summary(rounds)}
    bigchain = None
    if args.bigchain:
        bigchain = json.loads(Path(args.bigchain).read_text())["bigchain"]
        result["bigchain"] = bigchain
    text = json.dumps(result, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)
    if args.md:
        Path(args.md).write_text(report(result, bigchain, "python benchmarks/prune_load.py "
                                        + " ".join(sys.argv[1:])))


if __name__ == "__main__":
    main()
