"""The SQLite migrations: numbered without gaps, and applying them all, in order, one
at a time and with data in between, gives exactly the schema in
``src/plait/store/migrations/sqlite/schema.sql``.

After adding a migration, regenerate the snapshot and review its diff:

    .venv/bin/python tests/migration/test_sqlite_migrations.py --write
"""

from __future__ import annotations

import re
import sqlite3
import sys
from pathlib import Path

import pytest

from plait.errors import SchemaVersionError, StoreError
from plait.store.sql import migrations, schema_snapshot, statements
from plait.store.sql.sqlite_schema import latest_version, migrate, schema_version
from plait.store.sqlite import SqliteStore

SNAPSHOT = (Path(__file__).parents[2] / "src" / "plait" / "store" / "migrations" / "sqlite"
            / "schema.sql")


def _normal(sql: str) -> str:
    """SQL text without comments, with whitespace collapsed (what sqlite_master keeps
    is the statement as written, comments included)."""
    sql = re.sub(r"--[^\n]*", "", sql)
    sql = re.sub(r"\s+", " ", sql).strip()
    return re.sub(r"\s*([(),])\s*", r"\1", sql)


def schema_of(conn: sqlite3.Connection) -> tuple[int, list[tuple[str, str, str, str]]]:
    """(user_version, every table, index and trigger with its normalised SQL)."""
    objects = conn.execute(
        "SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master "
        "WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name").fetchall()
    return schema_version(conn), [(t, n, tb, _normal(sql)) for t, n, tb, sql in objects]


def migrated(target: int | None = None) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    migrate(conn, ":memory:", target)
    return conn


def snapshot() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    for statement in statements(schema_snapshot("sqlite")):
        conn.execute(statement)
    return conn


def render_snapshot() -> str:
    """schema.sql as the migrations make it: sqlite_master's statements, uncommented."""
    conn = migrated()
    lines = ["-- The SQLite schema that applying every migration in order produces.",
             "-- Generated: python tests/migration/test_sqlite_migrations.py --write",
             "-- (tests/migration checks it; never edit it by hand, add a migration).", ""]
    for _, _, _, sql in conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master "
            "WHERE name NOT LIKE 'sqlite_%' AND sql IS NOT NULL "
            "ORDER BY CASE type WHEN 'table' THEN 0 ELSE 1 END, rowid"):
        body = "\n".join(line.split("--")[0].rstrip() for line in sql.splitlines())
        lines += [re.sub(r"\n\s*\n", "\n", body) + ";", ""]
    lines.append(f"PRAGMA user_version = {schema_version(conn)};")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- the tests


def test_migrations_are_numbered_from_one_without_gaps() -> None:
    found = migrations("sqlite")
    assert [m.version for m in found] == list(range(1, len(found) + 1))
    assert all(re.fullmatch(r"\d{4}_[a-z0-9_]+\.sql", m.name) for m in found)
    assert latest_version() == found[-1].version


def test_all_migrations_give_the_schema_snapshot() -> None:
    assert schema_of(migrated()) == schema_of(snapshot())


def test_the_snapshot_file_is_current() -> None:
    # the same check as above, on the text: a stale schema.sql shows up in review
    assert SNAPSHOT.read_text("utf-8") == render_snapshot(), \
        "schema.sql is stale: python tests/migration/test_sqlite_migrations.py --write"


def test_one_migration_at_a_time_with_data_between_gives_the_snapshot() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    with_tickets = 0  # versions at which the claims tables existed
    for version in range(1, latest_version() + 1):
        assert migrate(conn, ":memory:", version) == version
        assert schema_version(conn) == version
        with_tickets += _add_rows(conn, version)
    assert schema_of(conn) == schema_of(snapshot())
    # the rows written at every version are still there
    assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == latest_version()
    assert with_tickets > 0
    assert conn.execute("SELECT count(*) FROM tickets").fetchone()[0] == with_tickets
    assert conn.execute("SELECT count(*) FROM outcomes").fetchone()[0] == with_tickets
    # one breaker per version from 0004 on; runs stored before 0005 have no key
    assert conn.execute("SELECT count(*) FROM breakers").fetchone()[0] == \
        latest_version() - 3
    keys = conn.execute("SELECT run_id, concurrency_key, max_runs_per_key FROM runs "
                        "WHERE run_id IN ('run-4', 'run-5') ORDER BY run_id").fetchall()
    assert keys == [("run-4", None, None), ("run-5", "acme", 2)]


def _add_rows(conn: sqlite3.Connection, version: int) -> bool:
    """A run with a step, an attempt and an event, as the schema of ``version`` has
    them (extend when a migration changes these tables), and a ticket and an inbox
    outcome once the claims tables exist (True then).  Keyed on the tables, not on the
    migration's number, so renumbering the migration changes nothing here."""
    run = conn.execute(
        "INSERT INTO runs (run_id, workflow, version, fingerprint, status, input, "
        "created_at) VALUES (?, 'wf', 1, 'abcdef012345', 'running', '{\"n\": 1}', 1.0)",
        (f"run-{version}",)).lastrowid
    conn.execute("INSERT INTO steps (run, step_id, position, status) "
                 "VALUES (?, 'a', 0, 'pending')", (run,))
    conn.execute("INSERT INTO attempts (run, step_id, attempt, fallback, status, "
                 "started_at, start_seq) VALUES (?, 'a', 1, 0, 'running', 1.0, 1)", (run,))
    conn.execute("INSERT INTO events (run, seq, at, kind, step_id, source, target) "
                 "VALUES (?, 1, 1.0, 'step', 'a', 'pending', 'queued')", (run,))
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "tickets" not in tables:
        return False
    conn.execute("INSERT INTO tickets (run, step_id, attempt, fallback, priority, payload, "
                 "created_at, token, claimed_by, expires_at) "
                 "VALUES (?, 'a', 2, 0, 0.5, '{}', 1.0, ?, 'w1', 31.0)", (run, f"t{version}"))
    conn.execute("INSERT INTO outcomes (run, step_id, attempt, fallback, kind, output, "
                 "worker, at) VALUES (?, 'a', 1, 0, 'ok', '{\"x\": 1}', 'w1', 2.0)", (run,))
    if "breakers" in tables:  # a pool's claim time and a breaker's state (0004)
        conn.execute("INSERT INTO pool_starts (pool, at) VALUES ('llm', 1.0)")
        conn.execute("INSERT INTO breakers (key, state, version) VALUES (?, ?, 1)",
                     (f"api-{version}", '{"failures": 1, "opened_at": null, "trial": false}'))
    columns = {r[1] for r in conn.execute("PRAGMA table_info(runs)")}
    if "concurrency_key" in columns:  # a run's key and bound (0005)
        conn.execute("UPDATE runs SET concurrency_key = 'acme', max_runs_per_key = 2 "
                     "WHERE id = ?", (run,))
    return True


def test_migrating_an_up_to_date_database_changes_nothing() -> None:
    conn = migrated()
    before = schema_of(conn)
    assert migrate(conn, ":memory:") == latest_version()
    assert schema_of(conn) == before


async def test_the_store_creates_the_snapshot_schema(tmp_path: Path) -> None:
    store = SqliteStore(f"sqlite:///{tmp_path}/fresh.db")
    await store.open()
    await store.close()
    conn = sqlite3.connect(tmp_path / "fresh.db")
    assert schema_of(conn) == schema_of(snapshot())
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_a_newer_schema_is_refused_naming_both_versions(tmp_path: Path) -> None:
    path = tmp_path / "newer.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE from_the_future (x)")
    newer = latest_version() + 7
    conn.execute(f"PRAGMA user_version = {newer}")
    conn.commit()
    conn.close()
    store = SqliteStore(f"sqlite:///{path}")
    with pytest.raises(SchemaVersionError) as info:
        await store.open()
    message = str(info.value)
    assert "written by a newer plait" in message
    assert str(newer) in message and str(latest_version()) in message
    assert str(path) in message
    # nothing was changed: still the newer version, not switched to WAL
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == newer
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal"


def test_migrate_refuses_a_newer_schema_too() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute(f"PRAGMA user_version = {latest_version() + 1}")
    with pytest.raises(SchemaVersionError):
        migrate(conn, ":memory:")


async def test_a_database_that_is_not_plaits_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    conn.commit()
    conn.close()
    store = SqliteStore(f"sqlite:///{path}")
    with pytest.raises(StoreError, match="not a plait database"):
        await store.open()
    conn = sqlite3.connect(path)
    assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["invoices"]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal"


def test_a_failed_migration_leaves_the_old_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    from plait.store.sql import Migration, sqlite_schema

    conn = migrated()
    before = schema_of(conn)
    broken = (*migrations("sqlite"),
              Migration(version=latest_version() + 1, name="9999_broken.sql",
                        sql="CREATE TABLE fine (x);\nCREATE TABLE broken (;\n"))
    monkeypatch.setattr(sqlite_schema, "migrations", lambda backend: broken)
    with pytest.raises(sqlite3.OperationalError):
        sqlite_schema.migrate(conn, ":memory:")
    assert schema_of(conn) == before  # the half-applied migration was rolled back


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        SNAPSHOT.write_text(render_snapshot(), "utf-8")
        print(f"wrote {SNAPSHOT}")
    else:
        print(render_snapshot(), end="")
