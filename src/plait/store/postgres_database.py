"""The PostgreSQL database behind ``PostgresStore``: its URL, the connection pool, the
schema check at open, and every statement run on a pooled connection with connection
loss retried (``PostgresDatabase.run``).  Driver errors become plait errors here, once
(``translate``), naming the database with its password redacted."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg
from psycopg import AsyncConnection
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.string import TextBinaryLoader, TextLoader
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ..errors import StoreError, StoreUnreachable, UnstorableValue
from .postgres_url import parse_url
from .sql.postgres_schema import check_current, migrate

T = TypeVar("T")
Row = tuple[Any, ...]
Job = Callable[["AsyncConnection[Row]"], Awaitable[T]]

RETRY_FIRST_DELAY_S = 0.05  # then doubled up to RETRY_MAX_DELAY_S, for up to retry_for
RETRY_MAX_DELAY_S = 1.0
# SQLSTATEs after which a statement certainly did not take effect, so even a write may
# run again: rolled back (serialization failure, deadlock), or its connection was ended
# by the server before it ran or while it ran (shutdown, restart, pg_terminate_backend)
_NOT_APPLIED = frozenset({"40001", "40P01", "57P01", "57P03"})
UNIQUE_VIOLATION = "23505"
_log = logging.getLogger("plait.store.postgres")


class ServerRefusal(Exception):
    """The server refused a change in a way the store explains: a plait function's
    refusal (SQLSTATE class ``PL``, raised by the functions of
    ``migrations/postgres``), or a unique key violated (``constraint`` names it)."""

    def __init__(self, sqlstate: str, message: str, constraint: str | None = None,
                 detail: str | None = None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate
        self.constraint = constraint
        self.detail = detail  # the refusal's DETAIL: what it names (a key, a step)


# ----------------------------------------------------------------- driver errors


def _detail(exc: BaseException) -> str:
    """The driver's message on one line (libpq's span several)."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def lost_connection(exc: psycopg.Error) -> bool:
    """The connection broke (the server went away, restarted or ended it)."""
    state = exc.sqlstate
    if state is None:
        return isinstance(exc, psycopg.OperationalError)
    return state.startswith(("08", "57P"))


def translate(exc: psycopg.Error, where: str) -> StoreError:
    """The one place a driver error becomes a plait error (the caller chains it)."""
    state = exc.sqlstate or ""
    detail = _detail(exc)
    if state == "53100":
        return StoreError(f"database {where}: the server's disk is full; the transaction "
                          f"was rolled back and nothing of it was written ({detail})")
    if state == "25006":
        return StoreError(f"database {where} is read-only for this connection ({detail})")
    if state == "42501":
        return StoreError(f"database {where}: permission denied ({detail}); plait's user "
                          f"needs to read and write plait's tables")
    if state in ("42P01", "42883"):
        return StoreError(f"database {where} lacks part of plait's schema ({detail}); "
                          f"was it changed by hand?")
    if state == "57014":
        return StoreError(f"database {where}: the statement was cancelled ({detail})")
    if lost_connection(exc):
        return StoreError(f"lost the connection to PostgreSQL at {where} ({detail})")
    if state.startswith("22"):  # a data exception: a value the server cannot hold
        return UnstorableValue(f"database {where}: a value to store was refused "
                               f"({detail}); nothing of it was stored")
    return StoreError(f"database {where}: {detail}")


# What a server that answered a connection with FATAL says when trying again later may
# work (libpq gives a failed connection no SQLSTATE, only the server's message).
_FATAL_FOR_NOW = ("starting up", "shutting down", "in recovery", "too many clients",
                  "not yet accepting connections", "remaining connection slots")


def _connect_error(exc: psycopg.Error, where: str) -> StoreError:
    """StoreUnreachable when the server could not be reached (refused, timed out, no
    route, a name that did not resolve) or said to come back later; a plain StoreError
    when it answered no for good (a refused login, a missing database)."""
    detail = _detail(exc)
    message = f"cannot connect to PostgreSQL at {where}: {detail}"
    if exc.sqlstate is not None:
        transient = exc.sqlstate.startswith(("08", "57P")) or exc.sqlstate == "53300"
    else:
        transient = "FATAL" not in detail or any(s in detail for s in _FATAL_FOR_NOW)
    return StoreUnreachable(message) if transient else StoreError(message)


def _unicode_error(exc: UnicodeEncodeError) -> StoreError:
    return UnstorableValue(f"a value to store is not valid Unicode ({exc.reason}: "
                      f"{exc.object[exc.start:exc.end]!a}); nothing of it was stored")


# ------------------------------------------------------------------ the database


async def _configure(conn: AsyncConnection[Any]) -> None:
    """Every new connection: json columns are read as their text, which the store
    decodes itself (``sql.rows``: the same readers as SQLite's)."""
    conn.adapters.register_loader("json", TextLoader)
    conn.adapters.register_loader("json", TextBinaryLoader)


class PostgresDatabase:
    """The pool of connections to one database, and every statement run on it."""

    def __init__(self, url: str, *, read_only: bool = False) -> None:
        self.url = parse_url(url)
        self.where = self.url.where
        self.read_only = read_only
        self._pool: AsyncConnectionPool[AsyncConnection[Row]] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _connect_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"autocommit": True}
        if self.read_only:  # the server refuses every write of these connections
            given = str(conninfo_to_dict(self.url.conninfo).get("options") or "")
            kwargs["options"] = f"{given} -c default_transaction_read_only=on".strip()
        return kwargs

    async def connect(self) -> AsyncConnection[Row]:
        """One connection outside the pool (StoreError naming the database and why it
        cannot be reached: refused, timed out, authentication, no such database)."""
        try:
            conn = await AsyncConnection.connect(self.url.conninfo, **self._connect_kwargs())
        except psycopg.Error as exc:
            raise _connect_error(exc, self.where) from exc
        await _configure(conn)
        return conn

    async def open(self) -> None:
        """Check (read-only) or migrate the schema on a first connection, whose errors
        say why the server cannot be used, then open the pool."""
        conn = await self.connect()
        try:
            if self.read_only:
                await check_current(conn, self.where)
            else:
                await migrate(conn, self.where)
        except psycopg.Error as exc:
            raise translate(exc, self.where) from exc
        finally:
            await conn.close()
        pool: AsyncConnectionPool[AsyncConnection[Row]] = AsyncConnectionPool(
            self.url.conninfo, kwargs=self._connect_kwargs(), configure=_configure,
            min_size=self.url.pool_min, max_size=self.url.pool_max, open=False,
            name=f"plait {self.where}", timeout=max(self.url.retry_for, 1.0))
        try:
            await pool.open(wait=self.url.pool_min > 0, timeout=self.url.retry_for or 1.0)
        except BaseException as exc:  # cancelled too: the pool's tasks must not leak
            await pool.close()
            if isinstance(exc, PoolTimeout):
                raise StoreError(f"PostgreSQL at {self.where} accepted one connection but "
                                 f"the pool could not open {self.url.pool_min} within "
                                 f"{self.url.retry_for:g}s") from exc
            raise
        self._pool, self._loop = pool, asyncio.get_running_loop()

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    def _open_pool(self) -> AsyncConnectionPool[AsyncConnection[Row]]:
        pool = self._pool
        if pool is None:
            raise StoreError(f"store {self.where} is not open (call open() first)")
        if asyncio.get_running_loop() is not self._loop:
            raise StoreError(f"store {self.where} belongs to the event loop that opened "
                             f"it and is used here from another one: open a store per "
                             f"event loop (plait.connect shares one per loop)")
        return pool

    async def run(self, job: Job[T], *, idempotent: bool = True) -> T:
        """``job`` on a pooled connection.  When the connection is lost (the server
        restarted, a network blip), the pool's dead connections are dropped and ``job``
        runs again, with backoff, for up to ``retry_for`` seconds: always when it only
        reads or repeating it changes nothing (``idempotent``), otherwise only when
        the error proves it took no effect (``_NOT_APPLIED``).  A refusal of plait's
        functions or a unique key violated is raised as ServerRefusal; any other driver error
        as StoreError."""
        pool = self._open_pool()
        deadline = time.monotonic() + self.url.retry_for
        delay = RETRY_FIRST_DELAY_S
        while True:
            try:
                async with pool.connection(timeout=max(deadline - time.monotonic(), 0.1)) \
                        as conn:
                    return await job(conn)
            except PoolTimeout as exc:
                raise await self._unreachable() from exc
            except UnicodeEncodeError as exc:  # a lone surrogate in a value's text
                raise _unicode_error(exc) from exc
            except psycopg.Error as exc:
                state = exc.sqlstate or ""
                if state.startswith("PL") or state == UNIQUE_VIOLATION:
                    raise ServerRefusal(state, _detail(exc), exc.diag.constraint_name,
                                        exc.diag.message_detail) from exc
                lost = lost_connection(exc)
                if lost and not pool.closed:
                    await pool.check()  # the other idle connections died with this one
                again = state in _NOT_APPLIED or (idempotent and lost)
                if not again or time.monotonic() + delay > deadline:
                    raise translate(exc, self.where) from exc
                _log.warning("database %s: %s; trying again", self.where, _detail(exc))
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_DELAY_S)

    async def _unreachable(self) -> StoreError:
        """Why no connection came within ``retry_for``: asked of the server directly."""
        try:
            conn = await self.connect()
        except StoreError as exc:
            kind = StoreUnreachable if isinstance(exc, StoreUnreachable) else StoreError
            return kind(f"PostgreSQL at {self.where} did not answer for "
                        f"{self.url.retry_for:g}s: {exc}")
        await conn.close()
        return StoreError(f"database {self.where}: every one of the pool's "
                          f"{self.url.pool_max} connections stayed busy for "
                          f"{self.url.retry_for:g}s (raise pool_max in the URL)")

    async def fetchall(self, query: str, params: dict[str, Any] | None = None, *,
                       idempotent: bool = True) -> list[Row]:
        async def job(conn: AsyncConnection[Row]) -> list[Row]:
            return await (await conn.execute(query, params)).fetchall()

        return await self.run(job, idempotent=idempotent)

    async def fetchone(self, query: str, params: dict[str, Any] | None = None, *,
                       idempotent: bool = True) -> Row | None:
        async def job(conn: AsyncConnection[Row]) -> Row | None:
            return await (await conn.execute(query, params)).fetchone()

        return await self.run(job, idempotent=idempotent)

    async def execute(self, query: str, params: dict[str, Any] | None = None, *,
                      idempotent: bool = True) -> int:
        """The number of rows the statement changed."""
        async def job(conn: AsyncConnection[Row]) -> int:
            return (await conn.execute(query, params)).rowcount

        return await self.run(job, idempotent=idempotent)
