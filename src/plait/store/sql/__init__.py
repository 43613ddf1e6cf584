"""Named SQL, kept in ``.sql`` files beside this module, and numbered migrations.

A queries file (``<backend>.sql``) is a series of blocks, each starting with a line
``-- name --`` followed by comment lines that say what the query does and list its
parameters, then the statement.  ``queries(backend)`` maps each name to its SQL.

Migrations live in ``plait/store/migrations/<backend>/NNNN_what.sql``, numbered from
0001 without gaps; ``migrations(backend)`` returns them in order.  Their effect is
pinned by ``schema.sql`` in the same directory (checked by tests/migration).

The modules beside this one hold what the SQL stores need besides their connections:
``rows`` (what both share: JSON values, the batch checks, rows to records), and per
backend ``<backend>_schema`` (applying migrations) and ``<backend>_rows`` (batches to
statement parameters).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources

from ...errors import SchemaVersionError, StoreError

_HEADER = re.compile(r"^-- ([a-z_][a-z0-9_]*) --$", re.MULTILINE)
_MIGRATION = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Migration:
    version: int
    name: str
    sql: str


@cache
def queries(backend: str) -> dict[str, str]:
    """Every named query of ``backend``'s queries file."""
    text = resources.files("plait.store.sql").joinpath(f"{backend}.sql").read_text("utf-8")
    parts = _HEADER.split(text)
    # parts = [preamble, name1, body1, name2, body2, ...]
    found: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in found:
            raise StoreError(f"{backend}.sql: query {name!r} is defined twice")
        found[name] = body.strip()
    return found


@cache
def migrations(backend: str) -> tuple[Migration, ...]:
    """``backend``'s migrations in order; refuses a gap or a duplicate number."""
    folder = resources.files("plait.store").joinpath("migrations", backend)
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _MIGRATION.match(entry.name)
        if match:
            found.append(Migration(version=int(match[1]), name=entry.name,
                                   sql=entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    for expected, migration in enumerate(found, start=1):
        if migration.version != expected:
            raise StoreError(f"migrations/{backend}: expected migration {expected:04d}, "
                             f"found {migration.name}")
    return tuple(found)


def check_version(current: int, latest: int, where: str) -> None:
    """Refuse a database whose schema is newer than this plait knows (``latest``)."""
    if current > latest:
        raise SchemaVersionError(
            f"database {where} has schema version {current}, written by a newer plait; "
            f"this plait knows schema versions up to {latest}: upgrade plait to use it")


def schema_snapshot(backend: str) -> str:
    """``schema.sql``: the schema that applying every migration must produce."""
    folder = resources.files("plait.store").joinpath("migrations", backend)
    return folder.joinpath("schema.sql").read_text("utf-8")


def statements(script: str) -> Iterator[str]:
    """The statements of an SQL script, one at a time, each with the comments before
    it (run them one by one: ``executescript`` would commit a migration half-way)."""
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            yield pending
            pending = ""
    leftover = [ln for ln in pending.splitlines()
                if ln.strip() and not ln.strip().startswith("--")]
    if leftover:
        raise StoreError(f"incomplete SQL statement at the end of a script: "
                         f"{' '.join(leftover)[:200]!r}")
