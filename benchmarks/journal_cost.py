"""The cost of one journaled call (``await ctx.run(name, fn)``) over a plain call, per
store.

    python benchmarks/journal_cost.py [--n 500] [--repeats 9] [--db URL ...]
        [--out FILE.json] [--md FILE.md]

Each run is ``await wf.run_async({"n": N, "journal": ...}, db=URL)`` of a one-step
workflow (``plait_agent.cost_workflow``) whose python step makes N calls of an async
function returning ``{"ok": 1}``: ``await ctx.run(f"c{i}", ping)`` (journaled: the
result committed before it returns) or ``await ping()`` (plain).  The step times its own
loop, so run start-up is not counted.  Stores and the two kinds are interleaved
(memory, SQLite, PostgreSQL; plain then journaled, then the other way round on the next
repeat), after one untimed warm-up of each.  Per store and repeat, the cost of a
journaled call is (journaled seconds - plain seconds) / N; the report gives its median
and its range over the repeats, and the part of it that was this process's CPU time
(``time.process_time``: every thread of the process; not the database server's), which
a loaded machine inflates less than the clock.

The floor, measured in the same process right after each store's runs of a repeat: N
times the statement that stores a call's result, without plait, on a connection held
open: ``INSERT ... ON CONFLICT DO NOTHING`` committed on its own (SQLite: ``BEGIN
IMMEDIATE``, the insert, ``COMMIT`` on a file of its own in WAL mode with the store's
``synchronous``; PostgreSQL: psycopg's async connection in autocommit, in a database of
its own on the same server), and the same preceded by a point ``SELECT`` of the name.
The report gives a journaled call's cost over each floor of the same repeat (median and
range): the load of a shared machine moves both alike, their ratio much less.

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
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
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


FLOOR_TABLE = ("CREATE TABLE IF NOT EXISTS floor_calls (run integer NOT NULL, "
               "step_id text NOT NULL, name text NOT NULL, value text NOT NULL, "
               "attempt integer NOT NULL, at double precision NOT NULL, "
               "UNIQUE (run, step_id, name))")
FLOOR_VALUE = json.dumps({"ok": 1})


def sqlite_floor(path: Path, synchronous: str) -> Callable[[int, str, bool], Awaitable[float]]:
    """N inserts of a call's result, each committed on its own (after a point read of the
    name when ``read`` is set), on one held connection in WAL mode."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute(FLOOR_TABLE)

    async def floor(n: int, tag: str, read: bool) -> float:
        started = time.perf_counter()
        for i in range(n):
            name = f"{tag}-c{i}"
            if read:
                conn.execute("SELECT value FROM floor_calls WHERE run = 1 AND step_id = 's' "
                             "AND name = ?", (name,)).fetchone()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO floor_calls VALUES (1, 's', ?, ?, 1, ?) "
                         "ON CONFLICT DO NOTHING", (name, FLOOR_VALUE, time.time()))
            conn.execute("COMMIT")
        return time.perf_counter() - started

    return floor


async def pg_floor(url: str) -> tuple[Any, Callable[[int, str, bool], Awaitable[float]]]:
    """The same through psycopg's async connection in autocommit (every statement is
    its own transaction, committed with the server's fsync)."""
    import psycopg

    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    await conn.execute(FLOOR_TABLE)

    async def floor(n: int, tag: str, read: bool) -> float:
        started = time.perf_counter()
        for i in range(n):
            name = f"{tag}-c{i}"
            if read:
                await (await conn.execute(
                    "SELECT value FROM floor_calls WHERE run = 1 AND step_id = 's' "
                    "AND name = %s", (name,))).fetchone()
            await conn.execute("INSERT INTO floor_calls VALUES (1, 's', %s, %s, 1, %s) "
                               "ON CONFLICT DO NOTHING", (name, FLOOR_VALUE, time.time()))
        return time.perf_counter() - started

    return conn, floor


Samples = dict[str, list[float]]  # plain, journal, plain_cpu, journal_cpu, floor_write,
#                                    floor_read_write -> seconds


async def measure(urls: dict[str, str], n: int, repeats: int,
                  floor_dir: Path | None = None) -> dict[str, Any]:
    """Interleaved runs per store (see the module docstring); the floors of SQLite and
    PostgreSQL too (SQLite's in ``floor_dir``, the directory of the store's file by
    default)."""
    wf = cost_workflow()
    samples: dict[str, Samples] = {
        k: {"plain": [], "journal": [], "plain_cpu": [], "journal_cpu": []} for k in urls}
    async with contextlib.AsyncExitStack() as stack:
        floors = await open_floors(urls, floor_dir, stack)
        for kind, url in urls.items():  # warm-up: first opens, migrations, caches
            await one(wf, url, n, False)
            await one(wf, url, n, True)
            if kind in floors:
                await floors[kind](n, "warm", True)
        for r in range(repeats):
            kinds = list(urls)[r % len(urls):] + list(urls)[:r % len(urls)]
            for kind in kinds:
                await one_repeat(wf, urls[kind], n, r, samples[kind], floors.get(kind))
            print(f"repeat {r + 1}/{repeats}: " + ", ".join(
                f"{k} {per_call_us(s, n)[-1]:.1f} µs" for k, s in samples.items()),
                file=sys.stderr)
    return {kind: summary(kind, s, n) for kind, s in samples.items()}


Floor = Callable[[int, str, bool], Awaitable[float]]


async def open_floors(urls: dict[str, str], floor_dir: Path | None,
                      stack: contextlib.AsyncExitStack) -> dict[str, Floor]:
    floors: dict[str, Floor] = {}
    if "sqlite" in urls:
        path = Path(urls["sqlite"].split("sqlite:///", 1)[1].split("?", 1)[0])
        synchronous = "FULL" if "synchronous=full" in urls["sqlite"].lower() else "NORMAL"
        floors["sqlite"] = sqlite_floor((floor_dir or path.parent) / "floor.db", synchronous)
    if "postgresql" in urls:
        conn, floors["postgresql"] = await pg_floor(urls["postgresql"])
        stack.push_async_callback(conn.close)
    return floors


async def one_repeat(wf: Workflow, url: str, n: int, r: int, s: Samples,
                     floor: Floor | None) -> None:
    """One repeat on one store: plain and journaled (in turn first), then its floors."""
    order = (False, True) if r % 2 == 0 else (True, False)
    for journal in order:
        seconds, cpu = await one(wf, url, n, journal)
        key = "journal" if journal else "plain"
        s[key].append(seconds)
        s[f"{key}_cpu"].append(cpu)
    if floor is not None:
        s.setdefault("floor_write", []).append(await floor(n, f"r{r}w", False))
        s.setdefault("floor_read_write", []).append(await floor(n, f"r{r}rw", True))


def per_call_us(s: Samples, n: int, cpu: bool = False) -> list[float]:
    """Per repeat: what a journaled call cost over a plain one, in µs."""
    plain, journal = (s["plain_cpu"], s["journal_cpu"]) if cpu else (s["plain"], s["journal"])
    return [(j - p) / n * 1e6 for p, j in zip(plain, journal, strict=True)]


def summary(kind: str, s: Samples, n: int) -> dict[str, Any]:
    cost, cpu = per_call_us(s, n), per_call_us(s, n, cpu=True)
    target = TARGETS_US.get(kind)
    median = statistics.median(cost)
    row: dict[str, Any] = {
        "store": kind, "n": n, "repeats": len(cost),
        "journal_us_median": median, "journal_us_min": min(cost),
        "journal_us_max": max(cost), "journal_cpu_us_median": statistics.median(cpu),
        "plain_us_median": statistics.median(s["plain"]) / n * 1e6,
        "floor_us_median": None, "floor_read_us_median": None,
        "samples_us": cost, "samples_cpu_us": cpu, "target_us": target,
        "met": None if target is None else median < target}
    for key, name in (("floor_write", "floor"), ("floor_read_write", "floor_read")):
        if key in s:
            floor = [f / n * 1e6 for f in s[key]]
            ratios = [c / f for c, f in zip(cost, floor, strict=True)]
            row.update({f"{name}_us_median": statistics.median(floor),
                        f"{name}_samples_us": floor,
                        f"{name}_ratio_median": statistics.median(ratios),
                        f"{name}_ratio_min": min(ratios), f"{name}_ratio_max": max(ratios)})
    return row


def ratio_cell(row: dict[str, Any], name: str) -> str:
    if row.get(f"{name}_us_median") is None:
        return "—"
    return (f"{row[f'{name}_us_median']:.0f} (× {row[f'{name}_ratio_median']:.2f}, "
            f"{row[f'{name}_ratio_min']:.2f} – {row[f'{name}_ratio_max']:.2f})")


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "# The cost of a journaled call",
        "",
        "Generated by `make bench-agents` (`benchmarks/journal_cost.py`); do not edit.",
        "",
        f"- date: {report['date']}",
        f"- machine: {report['machine']}",
        f"- load average before the run (1, 5, 15 min): {report['load_average']}"
        + (f"; after it: {report['load_average_after']}" if report.get("load_average_after")
           else ""),
        f"- what: a python step making {report['n']} calls of an async function "
        f"returning `{{\"ok\": 1}}`, `await ctx.run(f\"c{{i}}\", fn)` against plain "
        f"`await fn()`, each run started with `await wf.run_async(input, db=URL)`; "
        f"cost = (journaled - plain) / {report['n']}, {report['repeats']} interleaved "
        f"repeats per store",
        "",
        "Floors: the statements alone, without plait, in the same process between the "
        "runs of each repeat, on a connection held open (see `benchmarks/journal_cost.py`)"
        "; × is a journaled call's cost over the floor of the same repeat: median, "
        "range over the repeats.",
        "",
        "| store | journaled call over a plain one (µs, median) | range over repeats (µs) "
        "| of which this process's CPU (µs) | plain call (µs) | floor: insert + commit "
        "(µs; × median, range) | floor: point read, insert + commit (µs; × median, "
        "range) | target | met |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report["rows"]:
        target = "—" if row["target_us"] is None else f"< {row['target_us']:.0f} µs"
        met = "—" if row["met"] is None else ("yes" if row["met"] else "**no**")
        lines.append(
            f"| {row['store']} | {row['journal_us_median']:.1f} | "
            f"{row['journal_us_min']:.1f} – {row['journal_us_max']:.1f} | "
            f"{row['journal_cpu_us_median']:.1f} | {row['plain_us_median']:.2f} | "
            f"{ratio_cell(row, 'floor')} | {ratio_cell(row, 'floor_read')} | {target} | "
            f"{met} |")
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
    report["load_average_after"] = load_average()
    report["rows"] = list(rows.values())
    for row in report["rows"]:
        print(f"{row['store']}: {row['journal_us_median']:.1f} µs per journaled call "
              f"(range {row['journal_us_min']:.1f} - {row['journal_us_max']:.1f}), "
              f"target {row['target_us']}, met {row['met']}; over the floors: "
              f"{ratio_cell(row, 'floor')}, {ratio_cell(row, 'floor_read')}", file=sys.stderr)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    if args.md:
        Path(args.md).write_text(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
