"""What one completed step costs the database: statements, rows, bytes, WAL and CPU, on
PostgreSQL with ``plait worker`` processes and on SQLite in one process.

    python benchmarks/step_cost.py [--db postgresql://postgres@127.0.0.1:5432/test]
        [--runs 25] [--single-runs 200] [--workers 4] [--concurrency 32]
        [--log /var/log/postgresql/postgresql-15-main.log] [--out FILE] [--md FILE]

Two workflows, both of ``cluster_steps.body`` python steps (each takes its parents'
outputs and returns a small JSON object): 40 steps in 4 layers of 10, each step
depending on every step of the layer above (``cluster.layers``: ``--runs`` runs), and
one step (``--single-runs`` runs).

PostgreSQL, per workflow, on databases of their own (created and dropped here):

1. **counters**: ``--workers`` ``plait worker`` processes start and idle 5 s; then the
   runs are stored from this process through one store connection (what ``plait run
   FILE --detach`` does per run: store, remember the source, NOTIFY) while the workers
   are stopped (SIGSTOP), then they go on (SIGCONT) and run them all.  Deltas from before the workers start to after they stop of
   ``pg_stat_database`` (commits, rollbacks; autovacuum's transactions count there
   too: its runs are reported) and ``pg_stat_user_tables`` (rows inserted, updated
   (HOT or not), deleted; sequential and index scans), of ``pg_total_relation_size``
   per table (with its indexes and TOAST), and of ``pg_current_wal_lsn()`` (the whole
   server's WAL: other databases write too) with the part of it whose records touch
   this database or belong to its transactions (``pg_walinspect``, when its WAL is
   still there).  CPU, from the end of the idle time: every client backend of the
   database is read from ``/proc/PID/stat`` each 0.2 s and at the end, and each worker
   process (with its children) then and just before it is stopped.  The harness's own
   waiting (one ``SELECT`` per 0.2 s, sequential scan forced) and snapshot connections
   are counted and subtracted from commits and the ``runs`` table's scans.
2. **statements**: the same again on another fresh database with
   ``log_min_duration_statement = 0`` set on that database only: every statement the
   server executed for it from the end of the idle time is in the server log
   (``--log``, readable by this user), one ``statement:`` (simple protocol) or
   ``execute`` (extended protocol) line each.  Parse and bind lines are not counted;
   the harness's own connections are left out by process id.  Statements are grouped
   by their first keyword and first table, and named by their leading comment.

The workers' start and 5 s idle with no runs is measured once the same way and
reported: the counters of every measurement include it.

SQLite (a fresh file): the same workflows run in this process (``Workflow.run_async``,
20 runs at a time); every connection's ``set_trace_callback`` counts statements;
rows per table are counted before and after (net rows: the engine deletes little);
bytes per table from ``dbstat`` after a WAL checkpoint; CPU is this process's
(engine, step bodies and SQLite together).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import psycopg  # noqa: E402
from cluster import PLAIT, definition, layers  # noqa: E402
from harness import log  # noqa: E402
from step_cost_report import report  # noqa: E402
from workloads import Workload  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
WARM_S = 5.0  # the workers' start and idle before the runs are stored
FORCE_SEQ = "-c enable_indexscan=off -c enable_bitmapscan=off -c enable_indexonlyscan=off"


def single() -> Workload:
    return Workload(name="single", steps=("only",), parents={"only": ()})


# ---------------------------------------------------------------- processes

def proc_cpu(pid: int, children: bool = False) -> float | None:
    """utime + stime (+ the reaped children's) of ``pid`` in seconds; None if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / TICK


def tree_cpu(pid: int) -> float:
    """A worker and its live descendants (and what they reaped)."""
    total = proc_cpu(pid, children=True) or 0.0
    for child in Path("/proc").glob("[0-9]*"):
        try:
            if int((child / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                total += tree_cpu(int(child.name))
        except (OSError, ValueError):
            continue
    return total


class Workers:
    """``n`` ``plait worker`` processes; their CPU is read just before they stop."""

    def __init__(self, url: str, n: int, concurrency: int) -> None:
        self.procs = [subprocess.Popen(
            [PLAIT, "worker", "--db", url, "--concurrency", str(concurrency),
             "--import", "cluster_steps"], cwd=HERE, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(n)]
        self.cpu_s = 0.0

    def pause(self, stop: bool) -> None:
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGSTOP if stop else signal.SIGCONT)

    def cpu(self) -> float:
        return sum(tree_cpu(p.pid) for p in self.procs)

    def stop(self) -> None:
        self.cpu_s = self.cpu()
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


# ---------------------------------------------------------------- PostgreSQL

def with_db(url: str, name: str) -> str:
    return url.rsplit("/", 1)[0] + "/" + name


def admin(server: str, sql: str) -> None:
    with psycopg.connect(with_db(server, "postgres"), autocommit=True) as conn:
        conn.execute(sql)


@contextlib.contextmanager
def fresh_database(server: str, logged: bool) -> Iterator[str]:
    name = f"plait_stepcost_{uuid.uuid4().hex[:10]}"
    admin(server, f'CREATE DATABASE "{name}"')
    try:
        url = with_db(server, name)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        from plait.store import open_store

        async def migrate() -> None:
            store = open_store(url)
            await store.open()
            await store.close()

        asyncio.run(migrate())  # the schema exists before anything is counted
        time.sleep(1.0)  # the migration's backend has exited and flushed its statistics
        if logged:
            admin(server, f'ALTER DATABASE "{name}" SET log_min_duration_statement = 0')
            admin(server, f'ALTER DATABASE "{name}" SET log_parameter_max_length = 0')
        yield url
    finally:
        admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def snapshot(url: str) -> dict[str, Any]:
    """Counters and sizes of ``url``'s database, read in one transaction."""
    with psycopg.connect(url) as conn:
        db = conn.execute(
            "SELECT xact_commit, xact_rollback, (SELECT oid FROM pg_database "
            "WHERE datname = current_database()), pg_current_wal_lsn()::text, "
            "(SELECT sum(xact_commit) FROM pg_stat_database WHERE datname <> "
            "current_database()), (SELECT sum(autovacuum_count + autoanalyze_count) "
            "FROM pg_stat_all_tables) "
            "FROM pg_stat_database WHERE datname = current_database()").fetchone()
        assert db is not None
        tables = {r[0]: {"ins": r[1], "upd": r[2], "hot_upd": r[3], "del": r[4],
                         "seq_scan": r[5], "idx_scan": r[6], "bytes": r[7]}
                  for r in conn.execute(
                      "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del, "
                      "seq_scan, coalesce(idx_scan, 0), pg_total_relation_size(relid) "
                      "FROM pg_stat_user_tables WHERE schemaname = 'public'")}
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()
        conn.commit()
    return {"commits": db[0], "rollbacks": db[1], "oid": db[2], "lsn": db[3],
            "pid": pid[0] if pid else 0, "autovacuums": int(db[5] or 0),
            "other_commits": int(db[4] or 0), "tables": tables}


def wal_of_database(url: str, oid: int, start: str, end: str) -> dict[str, int] | None:
    """WAL records between two LSNs that touch ``oid``'s relations or belong to the
    transactions that did; None when that WAL is gone already."""
    sql = f"""
        WITH w AS (SELECT * FROM pg_get_wal_records_info(
                     '{start}', least('{end}'::pg_lsn, pg_current_wal_flush_lsn()))),
             mine AS (SELECT DISTINCT xid FROM w WHERE xid <> '0'
                      AND block_ref LIKE '%rel %/{oid}/%')
        SELECT count(*), coalesce(sum(record_length), 0), coalesce(sum(fpi_length), 0)
          FROM w WHERE block_ref LIKE '%rel %/{oid}/%' OR xid IN (SELECT xid FROM mine)"""
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(sql).fetchone()  # type: ignore[arg-type]
    except psycopg.Error as exc:
        log(f"pg_walinspect: {exc}")
        return None
    assert row is not None
    return {"records": int(row[0]), "bytes": int(row[1]), "fpi_bytes": int(row[2])}


class Monitor:
    """One autocommit connection: waits for the runs (one statement per poll, a
    sequential scan of ``runs``) and samples the CPU of the database's backends."""

    def __init__(self, url: str) -> None:
        self.conn = psycopg.connect(url, autocommit=True, options=FORCE_SEQ)
        row = self.conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        self.pid, self.polls, self.scans = int(row[0]), 1, 0
        self.cpu: dict[int, float] = {}

    def poll(self, run_ids: list[str] | None) -> int:
        ids = ",".join(f"'{r}'" for r in run_ids or [])  # plait's run ids: hex only
        left = f"(SELECT count(*) FROM runs WHERE status NOT IN ('completed', 'failed', " \
               f"'cancelled') AND run_id IN ({ids}))" if ids else "0"
        row = self.conn.execute(
            f"SELECT {left}, array(SELECT pid FROM pg_stat_activity WHERE datname = "
            "current_database() AND backend_type = 'client backend' "
            "AND pid <> pg_backend_pid())").fetchone()
        assert row is not None
        self.polls += 1
        self.scans += bool(ids)
        for pid in row[1]:
            cpu = proc_cpu(pid)
            if cpu is not None:
                self.cpu[pid] = cpu
        return int(row[0])

    def close(self) -> None:
        self.conn.close()


def submit(url: str, path: Path, runs: int, monitor: Monitor) -> tuple[list[str], float]:
    """Store ``runs`` runs as ``plait run PATH --db URL --detach`` does, on one store."""
    from plait.cli.loading import load_target
    from plait.cli.session import _submit
    from plait.runtime import control
    from plait.runtime.engine import Engine
    from plait.runtime.notify import announce
    from plait.store import open_store

    async def go() -> list[str]:
        store = open_store(url)
        await store.open()
        try:
            checked = (await load_target(str(path), store)).validate()
            engine = Engine(store)
            ids = []
            for _ in range(runs):
                run = await _submit(engine, checked, {}, str(path))
                await control.remember_source(store, run.run_id, path)
                await announce(store, run.run_id)
                ids.append(run.run_id)
            monitor.poll(None)  # the store's backends, before they go
            engine.close()
            return ids
        finally:
            await store.close()

    cpu = time.process_time()
    ids = asyncio.run(go())
    return ids, time.process_time() - cpu


def window(url: str, work: Workload, runs: int, workers: int, concurrency: int,
           tmp: Path, log_path: Path | None) -> dict[str, Any]:
    """One measurement: submit, execute; counters (and log offsets) around each."""
    path = tmp / f"{work.name}.yaml"
    path.write_text(definition(work, f"cost-{work.name}"))
    out: dict[str, Any] = {"runs": runs, "steps": runs * len(work.steps)}
    s0 = snapshot(url)
    monitor = Monitor(url)
    cluster = Workers(url, workers, concurrency)
    try:
        began = time.monotonic()
        while time.monotonic() - began < WARM_S:  # the workers start, connect, idle
            monitor.poll(None)
            time.sleep(0.2)
        monitor.poll(None)
        # the workers are stopped (SIGSTOP) while the runs are stored, so that every
        # run is ready when they go on, as in benchmarks/cluster.py, and the storing
        # and the running are counted apart
        cluster.pause(True)
        server_base, workers_base = dict(monitor.cpu), cluster.cpu()
        offset = log_path.stat().st_size if log_path else 0
        ids, out["submit_client_cpu_s"] = submit(url, path, runs, monitor)
        mid = log_path.stat().st_size if log_path else 0
        server_mid = dict(monitor.cpu)
        cluster.pause(False)
        began = time.monotonic()
        while monitor.poll(ids):
            if time.monotonic() - began > 600:
                raise RuntimeError("runs unfinished after 600 s")
            time.sleep(0.2)
        out["execute_s"] = round(time.monotonic() - began, 2)
        monitor.poll(None)
    finally:
        cluster.pause(False)
        cluster.stop()
    out["server_submit_cpu_s"] = sum(v - server_base.get(pid, 0.0)
                                     for pid, v in server_mid.items())
    out["server_cpu_s"] = sum(v - server_base.get(pid, 0.0) for pid, v in monitor.cpu.items())
    out["workers_cpu_s"] = cluster.cpu_s - workers_base
    out["backends_at_start"] = len(server_base)
    out["backends_started_in_window"] = len(set(monitor.cpu) - set(server_base))
    excluded = {monitor.pid, s0["pid"]}
    monitor.close()
    time.sleep(1.0)  # exiting backends flush their statistics
    s1 = snapshot(url)
    end = log_path.stat().st_size if log_path else 0
    excluded.add(s1["pid"])
    out["counters"] = deltas(s0, s1, monitor.polls, monitor.scans)
    out["wal_of_database"] = wal_of_database(url, s0["oid"], s0["lsn"], s1["lsn"])
    with psycopg.connect(url) as conn:
        bad = conn.execute("SELECT count(*) FROM runs WHERE status <> 'completed'")\
            .fetchone()
        done = conn.execute("SELECT count(*) FROM steps WHERE status = 'completed'")\
            .fetchone()
    if bad is None or done is None or bad[0] or done[0] != out["steps"]:
        raise RuntimeError(f"runs not completed: {bad}, steps completed {done}")
    if log_path:
        name = url.rsplit("/", 1)[1]
        out["statements_submit"] = statements(log_path, offset, mid, name, excluded)
        out["statements_execute"] = statements(log_path, mid, end, name, excluded)
    return out


def deltas(s0: dict[str, Any], s1: dict[str, Any], polls: int,
           scans: int) -> dict[str, Any]:
    """s1 - s0, less the harness's own: the first snapshot's transaction, the monitor's
    statements (one transaction each) and its sequential scans of ``runs``."""
    tables = {}
    for name, after in s1["tables"].items():
        before = s0["tables"].get(name, {})
        tables[name] = {k: after[k] - before.get(k, 0) for k in after}
    if "runs" in tables:
        tables["runs"]["seq_scan"] -= scans
    from_lsn = _lsn(s0["lsn"])
    return {"commits": s1["commits"] - s0["commits"] - polls - 1,
            "rollbacks": s1["rollbacks"] - s0["rollbacks"],
            "wal_bytes_server": _lsn(s1["lsn"]) - from_lsn,
            "other_databases_commits": s1["other_commits"] - s0["other_commits"],
            "autovacuum_and_analyze_runs": s1["autovacuums"] - s0["autovacuums"],
            "tables": tables}


def _lsn(text: str) -> int:
    high, low = text.split("/")
    return (int(high, 16) << 32) + int(low, 16)


LINE = re.compile(r"^\d{4}-\d\d-\d\d [\d:.]+ \w+ \[(\d+)\] (\S*)@(\S*) (\w+):\s+(.*)$")
STMT = re.compile(r"duration: [\d.]+ ms\s+(?:statement|execute [^:]*): (.*)$")
TABLE = re.compile(r"\b(?:FROM|INTO|UPDATE|JOIN)\s+\"?([a-z_]+)", re.I)


def statements(path: Path, start: int, end: int, db: str,
               excluded: set[int]) -> dict[str, Any]:
    """Statements the server logged for ``db`` between two byte offsets of its log."""
    with path.open("rb") as f:
        f.seek(start)
        text = f.read(end - start).decode(errors="replace")
    found: list[list[str]] = []
    pids: set[int] = set()
    current: list[str] | None = None
    for line in text.splitlines():
        m = LINE.match(line)
        if m is None:
            if current is not None and line.startswith(("\t", " ")):
                current.append(line.strip())
            continue
        current = None
        pid, database, level, message = int(m[1]), m[3], m[4], m[5]
        if database != db or pid in excluded or level != "LOG":
            continue
        s = STMT.match(message)
        if s:
            current = [s[1]]
            found.append(current)
            pids.add(pid)
    kinds: Counter[str] = Counter()
    texts: Counter[str] = Counter()
    for parts in found:
        kinds[describe(parts)] += 1
        texts[" ".join(" ".join(parts).split())[:160]] += 1
    return {"total": len(found), "connections": len(pids),
            "by_kind": dict(kinds.most_common()), "top": texts.most_common(15)}


def describe(lines: list[str]) -> str:
    """``VERB first_table: what its leading comment says`` (plait's statements open with
    a comment saying what they do)."""
    sql = " ".join(re.sub(r"--.*$", "", line) for line in lines)
    first = lines[0].strip() if lines else ""
    label = first.lstrip("-").strip().split(". ")[0][:70] if first.startswith("--") else ""
    kind = kind_of(" ".join(sql.split()))
    return f"{kind}: {label}" if label else kind


def kind_of(sql: str) -> str:
    words = sql.split()
    verb = words[0].upper() if words else "?"
    if verb in ("BEGIN", "COMMIT", "ROLLBACK", "LISTEN", "NOTIFY", "SET", "SAVEPOINT",
                "RELEASE"):
        return verb
    if verb == "WITH":  # the statement's own verb follows its CTEs
        tail = re.findall(r"\)\s*(SELECT|INSERT|UPDATE|DELETE)\b", sql, re.I)
        verb = "WITH+" + (tail[-1].upper() if tail else "?")
    table_match = TABLE.search(sql)
    return f"{verb} {table_match[1] if table_match else '-'}"


def pg_measure(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    result: dict[str, Any] = {}
    log_path = Path(args.log)
    readable = log_path.is_file() and os.access(log_path, os.R_OK)
    with fresh_database(args.db, logged=False) as url:
        s0 = snapshot(url)
        began = time.monotonic()
        idle = Workers(url, args.workers, args.concurrency)
        monitor = Monitor(url)
        while time.monotonic() - began < WARM_S:
            monitor.poll(None)
            time.sleep(0.2)
        monitor.poll(None)
        idle.stop()
        monitor.close()
        time.sleep(1.0)
        counters = deltas(s0, snapshot(url), monitor.polls, 0)
        result["workers_start_idle"] = {"seconds": WARM_S,
            "commits": counters["commits"], "workers_cpu_s": round(idle.cpu_s, 3),
            "server_cpu_s": round(sum(monitor.cpu.values()), 3)}
    for label, work, runs in (("layers40", layers(), args.runs),
                              ("single", single(), args.single_runs)):
        log(f"postgres {label}: {runs} runs, counters")
        with fresh_database(args.db, logged=False) as url:
            counted = window(url, work, runs, args.workers, args.concurrency, tmp, None)
        if readable:
            log(f"postgres {label}: {runs} runs, statement log")
            with fresh_database(args.db, logged=True) as url:
                logged = window(url, work, runs, args.workers, args.concurrency, tmp,
                                log_path)
            counted["statements_submit"] = logged["statements_submit"]
            counted["statements_execute"] = logged["statements_execute"]
            counted["statements_window_commits"] = logged["counters"]["commits"]
        result[label] = counted
    return result


# ---------------------------------------------------------------- SQLite

def sqlite_measure(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    import plait

    traced: Counter[str] = Counter()
    real_connect = sqlite3.connect

    def connect(*a: Any, **kw: Any) -> sqlite3.Connection:
        conn = real_connect(*a, **kw)
        conn.set_trace_callback(lambda sql: traced.update([sql]))
        return conn

    result: dict[str, Any] = {}
    for label, work, runs in (("layers40", layers(), args.runs),
                              ("single", single(), args.single_runs)):
        log(f"sqlite {label}: {runs} runs")
        path = tmp / f"{label}.db"
        spec = tmp / f"sqlite-{label}.yaml"
        spec.write_text(definition(work, f"cost-{work.name}"))
        wf = plait.Workflow.load(spec)
        url = f"sqlite:///{path}"

        async def run_all(n: int, wf: Any = wf, url: str = url) -> None:
            gate = asyncio.Semaphore(20)
            async with plait.connect(url) as db:
                async def one() -> None:
                    async with gate:
                        done = await wf.run_async(db=db)
                        if done.status != "completed":
                            raise RuntimeError(f"a run ended {done.status}")
                await asyncio.gather(*(one() for _ in range(n)))

        asyncio.run(run_all(0))
        rows0, sizes0, file0 = sqlite_sizes(path)
        traced.clear()
        sqlite3.connect = connect  # type: ignore[assignment]
        cpu, wall = time.process_time(), time.perf_counter()
        try:
            asyncio.run(run_all(runs))
        finally:
            sqlite3.connect = real_connect
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        counts = Counter(traced)
        rows1, sizes1, file1 = sqlite_sizes(path)
        kinds: Counter[str] = Counter()
        for sql, n in counts.items():
            kinds[describe(sql.splitlines())] += n
        result[label] = {
            "runs": runs, "steps": runs * len(work.steps), "cpu_s": round(cpu, 3),
            "wall_s": round(wall, 3), "statements": sum(counts.values()),
            "by_kind": dict(kinds.most_common()), "top": [(" ".join(k.split())[:160], n) for k, n in counts.most_common(15)],
            "file_bytes": file1 - file0,
            "tables": {t: {"rows": rows1[t] - rows0.get(t, 0),
                           "bytes": sizes1.get(t, 0) - sizes0.get(t, 0)} for t in rows1}}
    return result


def sqlite_sizes(path: Path) -> tuple[dict[str, int], dict[str, int], int]:
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND name NOT LIKE 'sqlite_%'")]
        rows = {n: conn.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] for n in names}
        sizes: Counter[str] = Counter()
        for tbl, size in conn.execute(
                "SELECT coalesce(m.tbl_name, d.name), sum(d.pgsize) FROM dbstat AS d "
                "LEFT JOIN sqlite_master AS m ON m.name = d.name GROUP BY 1"):
            sizes[tbl] += size
    finally:
        conn.close()
    return rows, dict(sizes), path.stat().st_size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", default=os.environ.get(
        "PLAIT_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test"))
    ap.add_argument("--runs", type=int, default=25, help="runs of the 40-step workflow")
    ap.add_argument("--single-runs", type=int, default=200,
                    help="runs of the 1-step workflow")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--log", default="/var/log/postgresql/postgresql-15-main.log",
                    help="the PostgreSQL server's log (statements are counted in it)")
    ap.add_argument("--only", choices=["postgres", "sqlite"])
    ap.add_argument("--out")
    ap.add_argument("--md")
    args = ap.parse_args()
    result: dict[str, Any] = {"workers": args.workers, "concurrency": args.concurrency}
    import warnings
    warnings.filterwarnings("ignore", message="workflow .* calls functions")
    with tempfile.TemporaryDirectory(prefix="plait-cost-") as tmp:
        if args.only != "sqlite":
            result["postgres"] = pg_measure(args, Path(tmp))
        if args.only != "postgres":
            result["sqlite"] = sqlite_measure(args, Path(tmp))
    text = json.dumps(result, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)
    if args.md:
        Path(args.md).write_text(report(result, "python benchmarks/step_cost.py "
                                        + " ".join(sys.argv[1:])))


if __name__ == "__main__":
    main()
