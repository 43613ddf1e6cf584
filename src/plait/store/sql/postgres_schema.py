"""The PostgreSQL schema: numbered migrations applied in order, tracked by the table
``plait_migrations`` (no table = version 0, N = migrations 0001..N applied).

Several processes may open a new database at once (workers starting together): each
migrates inside ONE transaction that first takes an advisory lock (MIGRATION_LOCK), then
reads the version again, so every migration is applied exactly once and a crash leaves
the old schema or the new one (PostgreSQL's DDL is transactional)."""

from __future__ import annotations

from typing import Any

from psycopg import AsyncConnection, errors

from ...errors import SchemaVersionError, StoreError
from . import check_version, migrations, queries

BACKEND = "postgres"
# pg_advisory_xact_lock's key for migrating: any fixed number; this one spells "plait"
MIGRATION_LOCK = 0x706C616974
# the tables 0001 creates (a database holding one of them unmigrated is not plait's)
TABLES = ("attempts", "events", "plait_migrations", "runs", "steps", "workflows")
_Q = queries(BACKEND)


def latest_version() -> int:
    return migrations(BACKEND)[-1].version


Connection = AsyncConnection[Any]


async def _value(conn: Connection, query: str) -> Any:
    """The one value a query returns."""
    row = await (await conn.execute(query)).fetchone()
    assert row is not None
    return row[0]


async def schema_version(conn: Connection) -> int:
    """The version of the database ``conn`` (autocommit) is connected to."""
    try:
        return int(await _value(conn, _Q["schema_version"]))
    except errors.UndefinedTable:
        return 0


async def _version_in_transaction(conn: Connection) -> int:
    if not await _value(conn, _Q["schema_exists"]):
        return 0
    return int(await _value(conn, _Q["schema_version"]))


async def _check_unclaimed(conn: Connection, where: str) -> None:
    """Refuse to create plait's tables where tables of the same names exist already."""
    found = await (await conn.execute(_Q["taken_names"], {"names": list(TABLES)})).fetchall()
    if found:
        names = ", ".join(str(r[0]) for r in found)
        raise StoreError(
            f"database {where} already has tables named {names} that are not plait's "
            f"(it has no plait_migrations table); give plait a database of its own, or a "
            f"schema of its own with ?options=-csearch_path%3Dplait in the URL")


async def migrate(conn: Connection, where: str, target: int | None = None) -> int:
    """Bring the database of ``conn`` (an autocommit psycopg AsyncConnection) up to
    schema ``target`` (default: the latest); returns the version reached.  A newer
    schema is refused (SchemaVersionError) before anything changes."""
    goal = latest_version() if target is None else target
    current = await schema_version(conn)
    check_version(current, latest_version(), where)
    if current >= goal:
        return current
    async with conn.transaction():
        await conn.execute(_Q["migration_lock"], {"key": MIGRATION_LOCK})
        current = await _version_in_transaction(conn)  # another may have migrated
        check_version(current, latest_version(), where)
        if current == 0:
            await _check_unclaimed(conn, where)
        for step in migrations(BACKEND)[current:goal]:
            await conn.execute(step.sql)
            await conn.execute(_Q["record_migration"],
                               {"version": step.version, "name": step.name})
    return max(current, goal)


async def check_current(conn: Connection, where: str) -> None:
    """For a connection that may not write: the schema must be this plait's already,
    since it cannot be migrated here."""
    current = await schema_version(conn)
    latest = latest_version()
    check_version(current, latest, where)
    if current == 0:
        raise StoreError(f"database {where} holds no plait tables yet, and is opened "
                         f"read-only here: plait creates them on the first command that "
                         f"writes (plait run)")
    if current < latest:
        raise SchemaVersionError(
            f"database {where} has schema version {current}, older than this plait's "
            f"({latest}), and is opened read-only here, so it is not migrated: run a "
            f"command that writes to it (plait run, plait resume), then read it again")
