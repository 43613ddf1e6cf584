"""``plait serve`` under load: 200 clients polling run status while runs execute.

    python benchmarks/server_load.py [--seconds 20] [--clients 200] [--rate 5]
        [--db sqlite|postgresql://...] [--py-spy FILE] [--out FILE] [--md FILE]

For each store (a SQLite file in a temporary directory, and PostgreSQL at
PLAIT_TEST_DATABASE_URL's server when it answers: a fresh database, the server also
acting as its worker) a real ``plait serve`` process is started on a free loopback port,
from this directory (its python steps are ``cluster_steps.body``, allowed by
PLAIT_ALLOWED_MODULES).  The benchmark registers a 4-step workflow (a -> b, c -> d: each
step takes its parents' outputs and returns a JSON object) with ``POST /api/workflows``,
then for ``--seconds``:

- a submitter starts ``--rate`` runs per second with ``POST /api/runs``;
- ``--clients`` concurrent clients (each with its own keep-alive HTTP/1.1
  connection) poll without pause: ``GET /api/runs/{id}`` of one of the 50 newest runs, and
  every fifth request ``GET /api/runs?limit=20``.

Reported: requests per second, p50/p95/p99 latency (per route and overall), errors
(any non-2xx answer or exception: must be 0), the runs started and the runs completed
while the load lasted (a run that failed is an error too).  The load generator runs on
the same host, so the numbers are those of the pair on this machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

PLAIT = str(Path(sys.executable).with_name("plait"))
WORKFLOW: dict[str, Any] = {
    "name": "polled",
    "input": {"type": "object", "properties": {"n": {"type": "integer"}}},
    "steps": [
        {"id": "a", "type": "python", "call": "cluster_steps:body"},
        {"id": "b", "type": "python", "call": "cluster_steps:body", "depends_on": ["a"]},
        {"id": "c", "type": "python", "call": "cluster_steps:body", "depends_on": ["a"]},
        {"id": "d", "type": "python", "call": "cluster_steps:body",
         "depends_on": ["b", "c"]},
    ],
    "output": "{{ steps.d.output }}",
}
LIST_EVERY = 5  # every fifth request of a client lists runs
RECENT = 50  # clients poll one of the newest RECENT runs


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pg_reachable(url: str) -> bool:
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=3):
            return True
    except psycopg.Error:
        return False


@contextlib.contextmanager
def server(db: str, log: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A ``plait serve`` process on a free loopback port; SIGTERM at the end."""
    port = free_port()
    env = dict(os.environ, PLAIT_ALLOWED_MODULES="cluster_steps", PYTHONPATH=str(HERE))
    env.pop("PLAIT_API_TOKEN", None)
    with log.open("wb") as out:
        proc = subprocess.Popen([PLAIT, "serve", "--db", db, "--port", str(port)],
                                cwd=HERE, env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"plait serve exited {proc.returncode}: "
                                   f"{log.read_text()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("plait serve did not answer /healthz in 30 s")
            time.sleep(0.1)
        yield base, proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass
class Load:
    latencies: dict[str, list[float]] = field(default_factory=lambda: {"get": [], "list": []})
    errors: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    submit_latencies: list[float] = field(default_factory=list)


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


async def submit(client: httpx.AsyncClient, load: Load, n: int) -> None:
    started = time.perf_counter()
    try:
        r = await client.post("/api/runs", json={"workflow": "polled", "input": {"n": n}})
        if r.status_code != 201:
            load.errors.append(f"POST /api/runs: {r.status_code} {r.text[:200]}")
        else:
            load.runs.append(r.json()["run_id"])
            load.submit_latencies.append(time.perf_counter() - started)
    except httpx.HTTPError as exc:
        load.errors.append(f"POST /api/runs: {type(exc).__name__}: {exc}")


async def submitter(client: httpx.AsyncClient, load: Load, rate: float,
                    stop: asyncio.Event) -> None:
    """``rate`` POST /api/runs a second, each on time whatever the previous one takes."""
    interval = 1.0 / rate
    next_at = time.monotonic()
    n = 0
    async with asyncio.TaskGroup() as tg:
        while not stop.is_set():
            tg.create_task(submit(client, load, n))
            n += 1
            next_at += interval
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.0, next_at - time.monotonic()))


class Connection:
    """One keep-alive HTTP/1.1 connection of a polling client.  The pollers speak
    HTTP/1.1 over asyncio streams themselves: httpx costs several times the CPU per
    request, and the load generator shares the host with the server, so with httpx it
    measured itself more than the server."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def get(self, path: str) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        self.writer.write(f"GET {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                          f"Accept: application/json\r\n\r\n".encode())
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length = None
        close = False
        for line in lines[1:]:
            name, _, value = line.partition(":")
            key = name.strip().lower()
            if key == "content-length":
                length = int(value)
            elif key == "connection" and value.strip().lower() == "close":
                close = True
        if length is None:
            raise ConnectionError(f"no Content-Length in the answer to GET {path}")
        body = await self.reader.readexactly(length)
        if close:
            await self.close()
        return status, body

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(OSError):
                await self.writer.wait_closed()
        self.reader = self.writer = None


async def poller(base: str, load: Load, stop: asyncio.Event, seed: int) -> None:
    rng = random.Random(seed)
    host, port = base.removeprefix("http://").rsplit(":", 1)
    connection = Connection(host, int(port))
    i = seed
    try:
        while not stop.is_set():
            i += 1
            if i % LIST_EVERY == 0 or not load.runs:
                kind, url = "list", "/api/runs?limit=20"
            else:
                kind, url = "get", f"/api/runs/{rng.choice(load.runs[-RECENT:])}"
            started = time.perf_counter()
            try:
                status, body = await connection.get(url)
                took = time.perf_counter() - started
                if not 200 <= status < 300:
                    load.errors.append(f"GET {url}: {status} {body[:200]!r}")
                elif not stop.is_set():
                    load.latencies[kind].append(took)
            except (OSError, ValueError, asyncio.IncompleteReadError,
                    asyncio.LimitOverrunError) as exc:
                load.errors.append(f"GET {url}: {type(exc).__name__}: {exc}")
                await connection.close()
    finally:
        await connection.close()


async def outcomes(client: httpx.AsyncClient, runs: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for run_id in runs:
        r = await client.get(f"/api/runs/{run_id}")
        status = r.json()["status"] if r.status_code == 200 else f"http {r.status_code}"
        counts[status] = counts.get(status, 0) + 1
    return counts


async def measure(base: str, *, seconds: float, clients: int, rate: float) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=64)
    timeout = httpx.Timeout(30.0)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=timeout) as client:
        r = await client.post("/api/workflows", json=WORKFLOW)
        if r.status_code not in (200, 201, 409):
            raise RuntimeError(f"registering the workflow: {r.status_code} {r.text}")
        load = Load()
        stop = asyncio.Event()
        # a first run, so pollers have something to read from their first request
        first = await client.post("/api/runs", json={"workflow": "polled", "input": {"n": -1}})
        load.runs.append(first.json()["run_id"])
        tasks = [asyncio.create_task(submitter(client, load, rate, stop))]
        tasks += [asyncio.create_task(poller(base, load, stop, i)) for i in range(clients)]
        started = time.perf_counter()
        await asyncio.sleep(seconds)
        stop.set()
        elapsed = time.perf_counter() - started
        await asyncio.gather(*tasks)
        # runs completed while the load lasted: those whose end the store recorded
        # before ``stop``; then every run is waited for (they must all complete)
        ended_by = time.time()
        statuses = await outcomes(client, load.runs)
        completed_in_window = 0
        for run_id in load.runs:
            body = (await client.get(f"/api/runs/{run_id}")).json()
            if body["status"] == "completed" and body["finished_at"] and \
                    datetime.fromisoformat(body["finished_at"]).timestamp() <= ended_by:
                completed_in_window += 1
        deadline = time.monotonic() + 60
        while any(s in statuses for s in ("pending", "running")) \
                and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            statuses = await outcomes(client, load.runs)
    failed = {s: n for s, n in statuses.items() if s != "completed"}
    if failed:
        load.errors.append(f"runs not completed: {failed}")
    every = load.latencies["get"] + load.latencies["list"]
    ms = 1000.0

    def summary(values: list[float]) -> dict[str, Any]:
        return {"requests": len(values), "rps": round(len(values) / elapsed, 1),
                "p50_ms": round(percentile(values, 50) * ms, 2),
                "p95_ms": round(percentile(values, 95) * ms, 2),
                "p99_ms": round(percentile(values, 99) * ms, 2),
                "mean_ms": round(statistics.fmean(values) * ms, 2) if values else None}

    return {"seconds": round(elapsed, 2), "clients": clients, "rate": rate,
            "all": summary(every), "get_run": summary(load.latencies["get"]),
            "list_runs": summary(load.latencies["list"]),
            "submit": summary(load.submit_latencies),
            "errors": len(load.errors), "error_samples": load.errors[:5],
            "runs_started": len(load.runs), "runs_completed_during_load":
                completed_in_window, "final_statuses": statuses}


def run_one(db_kind: str, db: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    log = tmp / f"serve-{db_kind}.log"
    with server(db, log) as (base, proc):
        profiler = None
        if args.py_spy:
            out = Path(args.py_spy)
            out = out.with_name(f"{out.stem}-{db_kind}{out.suffix}")
            profiler = subprocess.Popen(
                [str(Path(sys.executable).with_name("py-spy")), "record", "--pid",
                 str(proc.pid), "--duration", str(int(args.seconds) + 2), "--rate", "200",
                 "--format", "speedscope" if out.suffix == ".json" else "flamegraph",
                 "--output", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        result = asyncio.run(measure(base, seconds=args.seconds, clients=args.clients,
                                     rate=args.rate))
        if profiler is not None:
            profiler.wait(timeout=60)
    result["store"] = db_kind
    return result


def load_average() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "# plait serve under load",
        "",
        "Generated by `make bench-server` (`benchmarks/server_load.py`); do not edit.",
        "",
        f"- date: {report['date']}",
        f"- machine: {report['machine']}",
        f"- load average before the run (1, 5, 15 min): {report['load_average']}",
        f"- load: {report['clients']} concurrent clients polling `GET /api/runs/{{id}}` "
        f"(4 of 5 requests) and `GET /api/runs?limit=20` (1 of 5) without pause for "
        f"{report['seconds']} s, while runs of a 4-step workflow (python steps) are "
        f"started at {report['rate']:g}/s with `POST /api/runs`; one `plait serve` "
        f"process, the load generator on the same host (loopback)",
        "",
        "| store | requests/s | p50 (ms) | p95 (ms) | p99 (ms) | GET run p99 (ms) | "
        "GET list p99 (ms) | errors | runs started | runs completed during load |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report["rows"]:
        a = row["all"]
        lines.append(
            f"| {row['store']} | {a['rps']:.0f} | {a['p50_ms']:.1f} | {a['p95_ms']:.1f} | "
            f"{a['p99_ms']:.1f} | {row['get_run']['p99_ms']:.1f} | "
            f"{row['list_runs']['p99_ms']:.1f} | {row['errors']} | {row['runs_started']} | "
            f"{row['runs_completed_during_load']} |")
    lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--rate", type=float, default=5.0, help="runs started per second")
    parser.add_argument("--db", action="append", default=None,
                        help="'sqlite' (a temporary file) or a PostgreSQL server URL "
                             "(a fresh database on it); default: sqlite, and "
                             "PLAIT_TEST_DATABASE_URL when it answers")
    parser.add_argument("--py-spy", default=None,
                        help="profile the server with py-spy into FILE (.svg or .json)")
    parser.add_argument("--out", default=None)
    parser.add_argument("--md", default=None)
    args = parser.parse_args()
    dbs = args.db
    if dbs is None:
        dbs = ["sqlite"]
        pg = os.environ.get("PLAIT_TEST_DATABASE_URL")
        if pg and pg_reachable(pg):
            dbs.append(pg)
        else:
            print("PostgreSQL not reachable (PLAIT_TEST_DATABASE_URL): SQLite only",
                  file=sys.stderr)
    report: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
                   f"{platform.python_version()}",
        "load_average": load_average(), "seconds": args.seconds, "clients": args.clients,
        "rate": args.rate, "rows": []}
    failures = 0
    with tempfile.TemporaryDirectory(prefix="plait-serverbench-") as tmpdir:
        tmp = Path(tmpdir)
        for db in dbs:
            if db == "sqlite":
                row = run_one("sqlite", f"sqlite:///{tmp}/serve.db", args, tmp)
            else:
                from cluster import fresh_database

                with fresh_database(db, "plait_serverbench") as url:
                    row = run_one("postgresql", url, args, tmp)
            report["rows"].append(row)
            failures += row["errors"]
            a = row["all"]
            print(f"{row['store']}: {a['rps']:.0f} req/s, p50 {a['p50_ms']:.1f} ms, "
                  f"p95 {a['p95_ms']:.1f} ms, p99 {a['p99_ms']:.1f} ms, "
                  f"{row['errors']} errors, {row['runs_started']} runs started, "
                  f"{row['runs_completed_during_load']} completed during load",
                  file=sys.stderr)
            for sample in row["error_samples"]:
                print(f"  error: {sample}", file=sys.stderr)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    if args.md:
        Path(args.md).write_text(markdown(report))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
