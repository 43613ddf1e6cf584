"""The cost of one journaled call (``await ctx.run(name, fn)``) over a plain call, per
store.

    python benchmarks/journal_cost.py [--n 500] [--repeats 9] [--db URL ...]
        [--out FILE.json] [--md FILE.md]

Each run is ``await wf.run_async({"n": N, "journal": ...}, db=URL)`` of a one-step
workflow (``plait_agent.cost_workflow``) whose python step makes N calls of an async
function returning ``{"ok": 1}``: ``await ctx.run(f"c{i}", ping)`` (journaled: a store
read, then the result committed, before it returns) or ``await ping()`` (plain).  The
step times its own loop, so run start-up is not counted.  Stores and the two kinds are
interleaved (memory, SQLite, PostgreSQL; plain then journaled, then the other way
round on the next repeat), after one untimed warm-up of each.  Per store and repeat,
the cost of a journaled call is (journaled seconds - plain seconds) / N; the report
gives its median and its range over the repeats, and the part of it that was this
process's CPU time (``time.process_time``: every thread of the process; not the
database server's), which a loaded machine inflates less than the clock.

Stores (``--db``, repeatable): ``memory``, ``sqlite`` (a fresh file) and a PostgreSQL
server URL (a fresh database on it); default memory, sqlite and
``PLAIT_TEST_DATABASE_URL`` when it answers.  Targets: SQLite under 150 µs, PostgreSQL
under 1 ms.  Exits 1 when a run does not complete with the expected output.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from plait_agent import cost_workflow  # noqa: E402

from plait import Workflow  # noqa: E402

TARGETS_US = {"sqlite": 150.0, "postgresql": 1000.0}


def load_average() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def pg_reachable(url: str) -> bool:
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=3):
            return True
    except psycopg.Error:
        return False


def store_kind(db: str) -> str:
    return "postgresql" if db.startswith("postgres") else db.split(":", 1)[0]


@contextlib.contextmanager
def store_urls(dbs: list[str], tmp: Path) -> Iterator[dict[str, str]]:
    """kind -> URL: a fresh SQLite file, a fresh PostgreSQL database per server."""
    with contextlib.ExitStack() as stack:
        urls: dict[str, str] = {}
        for db in dbs:
            if db == "memory":
                urls["memory"] = "memory://"
            elif db == "sqlite":
                urls["sqlite"] = f"sqlite:///{tmp}/journal.db"
            else:
                from cluster import fresh_database

                urls[store_kind(db)] = stack.enter_context(
                    fresh_database(db, "plait_journalbench"))
        yield urls


async def one(wf: Workflow, url: str, n: int, journal: bool) -> tuple[float, float]:
    """One run: the seconds its step's calls took on the clock and of CPU."""
    result = await wf.run_async({"n": n, "journal": journal}, db=url)
    out = (result.output or {}).get("calls")  # the output: {sink step: its output}
    if result.status != "completed" or not isinstance(out, dict) or out.get("n") != n:
        raise SystemExit(f"run on {url} did not complete as expected: {result.status} "
                         f"{out!r}")
    return float(out["seconds"]), float(out["cpu_seconds"])


async def pg_floor(url: str, n: int, repeat: int) -> float:
    """Seconds of n (a point SELECT, then an INSERT committed on its own) straight
    through psycopg on one connection: the two round trips and the commit a journaled
    call needs, without plait."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("CREATE TABLE IF NOT EXISTS floor_calls "
                           "(name text PRIMARY KEY, value text)")
        started = time.perf_counter()
        for i in range(n):
            name = f"r{repeat}-c{i}"
            await (await conn.execute("SELECT value FROM floor_calls WHERE name = %s",
                                      (name,))).fetchone()
            await (await conn.execute("INSERT INTO floor_calls VALUES (%s, %s) "
                                      "RETURNING value", (name, '{"ok": 1}'))).fetchone()
        return time.perf_counter() - started


Samples = dict[str, list[float]]  # plain, journal, plain_cpu, journal_cpu -> seconds


async def measure(urls: dict[str, str], n: int, repeats: int) -> dict[str, Any]:
    wf = cost_workflow()
    samples: dict[str, Samples] = {
        k: {"plain": [], "journal": [], "plain_cpu": [], "journal_cpu": []} for k in urls}
    for url in urls.values():  # warm-up: first opens, migrations, caches
        await one(wf, url, n, False)
        await one(wf, url, n, True)
    for r in range(repeats):
        kinds = list(urls)[r % len(urls):] + list(urls)[:r % len(urls)]
        for kind in kinds:
            order = (False, True) if r % 2 == 0 else (True, False)
            for journal in order:
                seconds, cpu = await one(wf, urls[kind], n, journal)
                key = "journal" if journal else "plain"
                samples[kind][key].append(seconds)
                samples[kind][f"{key}_cpu"].append(cpu)
            if kind == "postgresql":
                samples[kind].setdefault("floor", []).append(
                    await pg_floor(urls[kind], n, r))
        print(f"repeat {r + 1}/{repeats}: " + ", ".join(
            f"{k} {per_call_us(s, n)[-1]:.1f} µs" for k, s in samples.items()),
            file=sys.stderr)
    return {kind: summary(kind, s, n) for kind, s in samples.items()}


def per_call_us(s: Samples, n: int, cpu: bool = False) -> list[float]:
    """Per repeat: what a journaled call cost over a plain one, in µs."""
    plain, journal = (s["plain_cpu"], s["journal_cpu"]) if cpu else (s["plain"], s["journal"])
    return [(j - p) / n * 1e6 for p, j in zip(plain, journal, strict=True)]


def summary(kind: str, s: Samples, n: int) -> dict[str, Any]:
    cost, cpu = per_call_us(s, n), per_call_us(s, n, cpu=True)
    target = TARGETS_US.get(kind)
    median = statistics.median(cost)
    return {"store": kind, "n": n, "repeats": len(cost),
            "journal_us_median": median, "journal_us_min": min(cost),
            "journal_us_max": max(cost), "journal_cpu_us_median": statistics.median(cpu),
            "plain_us_median": statistics.median(s["plain"]) / n * 1e6,
            "floor_us_median": statistics.median(s["floor"]) / n * 1e6 if "floor" in s
            else None,
            "samples_us": cost, "samples_cpu_us": cpu, "target_us": target,
            "met": None if target is None else median < target}


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "# The cost of a journaled call",
        "",
        "Generated by `make bench-agents` (`benchmarks/journal_cost.py`); do not edit.",
        "",
        f"- date: {report['date']}",
        f"- machine: {report['machine']}",
        f"- load average before the run (1, 5, 15 min): {report['load_average']}",
        f"- what: a python step making {report['n']} calls of an async function "
        f"returning `{{\"ok\": 1}}`, `await ctx.run(f\"c{{i}}\", fn)` against plain "
        f"`await fn()`, each run started with `await wf.run_async(input, db=URL)`; "
        f"cost = (journaled - plain) / {report['n']}, {report['repeats']} interleaved "
        f"repeats per store",
        "",
        "| store | journaled call over a plain one (µs, median) | range over repeats (µs) "
        "| of which this process's CPU (µs) | plain call (µs) | floor: the same statements "
        "without plait (µs) | target | met |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in report["rows"]:
        target = "—" if row["target_us"] is None else f"< {row['target_us']:.0f} µs"
        met = "—" if row["met"] is None else ("yes" if row["met"] else "**no**")
        floor = "—" if row["floor_us_median"] is None else f"{row['floor_us_median']:.0f}"
        lines.append(
            f"| {row['store']} | {row['journal_us_median']:.1f} | "
            f"{row['journal_us_min']:.1f} – {row['journal_us_max']:.1f} | "
            f"{row['journal_cpu_us_median']:.1f} | {row['plain_us_median']:.2f} | "
            f"{floor} | {target} | {met} |")
    if report.get("note"):
        lines += ["", report["note"]]
    lines.append("")
    return "\n".join(lines)


def default_dbs() -> list[str]:
    dbs = ["memory", "sqlite"]
    pg = os.environ.get("PLAIT_TEST_DATABASE_URL")
    if pg and pg_reachable(pg):
        dbs.append(pg)
    else:
        print("PostgreSQL not reachable (PLAIT_TEST_DATABASE_URL): no PostgreSQL row",
              file=sys.stderr)
    return dbs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=500, help="calls per run")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--db", action="append", default=None,
                        help="memory, sqlite, or a PostgreSQL server URL")
    parser.add_argument("--note", default="", help="a line added under the table")
    parser.add_argument("--out", default=None)
    parser.add_argument("--md", default=None)
    args = parser.parse_args()
    report: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
                   f"{platform.python_version()}",
        "load_average": load_average(), "n": args.n, "repeats": args.repeats,
        "note": args.note}
    with tempfile.TemporaryDirectory(prefix="plait-journalbench-") as tmpdir, \
            store_urls(args.db or default_dbs(), Path(tmpdir)) as urls:
        rows = asyncio.run(measure(urls, args.n, args.repeats))
    report["rows"] = list(rows.values())
    for row in report["rows"]:
        print(f"{row['store']}: {row['journal_us_median']:.1f} µs per journaled call "
              f"(range {row['journal_us_min']:.1f} - {row['journal_us_max']:.1f}), "
              f"target {row['target_us']}, met {row['met']}", file=sys.stderr)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    if args.md:
        Path(args.md).write_text(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
