"""The PostgreSQL migrations: numbered without gaps, and applying them all, in order, one
at a time and with data in between, gives exactly the schema in
``src/plait/store/migrations/postgres/schema.sql``; a newer schema or a database of
someone else's tables is refused untouched; processes opening a new database at once
apply each migration once.

After adding a migration, regenerate the snapshot and review its diff:

    .venv/bin/python tests/migration/test_postgres_migrations.py --write

(against ``PLAIT_TEST_DATABASE_URL``, default postgresql://postgres@127.0.0.1:5432/test).
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

import pgutil
from plait.errors import SchemaVersionError, StoreError
from plait.store.postgres import PostgresStore
from plait.store.sql import Migration, migrations, postgres_schema, schema_snapshot
from plait.store.sql.postgres_schema import latest_version, migrate

pytestmark = [pytest.mark.postgres, pytest.mark.slow]  # starts processes

SNAPSHOT = (Path(__file__).parents[2] / "src" / "plait" / "store" / "migrations"
            / "postgres" / "schema.sql")
Objects = list[tuple[str, str, str]]  # (kind, name, definition)


# ---------------------------------------------------------------- reading a schema


def _columns(conn: psycopg.Connection, table: int) -> list[str]:
    found = conn.execute(
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, "
        "       a.attidentity, pg_get_expr(d.adbin, d.adrelid) "
        "FROM pg_attribute a LEFT JOIN pg_attrdef d "
        "  ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
        "WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped "
        "ORDER BY a.attnum", (table,)).fetchall()
    out = []
    for name, kind, not_null, identity, default in found:
        column = f"{name} {kind}"
        if identity:
            column += " GENERATED " + ("ALWAYS" if identity == "a" else "BY DEFAULT") \
                + " AS IDENTITY"
        elif not_null:
            column += " NOT NULL"
        if default is not None:
            column += f" DEFAULT {default}"
        out.append(column)
    return out


def _tables(conn: psycopg.Connection) -> Objects:
    tables = conn.execute(
        "SELECT oid, relname, coalesce(array_to_string(reloptions, ', '), '') "
        "FROM pg_class WHERE relnamespace = current_schema()::regnamespace "
        "AND relkind = 'r' ORDER BY oid").fetchall()
    out: Objects = []
    for oid, name, options in tables:
        constraints = conn.execute(
            "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = %s ORDER BY contype DESC, conname", (oid,)).fetchall()
        lines = _columns(conn, oid) + [f"CONSTRAINT {c} {d}" for c, d in constraints]
        body = ",\n    ".join(lines)
        with_ = f" WITH ({options})" if options else ""
        out.append(("table", name, f"CREATE TABLE {name} (\n    {body}\n){with_};"))
    return out


def _indexes(conn: psycopg.Connection) -> Objects:
    found = conn.execute(
        "SELECT c.relname, pg_get_indexdef(i.indexrelid) FROM pg_index i "
        "JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE c.relnamespace = current_schema()::regnamespace "
        "AND NOT EXISTS (SELECT FROM pg_constraint k WHERE k.conindid = i.indexrelid) "
        "ORDER BY c.oid").fetchall()
    return [("index", name, f"{definition};") for name, definition in found]


def _functions(conn: psycopg.Connection) -> Objects:
    found = conn.execute(
        "SELECT proname, pg_get_functiondef(oid) FROM pg_proc "
        "WHERE pronamespace = current_schema()::regnamespace ORDER BY oid").fetchall()
    return [("function", name, f"{definition.rstrip()};") for name, definition in found]


def schema_of(url: str) -> tuple[int, Objects]:
    """(schema version, every table, index and function with its definition), sorted:
    what two databases must agree on."""
    with psycopg.connect(url, autocommit=True) as conn:
        objects = _tables(conn) + _indexes(conn) + _functions(conn)
        return _version(conn), sorted(objects)


def _version(conn: psycopg.Connection) -> int:
    if not conn.execute("SELECT to_regclass('plait_migrations') IS NOT NULL").fetchone()[0]:
        return 0
    return int(conn.execute("SELECT max(version) FROM plait_migrations").fetchone()[0])


def render_snapshot(url: str) -> str:
    """schema.sql as the migrations make it, in the order they create things."""
    lines = ["-- The PostgreSQL schema that applying every migration in order produces.",
             "-- Generated: python tests/migration/test_postgres_migrations.py --write",
             "-- (tests/migration checks it; never edit it by hand, add a migration).", ""]
    with psycopg.connect(url, autocommit=True) as conn:
        for _, _, definition in _tables(conn) + _indexes(conn) + _functions(conn):
            lines += [definition, ""]
        for version, name in conn.execute(
                "SELECT version, name FROM plait_migrations ORDER BY version"):
            lines.append(f"INSERT INTO plait_migrations (version, name) "
                         f"VALUES ({version}, '{name}');")
    return "\n".join(lines) + "\n"


def apply_migrations(url: str, target: int | None = None) -> int:
    async def run() -> int:
        conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
        try:
            return await migrate(conn, url, target)
        finally:
            await conn.close()

    return asyncio.run(run())


def apply_snapshot(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(schema_snapshot("postgres"))


# ---------------------------------------------------------------- the tests


@pytest.fixture
def empty(pg_databases: pgutil.Databases) -> Iterator[Callable[[], str]]:
    """``empty()``: the URL of a new database without tables (dropped afterwards)."""
    made: list[str] = []

    def make() -> str:
        made.append(pg_databases.create(migrated=False))
        return made[-1]

    yield make
    for url in made:
        pg_databases.drop(url)


def test_migrations_are_numbered_from_one_without_gaps() -> None:
    found = migrations("postgres")
    assert [m.version for m in found] == list(range(1, len(found) + 1))
    assert all(re.fullmatch(r"\d{4}_[a-z0-9_]+\.sql", m.name) for m in found)
    assert latest_version() == found[-1].version


def test_all_migrations_give_the_schema_snapshot(empty: Callable[[], str]) -> None:
    migrated, snapshot = empty(), empty()
    assert apply_migrations(migrated) == latest_version()
    apply_snapshot(snapshot)
    assert schema_of(migrated) == schema_of(snapshot)
    assert schema_of(migrated)[0] == latest_version()


def test_the_snapshot_file_is_current(pg_database: str) -> None:
    # the same check as above, on the text: a stale schema.sql shows up in review
    assert SNAPSHOT.read_text("utf-8") == render_snapshot(pg_database), \
        "schema.sql is stale: python tests/migration/test_postgres_migrations.py --write"


def test_one_migration_at_a_time_with_data_between_gives_the_snapshot(
        empty: Callable[[], str], pg_database: str) -> None:
    url = empty()
    for version in range(1, latest_version() + 1):
        assert apply_migrations(url, version) == version
        with psycopg.connect(url) as conn:
            assert _version(conn) == version
        _add_rows(url, version)
    assert schema_of(url) == schema_of(pg_database)
    with psycopg.connect(url) as conn:  # the rows written at every version are there
        assert conn.execute("SELECT count(*) FROM runs").fetchone() == (latest_version(),)
        keys = conn.execute("SELECT run_id, concurrency_key, max_runs_per_key FROM runs "
                            "WHERE run_id IN ('run-4', 'run-5') ORDER BY run_id").fetchall()
    assert keys == [("run-4", None, None), ("run-5", "acme", 2)]  # NULL before 0005


def _add_rows(url: str, version: int) -> None:
    """A run with a step, an attempt and an event (from version 3, a ticket and an
    outcome; from version 4, a rated ticket, a pool's claim time and a breaker; from 5, a
    run's concurrency key), as the
    schema of ``version`` has them (extend when a migration changes these tables)."""
    with psycopg.connect(url, autocommit=True) as conn:
        run = conn.execute(
            "INSERT INTO runs (run_id, workflow, version, fingerprint, status, input, "
            "created_at) VALUES (%s, 'wf', 1, 'abcdef012345', 'running', '{\"n\": 1}', "
            "1.0) RETURNING id", (f"run-{version}",)).fetchone()[0]
        conn.execute("INSERT INTO steps (run, step_id, position, status) "
                     "VALUES (%s, 'a', 0, 'pending')", (run,))
        conn.execute("INSERT INTO attempts (run, step_id, attempt, fallback, status, "
                     "started_at, start_seq) VALUES (%s, 'a', 1, false, 'running', 1.0, 1)",
                     (run,))
        conn.execute("INSERT INTO events (run, seq, at, kind, step_id, source, target) "
                     "VALUES (%s, 1, 1.0, 'step', 'a', 'pending', 'queued')", (run,))
        if version >= 3:  # a claimed ticket and an inbox outcome
            conn.execute("INSERT INTO tickets (run, step_id, attempt, fallback, priority, "
                         "pool, pool_limit, payload, token, claimed_by, expires_at) "
                         "VALUES (%s, 'a', 2, false, 0.5, 'gpu', 2, '{\"x\": 1}', "
                         "%s, 'w1', now())", (run, f"0123abcd-{version}"))
            conn.execute("INSERT INTO outcomes (run, step_id, attempt, fallback, kind, "
                         "output, worker, at) VALUES (%s, 'a', 1, false, 'ok', '[1]', "
                         "'w1', 1.0)", (run,))
        if version >= 4:  # a rated ticket, a claim time of its pool, a breaker's state
            conn.execute("INSERT INTO tickets (run, step_id, attempt, fallback, priority, "
                         "pool, payload, rate_count, rate_period) VALUES (%s, 'a', 3, "
                         "false, 0.5, 'llm', '{}', 60, 60.0)", (run,))
            conn.execute("INSERT INTO pool_starts (pool, at) VALUES ('llm', now())")
            conn.execute("INSERT INTO breakers (key, state, version) VALUES (%s, "
                         "'{\"failures\": 1, \"opened_at\": null, \"trial\": false}', 1)",
                         (f"api-{version}",))
        if version >= 5:  # a run's concurrency key and bound
            conn.execute("UPDATE runs SET concurrency_key = 'acme', max_runs_per_key = 2 "
                         "WHERE id = %s", (run,))


def test_migrating_an_up_to_date_database_changes_nothing(pg_database: str) -> None:
    before = schema_of(pg_database)
    assert apply_migrations(pg_database) == latest_version()
    assert schema_of(pg_database) == before


def test_concurrent_first_opens_by_several_processes_migrate_once(
        empty: Callable[[], str]) -> None:
    url = empty()
    opener = ("import asyncio, sys\n"
              "from plait.store.postgres import PostgresStore\n"
              "async def main():\n"
              "    store = PostgresStore(sys.argv[1])\n"
              "    await store.open()\n"
              "    await store.close()\n"
              "asyncio.run(main())\n")
    procs = [subprocess.Popen([sys.executable, "-c", opener, url], stderr=subprocess.PIPE,
                              text=True) for _ in range(4)]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    with psycopg.connect(url) as conn:
        applied = conn.execute("SELECT version FROM plait_migrations ORDER BY version")
        assert [r[0] for r in applied] == list(range(1, latest_version() + 1))
    assert schema_of(url)[1] == schema_of_snapshot(empty)


def schema_of_snapshot(empty: Callable[[], str]) -> Objects:
    url = empty()
    apply_snapshot(url)
    return schema_of(url)[1]


async def test_a_newer_schema_is_refused_naming_both_versions(
        empty: Callable[[], str]) -> None:
    url = empty()
    newer = latest_version() + 7
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE plait_migrations (version integer PRIMARY KEY, "
                     "name text NOT NULL)")
        conn.execute("INSERT INTO plait_migrations VALUES (%s, 'from_the_future.sql')",
                     (newer,))
    store = PostgresStore(url)
    with pytest.raises(SchemaVersionError) as info:
        await store.open()
    message = str(info.value)
    assert "written by a newer plait" in message
    assert str(newer) in message and str(latest_version()) in message
    assert pgutil.database_name(url) in message
    with psycopg.connect(url) as conn:  # nothing was changed
        tables = conn.execute("SELECT tablename FROM pg_tables "
                              "WHERE schemaname = current_schema()").fetchall()
        assert tables == [("plait_migrations",)]


async def test_tables_of_the_same_names_are_refused_untouched(
        empty: Callable[[], str]) -> None:
    url = empty()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE runs (invoice integer)")
        conn.execute("CREATE TABLE customers (id integer)")
    with pytest.raises(StoreError, match="already has tables named runs that are not"):
        await PostgresStore(url).open()
    with psycopg.connect(url) as conn:
        tables = conn.execute("SELECT tablename FROM pg_tables "
                              "WHERE schemaname = current_schema() ORDER BY 1").fetchall()
        assert tables == [("customers",), ("runs",)]


async def test_other_tables_in_the_database_are_left_alone(empty: Callable[[], str]) -> None:
    url = empty()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE customers (id integer)")
    store = PostgresStore(url)
    await store.open()
    await store.close()
    assert schema_of(url)[0] == latest_version()


def test_a_failed_migration_leaves_the_old_schema(pg_database: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    before = schema_of(pg_database)
    broken = (*migrations("postgres"),
              Migration(version=latest_version() + 1, name="9999_broken.sql",
                        sql="CREATE TABLE fine (x integer);\nCREATE TABLE broken (;\n"))
    monkeypatch.setattr(postgres_schema, "migrations", lambda backend: broken)
    with pytest.raises(psycopg.errors.SyntaxError):
        apply_migrations(pg_database)
    monkeypatch.undo()
    assert schema_of(pg_database) == before  # the half-applied migration was rolled back


async def test_read_only_refuses_a_database_without_plaits_schema(
        empty: Callable[[], str]) -> None:
    url = empty()
    with pytest.raises(StoreError, match="holds no plait tables yet"):
        await PostgresStore(url, read_only=True).open()


async def test_read_only_refuses_an_older_schema_it_cannot_migrate(
        pg_database: str, monkeypatch: pytest.MonkeyPatch) -> None:
    newer = (*migrations("postgres"),
             Migration(version=latest_version() + 1, name="9999_more.sql",
                       sql="CREATE TABLE more (x integer);\n"))
    monkeypatch.setattr(postgres_schema, "migrations", lambda backend: newer)
    with pytest.raises(SchemaVersionError, match="older than this plait's"):
        await PostgresStore(pg_database, read_only=True).open()


def _write_snapshot() -> None:
    databases = pgutil.connect_databases()
    scratch = databases.create(migrated=False)
    try:
        apply_migrations(scratch)
        SNAPSHOT.write_text(render_snapshot(scratch), "utf-8")
    finally:
        databases.drop(scratch)
        databases.close()
    print(f"wrote {SNAPSHOT}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        _write_snapshot()
