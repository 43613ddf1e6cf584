"""The Markdown report of ``benchmarks/step_cost.py`` (``--md``), from its JSON."""

from __future__ import annotations

from collections import Counter
from typing import Any

from harness import fmt_num, machine_header, table


def per(value: float, steps: int, digits: int = 2) -> str:
    return fmt_num(value / steps, digits)


def report(result: dict[str, Any], command: str) -> str:
    pg, lite = result.get("postgres", {}), result.get("sqlite", {})
    lines = machine_header("What a completed step costs the database", [
        f"produced by: `{command}`",
        f"PostgreSQL: {result['workers']} `plait worker` processes, `--concurrency "
        f"{result['concurrency']}`, on this host with the server (2 cores shared with "
        "other work); runs stored through one connection first, as `plait run --detach` "
        "stores each",
        "SQLite: the same definitions run in one process (`Workflow.run_async`, 20 at a "
        "time)",
        "workflows: `layers40` = 40 steps in 4 layers of 10 (each step depends on the 10 "
        "above); `single` = 1 step; every step `cluster_steps.body`"])
    cols = [(f"PostgreSQL {k}", pg[k]) for k in ("layers40", "single") if k in pg]
    lite_cols = [(f"SQLite {k}", lite[k]) for k in ("layers40", "single") if k in lite]
    header = ["per completed step", *[c for c, _ in cols], *[c for c, _ in lite_cols]]
    na = ["n/a"] * len(lite_cols)

    def pgrow(label: str, fn: Any) -> list[str]:
        return [label, *[fn(d) for _, d in cols]]

    def stm(d: dict[str, Any], phase: str) -> str:
        s = d.get(f"statements_{phase}")
        return per(s["total"], d["steps"], 2) if s else "—"

    def control(d: dict[str, Any]) -> int:
        s = d.get("statements_submit", {}).get("by_kind", {})
        e = d.get("statements_execute", {}).get("by_kind", {})
        return sum(v for k, v in [*s.items(), *e.items()]
                   if k in ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE"))

    def rows(d: dict[str, Any], key: str) -> str:
        return per(sum(t[key] for t in d["counters"]["tables"].values()), d["steps"], 1)

    def size(d: dict[str, Any]) -> str:
        return fmt_num(sum(t["bytes"] for t in d["counters"]["tables"].values())
                       / d["steps"], 0)

    def wal_db(d: dict[str, Any]) -> str:
        w = d.get("wal_of_database")
        return fmt_num((w["bytes"]) / d["steps"], 0) if w else "—"

    body = [
        pgrow("runs x steps", lambda d: f"{d['runs']} x {d['steps'] // d['runs']}")
        + [f"{d['runs']} x {d['steps'] // d['runs']}" for _, d in lite_cols],
        pgrow("statements (all, from the server log)",
              lambda d: fmt_num((d["statements_submit"]["total"]
                                 + d["statements_execute"]["total"]) / d["steps"], 2)
              if "statements_submit" in d else "—")
        + [per(d["statements"], d["steps"], 2) for _, d in lite_cols],
        pgrow("... of which storing the runs (workers stopped)",
              lambda d: stm(d, "submit")) + na,
        pgrow("... of which BEGIN/COMMIT/ROLLBACK", lambda d: per(control(d), d["steps"], 2))
        + [per(sum(v for k, v in d["by_kind"].items() if k in ("BEGIN", "COMMIT",
               "ROLLBACK", "SAVEPOINT", "RELEASE")), d["steps"], 2) for _, d in lite_cols],
        pgrow("transactions committed (pg_stat_database: with the workers' start and "
              "idle, each new connection's start, autovacuum)",
              lambda d: per(d["counters"]["commits"], d["steps"], 2)) + na,
        pgrow("client backends: up before the runs / started while they ran (sampled)",
              lambda d: f"{d['backends_at_start']} / {d['backends_started_in_window']}")
        + na,
        pgrow("rows inserted", lambda d: rows(d, "ins"))
        + [per(sum(max(t["rows"], 0) for t in d["tables"].values()), d["steps"], 1)
           + " (net)" for _, d in lite_cols],
        pgrow("rows updated (HOT)", lambda d: f"{rows(d, 'upd')} ({rows(d, 'hot_upd')})")
        + na,
        pgrow("rows deleted", lambda d: rows(d, "del")) + na,
        pgrow("index scans / sequential scans",
              lambda d: f"{rows(d, 'idx_scan')} / {rows(d, 'seq_scan')}") + na,
        pgrow("table + index bytes", size)
        + [fmt_num(sum(t["bytes"] for t in d["tables"].values()) / d["steps"], 0)
           for _, d in lite_cols],
        pgrow("WAL bytes, this database's records (pg_walinspect)", wal_db) + na,
        pgrow("WAL bytes, whole server", lambda d: fmt_num(
            d["counters"]["wal_bytes_server"] / d["steps"], 0)) + na,
        pgrow("server CPU (the database's client backends), ms",
              lambda d: fmt_num(d["server_cpu_s"] * 1e3 / d["steps"], 3)) + na,
        pgrow("... of which storing the runs, ms",
              lambda d: fmt_num(d["server_submit_cpu_s"] * 1e3 / d["steps"], 3)) + na,
        pgrow("workers' CPU, ms", lambda d: fmt_num(d["workers_cpu_s"] * 1e3 / d["steps"], 3))
        + [fmt_num(d["cpu_s"] * 1e3 / d["steps"], 3) + " (whole process)"
           for _, d in lite_cols],
        pgrow("storing process CPU, ms",
              lambda d: fmt_num(d["submit_client_cpu_s"] * 1e3 / d["steps"], 3)) + na,
    ]
    lines += table(header, body)
    idle = pg.get("workers_start_idle")
    if idle:
        lines += [f"The {result['workers']} workers start and idle {idle['seconds']:.0f} s "
                  "before the runs are stored; with no runs at all that is "
                  f"{idle['commits']} transactions, {idle['workers_cpu_s']} s of worker CPU "
                  f"and {idle['server_cpu_s']} s of server CPU.  The rows, bytes and "
                  "transactions above include it (once per column); the statements (the "
                  "log is read from the end of the idle time) and the CPU (from readings "
                  "taken then) do not.", "",
                  "Autovacuum and autoanalyze runs on the database during the windows "
                  "(their transactions are in pg_stat_database's count, their WAL in "
                  "both WAL rows, their CPU in none): " + ", ".join(
                      f"{k} {pg[k]['counters']['autovacuum_and_analyze_runs']}"
                      for k in ("layers40", "single") if k in pg) + ".", ""]
    for label in ("layers40", "single"):
        d = pg.get(label)
        if not d:
            continue
        steps = d["steps"]
        tables = d["counters"]["tables"]
        lines += [f"## PostgreSQL {label}: per table, per completed step", ""]
        lines += table(["table", "inserted", "updated (HOT)", "deleted", "index scans",
                        "seq scans", "bytes"],
                       [[n, per(t["ins"], steps), f"{per(t['upd'], steps)} "
                         f"({per(t['hot_upd'], steps)})", per(t["del"], steps),
                         per(t["idx_scan"], steps), per(t["seq_scan"], steps),
                         fmt_num(t["bytes"] / steps, 0)]
                        for n, t in sorted(tables.items(), key=lambda kv: -kv[1]["bytes"])
                        if any(t[k] for k in ("ins", "upd", "del", "idx_scan", "seq_scan"))])
        if "statements_execute" in d:
            kinds: Counter[str] = Counter(d["statements_execute"]["by_kind"])
            kinds.update(d["statements_submit"]["by_kind"])
            lines += [f"## PostgreSQL {label}: statements per completed step, by kind and "
                      "first table", ""]
            lines += table(["statement", "per step"],
                           [[k, per(v, steps)] for k, v in kinds.most_common(14)])
    for label in ("layers40", "single"):
        d = lite.get(label)
        if not d:
            continue
        lines += [f"## SQLite {label}: statements per completed step, by kind", ""]
        lines += table(["statement", "per step"],
                       [[k, per(v, d["steps"])] for k, v in
                        Counter(d["by_kind"]).most_common(10)])
    return "\n".join(lines)
