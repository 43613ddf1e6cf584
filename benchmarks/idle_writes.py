"""What one committed write costs right after another and after an idle wait, the way
an agent loop's journaled calls come (each after a model call): a bare insert and commit
(sqlite3; psycopg with PLAIT_TEST_DATABASE_URL) against plait's journaled call on the
same store, interleaved in one process.

    python benchmarks/idle_writes.py [--gap 0.05] [--calls 20] [--rounds 2]

Prints the median µs per write for each (store, way, gap).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import statistics
import tempfile
import time
import uuid
import warnings
from collections import defaultdict
from pathlib import Path

import plait
from plait import StepContext, Workflow

Samples = dict[tuple[str, str, float], list[float]]


async def _ping() -> dict[str, int]:
    return {"ok": 1}


def _journaled(samples: Samples, store: str) -> Workflow:
    async def calls(ctx: StepContext, input: dict) -> int:
        gap, n = float(input["gap"]), int(input["n"])
        for i in range(n):
            if gap:
                await asyncio.sleep(gap)
            started = time.perf_counter()
            await ctx.run(f"c{i}", _ping)
            samples[(store, "plait ctx.run", gap)].append(time.perf_counter() - started)
        return n

    wf = Workflow("idle-writes")
    wf.add_step("calls", calls)
    return wf


async def _bare_sqlite(path: Path, samples: Samples, gap: float, n: int) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v TEXT)")
    for _ in range(n):
        if gap:
            await asyncio.sleep(gap)
        started = time.perf_counter()
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO t VALUES (?, ?) ON CONFLICT DO NOTHING",
                   (uuid.uuid4().hex, "x"))
        db.execute("COMMIT")
        samples[("sqlite", "bare insert", gap)].append(time.perf_counter() - started)
    db.close()


async def _bare_postgres(url: str, samples: Samples, gap: float, n: int) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url) as conn:
        await conn.execute("CREATE TEMP TABLE IF NOT EXISTS t (k text PRIMARY KEY, v text)")
        await conn.commit()
        for _ in range(n):
            if gap:
                await asyncio.sleep(gap)
            started = time.perf_counter()
            await conn.execute("INSERT INTO t VALUES (%s, %s) ON CONFLICT DO NOTHING",
                               (uuid.uuid4().hex, "x"))
            await conn.commit()
            samples[("postgresql", "bare insert", gap)].append(time.perf_counter() - started)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gap", type=float, default=0.05, help="idle seconds before a write")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    # (its step lives in this script: nothing here is resumed in another process)
    warnings.filterwarnings("ignore", message="workflow 'idle-writes' calls functions")
    samples: Samples = defaultdict(list)
    pg = os.environ.get("PLAIT_TEST_DATABASE_URL")
    with tempfile.TemporaryDirectory() as tmp:
        stores = {"sqlite": f"sqlite:///{tmp}/plait.db"}
        if pg:
            stores["postgresql"] = pg
        for _ in range(args.rounds):
            for gap in (0.0, args.gap):
                await _bare_sqlite(Path(tmp) / "bare.db", samples, gap, args.calls)
                if pg:
                    await _bare_postgres(pg, samples, gap, args.calls)
                for store, url in stores.items():
                    async with plait.connect(url) as db:
                        await _journaled(samples, store).run_async(
                            {"gap": gap, "n": args.calls}, db=db, run_id=uuid.uuid4().hex)
    print(f"load average: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| store | write | µs right after another | µs after an idle wait |")
    print("|---|---|---|---|")
    for store, way in sorted({(s, w) for s, w, _ in samples}):
        hot = statistics.median(samples[(store, way, 0.0)]) * 1e6
        idle = statistics.median(samples[(store, way, args.gap)]) * 1e6
        print(f"| {store} | {way} | {hot:.0f} | {idle:.0f} |")


if __name__ == "__main__":
    asyncio.run(main())
