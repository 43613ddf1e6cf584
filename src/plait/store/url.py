"""Choosing a store from its URL."""

from __future__ import annotations

from pathlib import Path

from ..errors import StoreError
from .base import Store
from .memory import MemoryStore
from .postgres_url import is_postgres, redact

_MEMORY: dict[str, MemoryStore] = {}


def open_store(url: str, *, read_only: bool = False) -> Store:
    """A store for ``url`` (not yet opened).  ``memory://name`` stores are shared within
    the process by name, so a run and a later lookup see the same runs; bare ``memory://`` is
    private to each call.  ``sqlite:///path.db`` is a file shared by every process;
    ``postgresql://...`` (or ``postgres://``) a database shared by every host.
    ``read_only``: the caller only reads; a SQLite file is opened so that it is never
    written (it works on a file or directory this process may not write), a PostgreSQL
    connection so that the server refuses writes."""
    if url.startswith("memory://"):
        if url == "memory://":
            return MemoryStore(url)  # anonymous: private to the caller
        return _MEMORY.setdefault(url, MemoryStore(url))
    if url.startswith("sqlite:"):
        from .sqlite import SqliteStore  # imported on demand: the CLI starts faster

        return SqliteStore(url, read_only=read_only)
    if is_postgres(url):
        from .postgres import PostgresStore  # psycopg is loaded only by who needs it

        return PostgresStore(url, read_only=read_only)
    scheme = url.split(":", 1)[0]
    raise StoreError(f"unsupported store URL {url!r} (scheme {scheme!r}); "
                     f"use memory://, sqlite:///path.db or postgresql://user@host/dbname")


def shown_url(url: str) -> str:
    """``url`` as messages may show it: a PostgreSQL password is replaced by ``***``."""
    return redact(url) if is_postgres(url) else url


def missing_database(url: str) -> Path | None:
    """The file of a ``sqlite:`` URL when it does not exist yet, else None (what reads
    it holds no run, and opening it would create it)."""
    if not url.startswith("sqlite:"):
        return None
    from .sqlite_url import parse_url

    try:
        path, _ = parse_url(url)
    except StoreError:
        return None  # opening the store reports the bad URL
    try:
        exists = path.exists()
    except (OSError, ValueError):  # a name the system refuses (too long, a NUL)
        exists = False
    return None if exists else path
