"""The SQLite schema: numbered migrations applied in order, tracked by
``PRAGMA user_version`` (0 = an empty database, N = migrations 0001..N applied)."""

from __future__ import annotations

import sqlite3

from ...errors import StoreError
from . import check_version as check_newer
from . import migrations, statements

BACKEND = "sqlite"


def latest_version() -> int:
    return migrations(BACKEND)[-1].version


def schema_version(conn: sqlite3.Connection) -> int:
    version: int = conn.execute("PRAGMA user_version").fetchone()[0]
    return version


def check_version(current: int, where: str) -> None:
    """Refuse a database whose schema is newer than this plait knows."""
    check_newer(current, latest_version(), where)


def check_plait_file(conn: sqlite3.Connection, where: str) -> None:
    """Refuse a database of schema version 0 that holds tables: it is not plait's."""
    names = [r[0] for r in conn.execute(
        r"SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite\_%' ESCAPE '\' "
        r"ORDER BY name LIMIT 5")]
    if names:
        raise StoreError(f"database {where} is not a plait database (it holds "
                         f"{', '.join(names)}); point --db at a new file")


def migrate(conn: sqlite3.Connection, where: str, target: int | None = None) -> int:
    """Bring ``conn`` (autocommit mode) up to schema ``target`` (default: the latest)
    in ONE transaction, so a crash leaves the old schema or the new one, and two
    processes opening a new file at once apply each migration once.  Returns the
    version reached."""
    goal = latest_version() if target is None else target
    current = schema_version(conn)
    check_version(current, where)
    if current >= goal:
        return current
    conn.execute("BEGIN IMMEDIATE")
    try:
        current = schema_version(conn)  # another process may have migrated meanwhile
        check_version(current, where)
        if current == 0:
            check_plait_file(conn, where)
        for step in migrations(BACKEND)[current:goal]:
            for statement in statements(step.sql):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {step.version:d}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return max(current, goal)
