"""Disk bytes per completed step, and what a prune gives back, on SQLite and PostgreSQL.

    python benchmarks/prune_disk.py [--runs 200] [--steps 10] [--only sqlite|postgres]
        [--pg postgresql://postgres@127.0.0.1:5432/test] [--out FILE] [--md FILE]

A workflow of ``--steps`` independent python steps, each returning a string of 100
bytes, is run ``--runs`` times (20 at a time) on a fresh store through
``plait.connect``.  Measured:

- SQLite: the database file's size (its WAL checkpointed into it) when empty, after the
  runs, after ``Store.prune_runs`` (everything that finished: the prune ends with
  ``PRAGMA incremental_vacuum``), and after the same runs once more.
- PostgreSQL (a database of its own, created and dropped here): the summed
  ``pg_total_relation_size`` of plait's tables at the same points, with a ``VACUUM``
  after the prune standing in for autovacuum; the tables do not shrink, the second
  round of runs reuses the space.

``bytes_per_step``: (size after the runs - size empty) / steps run.  Prints (or
writes to FILE) one JSON object per store; ``--md`` writes the report the README
quotes (benchmarks/DISK.md, ``make bench-months``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import plait
from plait import Workflow

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from harness import machine_header, met, table  # noqa: E402

PAYLOAD = "x" * 100  # what each step returns: 100 bytes


def workflow(steps: int) -> Workflow:
    wf = Workflow("hundred_bytes")
    for i in range(steps):
        async def body() -> str:
            return PAYLOAD

        wf.add_step(f"s{i}", body)
    return wf


async def run_all(url: str, wf: Workflow, runs: int) -> None:
    gate = asyncio.Semaphore(20)
    async with plait.connect(url) as db:
        async def one() -> None:
            async with gate:
                result = await wf.run_async(db=db)
                if result.status != "completed":
                    raise RuntimeError(f"a run ended {result.status}")

        await asyncio.gather(*(one() for _ in range(runs)))


async def prune(url: str) -> dict[str, int]:
    from plait.store import open_store

    store = open_store(url)
    await store.open()
    try:
        counts = await store.prune_runs(time.time() + 1.0)
    finally:
        await store.close()
    return {"runs": counts.runs, "rows": counts.total_rows}


def sqlite_size(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return path.stat().st_size


async def bench_sqlite(runs: int, steps: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "plait.db"
        url = f"sqlite:///{path}"
        wf = workflow(steps)
        await run_all(url, wf, 0)
        empty = sqlite_size(path)
        await run_all(url, wf, runs)
        full = sqlite_size(path)
        pruned = await prune(url)
        after = sqlite_size(path)
        await run_all(url, wf, runs)
        again = sqlite_size(path)
    return _result("sqlite", runs, steps, empty, full, pruned, after, again)


async def pg_size(admin: str, db: str) -> int:
    import psycopg

    async with await psycopg.AsyncConnection.connect(_in(admin, db)) as conn:
        row = await (await conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class AS c "
            "JOIN pg_namespace AS n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'public' AND c.relkind = 'r'")).fetchone()
        return int(row[0]) if row else 0


async def pg_admin(admin: str, statement: str, db: str | None = None) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(_in(admin, db), autocommit=True) \
            as conn:
        await conn.execute(statement)


def _in(url: str, db: str | None) -> str:
    return url if db is None else url.rsplit("/", 1)[0] + "/" + db


async def bench_postgres(admin: str, runs: int, steps: int) -> dict[str, Any]:
    name = "plait_prune_bench"
    await pg_admin(admin, f"DROP DATABASE IF EXISTS {name}")
    await pg_admin(admin, f"CREATE DATABASE {name}")
    url = _in(admin, name)
    try:
        wf = workflow(steps)
        await run_all(url, wf, 0)
        empty = await pg_size(admin, name)
        await run_all(url, wf, runs)
        full = await pg_size(admin, name)
        pruned = await prune(url)
        await pg_admin(admin, "VACUUM", name)  # what autovacuum does in its own time
        after = await pg_size(admin, name)
        await run_all(url, wf, runs)
        again = await pg_size(admin, name)
    finally:
        await pg_admin(admin, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    return _result("postgres", runs, steps, empty, full, pruned, after, again)


def _result(store: str, runs: int, steps: int, empty: int, full: int,
            pruned: dict[str, int], after: int, again: int) -> dict[str, Any]:
    done = runs * steps
    return {"store": store, "runs": runs, "steps": done, "bytes_empty": empty,
            "bytes_after_runs": full, "bytes_per_step": round((full - empty) / done),
            "pruned": pruned, "bytes_after_prune": after,
            "bytes_after_runs_again": again}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--only", choices=["sqlite", "postgres"])
    parser.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--out")
    parser.add_argument("--md", help="write the Markdown report here")
    args = parser.parse_args()
    # the steps are defined here, in __main__: nothing resumes them elsewhere
    warnings.filterwarnings("ignore", message="workflow 'hundred_bytes' calls functions")
    results = []
    if args.only in (None, "sqlite"):
        results.append(await bench_sqlite(args.runs, args.steps))
    if args.only in (None, "postgres"):
        results.append(await bench_postgres(args.pg, args.runs, args.steps))
    text = json.dumps(results, indent=2) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    if args.md:
        Path(args.md).write_text(report(results, args.runs, args.steps))
    sys.stdout.write(text)


TARGET_BYTES = 1536  # bytes per completed step, indexes included


def report(results: list[dict[str, Any]], runs: int, steps: int) -> str:
    command = f"python benchmarks/prune_disk.py --runs {runs} --steps {steps} --md ..."
    lines = machine_header("Disk per completed step, and what a prune gives back", [
        f"produced by: `{command}`",
        f"{runs} runs of {steps} python steps each returning 100 bytes, on a fresh store; "
        f"then `plait prune` of everything that finished (PostgreSQL: a `VACUUM` after it, "
        f"as autovacuum would), then the same runs again"])
    rows = []
    for r in results:
        per = r["bytes_per_step"]
        rows.append([r["store"], f"{per:,} B", f"< {TARGET_BYTES:,} B", met(per < TARGET_BYTES),
                     f"{r['bytes_empty']:,}", f"{r['bytes_after_runs']:,}",
                     f"{r['pruned']['runs']:,} runs, {r['pruned']['rows']:,} rows",
                     f"{r['bytes_after_prune']:,}", f"{r['bytes_after_runs_again']:,}"])
    lines += table(["store", "bytes per completed step (tables + indexes)", "target", "met?",
                    "bytes empty", "after the runs", "pruned", "after the prune",
                    "after the same runs again"], rows)
    lines += ["SQLite gives the space back to the file system (incremental vacuum at the end "
              "of a prune). PostgreSQL keeps the pages and reuses them: the second round of "
              "runs grows the tables by less than the first (docs/retention.md).", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    asyncio.run(main())
