"""PostgreSQL for tests: the server's URL, fresh databases made from a migrated
template, and the rule that CI never skips a database test.

The server comes from ``PLAIT_TEST_DATABASE_URL`` (default DEFAULT_URL: trust auth as
user ``postgres``).  Its database is only the maintenance connection: every test module
gets a database of its own (the ``pg_database`` fixture of tests/conftest.py), cloned
from a template that holds plait's migrated schema:

- the template, ``plait_tpl_<hash of the migrations>``, is made once per schema and
  kept (later sessions, and other checkouts with the same migrations, reuse it; a
  checkout with other migrations gets its own).  It is made under an advisory lock and
  marked complete only once migrated, so concurrent sessions neither make it twice nor
  clone a half-made one; it then refuses connections, so nothing (autovacuum included)
  is connected to it when it is cloned ("source database is being accessed by other
  users").
- a test database, ``plait_t_<random>``, is ``CREATE DATABASE ... TEMPLATE`` (a file
  copy: far quicker than migrating), dropped ``WITH (FORCE)`` after its module, and
  labelled with its host and process so a later session drops the ones a killed
  session left behind.

Outside CI a server that does not answer skips the test with the reason; under
``CI=true`` it FAILS it (CI must never silently skip the database it is meant to test).
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg import sql

from plait.store.postgres_url import redact
from plait.store.sql import migrations

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
# the session-level advisory lock held while a template is made ("plaittpl")
TEMPLATE_LOCK = 0x706C61697474706C
CLONE_TRIES = 20
_COMPLETE = "plait test template: complete"
_LABEL = "plait test database of "  # + host:pid


def server_url() -> str:
    return os.environ.get("PLAIT_TEST_DATABASE_URL", DEFAULT_URL)


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


def unreachable(message: str) -> NoReturn:
    """Skip the test, or fail it under CI=true."""
    if in_ci():
        pytest.fail(f"{message} (CI=true: a database test may not be skipped)")
    pytest.skip(message)


def database_url(url: str, name: str) -> str:
    """``url`` naming database ``name`` instead (user, host and options kept)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


def database_name(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def schema_hash() -> str:
    digest = hashlib.sha256()
    for migration in migrations("postgres"):
        digest.update(migration.name.encode() + b"\0" + migration.sql.encode() + b"\0")
    return digest.hexdigest()[:12]


class Databases:
    """Makes and drops test databases on one server, through one maintenance
    connection (synchronous psycopg, autocommit)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.conn = psycopg.connect(url, autocommit=True, connect_timeout=5)
        self.label = f"{_LABEL}{socket.gethostname()}:{os.getpid()}"
        self._template: str | None = None
        # A DROP DATABASE waits for a checkpoint (seconds on a busy machine): drops run
        # on a thread of their own, over connections of their own, while the next tests
        # run; close() waits for them and fails if one did
        self._dropper = ThreadPoolExecutor(1, thread_name_prefix="pgutil-drop")
        self._drops: list[Future[None]] = []
        # and the next migrated database is cloned ahead, on another thread
        self._maker = ThreadPoolExecutor(1, thread_name_prefix="pgutil-create")
        self._spare: Future[str] | None = None

    def close(self) -> None:
        if self._spare is not None:  # cloned ahead for a call that never came
            self.drop(database_url(self.url, self._spare.result()))
        self._maker.shutdown(wait=True)
        self._dropper.shutdown(wait=True)
        self.conn.close()
        for dropped in self._drops:
            dropped.result()

    def template(self) -> str:
        """The migrated template's name, made if no session made it yet."""
        if self._template is None:
            name = f"plait_tpl_{schema_hash()}"
            self.conn.execute("SELECT pg_advisory_lock(%s)", (TEMPLATE_LOCK,))
            try:
                if self._comment(name) != _COMPLETE:
                    self._make_template(name)
                self._drop_orphans()
            finally:
                self.conn.execute("SELECT pg_advisory_unlock(%s)", (TEMPLATE_LOCK,))
            self._template = name
        return self._template

    def _comment(self, name: str) -> str | None:
        row = self.conn.execute(
            "SELECT coalesce(shobj_description(oid, 'pg_database'), '') FROM pg_database "
            "WHERE datname = %s", (name,)).fetchone()
        return None if row is None else str(row[0])

    def _make_template(self, name: str) -> None:
        """Under the lock: (re)make the template, migrated by the store itself."""
        from plait.store.postgres import PostgresStore

        ident = sql.Identifier(name)
        if self._comment(name) is not None:  # a half-made one: a session died making it
            self.conn.execute(sql.SQL("ALTER DATABASE {} WITH IS_TEMPLATE false").format(ident))
            self.conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(ident))
        self.conn.execute(sql.SQL("CREATE DATABASE {}").format(ident))

        async def migrate() -> None:
            store = PostgresStore(database_url(self.url, name))
            await store.open()
            await store.close()

        # on a thread of its own: the caller may be inside an event loop (a fixture
        # of an async test)
        with ThreadPoolExecutor(1) as thread:
            thread.submit(lambda: asyncio.run(migrate())).result()
        self.conn.execute(sql.SQL("ALTER DATABASE {} WITH IS_TEMPLATE true "
                                  "ALLOW_CONNECTIONS false").format(ident))
        self.conn.execute(sql.SQL("COMMENT ON DATABASE {} IS {}").format(
            ident, sql.Literal(_COMPLETE)))

    def create(self, *, migrated: bool = True) -> str:
        """The URL of a new database: plait's schema in it (cloned from the template),
        or empty.  Labelled with this process, so ``_drop_orphans`` knows its owner.
        A migrated one is cloned ahead, in the background, for the next call."""
        if not migrated:
            return database_url(self.url, self._clone("template0", self.conn))
        template = self.template()
        spare, self._spare = self._spare, self._maker.submit(self._clone_apart, template)
        name = spare.result() if spare is not None else self._clone(template, self.conn)
        return database_url(self.url, name)

    def _clone_apart(self, template: str) -> str:
        with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
            return self._clone(template, conn)

    def _clone(self, template: str, conn: psycopg.Connection[Any]) -> str:
        name = f"plait_t_{uuid.uuid4().hex[:16]}"
        statement = sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
            sql.Identifier(name), sql.Identifier(template))
        for attempt in range(CLONE_TRIES):
            try:
                conn.execute(statement)
                break
            except psycopg.errors.ObjectInUse:  # someone was connected to the template
                if attempt == CLONE_TRIES - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))
        conn.execute(sql.SQL("COMMENT ON DATABASE {} IS {}").format(
            sql.Identifier(name), sql.Literal(self.label)))
        return name

    def drop(self, url: str) -> None:
        """Drop the database of ``url`` (in the background, see ``__init__``)."""
        self._drops.append(self._dropper.submit(self._drop, database_name(url)))

    def _drop(self, name: str) -> None:
        with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))

    def _drop_orphans(self) -> None:
        """Drop the test databases that sessions on this host left behind when they
        were killed (their process is gone)."""
        host = socket.gethostname()
        found = self.conn.execute(
            "SELECT datname, shobj_description(oid, 'pg_database') FROM pg_database "
            "WHERE datname LIKE 'plait\\_t\\_%'").fetchall()
        for name, label in found:
            owner = (label or "").removeprefix(_LABEL)
            owner_host, _, pid = owner.rpartition(":")
            if owner_host == host and pid.isdigit() and not _alive(int(pid)):
                self.conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
                                  .format(sql.Identifier(name)))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def connect_databases() -> Databases:
    """``Databases`` on the test server, or skip (fail under CI) when it is down."""
    url = server_url()
    try:
        return Databases(url)
    except psycopg.OperationalError as exc:
        unreachable(f"PostgreSQL server at {redact(url)} did not answer: "
                    f"{' '.join(str(exc).split())}")


def run_status(url: str, run_id: str) -> str | None:
    """The stored status of run ``run_id`` in the database at ``url`` (None before it is
    stored): a cheap poll for tests that wait on processes; what they assert on comes
    from the command line or the API."""
    with psycopg.connect(url, connect_timeout=5) as conn:
        row = conn.execute("SELECT status FROM runs WHERE run_id = %s", (run_id,)).fetchone()
    return None if row is None else str(row[0])


# ---------------------------------------------------------------- a server that goes away


class Proxy:
    """A TCP proxy to the test server, run on the caller's event loop: ``url(db)``
    reaches database ``db`` through it.  ``stop()`` cuts every connection and refuses
    new ones (the server seems down, or crashed); ``start()`` lets connections through
    again on the same port (it came back).  Lets tests take "the server" away without
    stopping the shared one."""

    def __init__(self, target_url: str) -> None:
        parts = urlsplit(target_url)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()

    def url(self, database_url_: str) -> str:
        parts = urlsplit(database_url_)
        user = f"{parts.username}@" if parts.username else ""
        return urlunsplit((parts.scheme, f"{user}127.0.0.1:{self.port}", parts.path,
                           parts.query, parts.fragment))

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for writer in list(self._open):
            writer.transport.abort()  # as a crash would: no goodbye
        self._open.clear()
        if server is not None:
            await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._open.update((writer, up_writer))
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            self._open.discard(writer)
            writer.transport.abort()


class PrivateServer:
    """A PostgreSQL cluster of the test's own (``initdb`` in a temporary directory,
    trust authentication, on a free port), to restart or stop: what no test may do to
    the shared server.  Needs the server's binaries (``pg_config --bindir``, or Debian's
    /usr/lib/postgresql/*/bin); as root, its commands run as the ``postgres`` user.
    ``PrivateServer.make()`` skips the test (fails it under CI) when that is not
    possible."""

    def __init__(self, bindir: Path, as_user: list[str]) -> None:
        self.bindir = bindir
        self._as_user = as_user
        self.directory = Path(tempfile.mkdtemp(prefix="plait-pg-"))
        self.data = self.directory / "data"
        self.port = _free_port()

    @classmethod
    def make(cls) -> PrivateServer:
        bindir = _bindir()
        if bindir is None:
            unreachable("no PostgreSQL server binaries (initdb, pg_ctl) to make a private "
                        "server with")
        as_user: list[str] = []
        if os.geteuid() == 0:
            if shutil.which("runuser") is None:
                unreachable("running as root without runuser: initdb refuses root")
            as_user = ["runuser", "-u", "postgres", "--"]
        server = cls(bindir, as_user)
        if as_user:
            shutil.chown(server.directory, "postgres")
        template = _initdb_template(server)
        subprocess.run([*as_user, "cp", "-a", str(template), str(server.data)], check=True,
                       capture_output=True, timeout=120)
        return server

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run([*self._as_user, str(self.bindir / tool), *args], check=True,
                       capture_output=True, timeout=120, cwd=self.directory)

    def _ctl(self, action: str, *args: str) -> None:
        self._run("pg_ctl", action, "-D", str(self.data), "-w", "-l",
                  str(self.directory / "server.log"), *args)

    def start(self) -> None:
        self._ctl("start", "-o", f"-p {self.port} -k {self.directory} -c fsync=off "
                  f"-c listen_addresses=127.0.0.1")

    def stop(self, mode: str = "fast") -> None:
        self._ctl("stop", "-m", mode)

    def restart(self, mode: str = "fast") -> None:
        self._ctl("restart", "-m", mode)

    def remove(self) -> None:
        try:
            self.stop("immediate")
        except subprocess.CalledProcessError:
            pass  # it was not running
        shutil.rmtree(self.directory, ignore_errors=True)


_TEMPLATES: dict[Path, Path] = {}  # the initdb'd data directory of each bindir


def _initdb_template(server: PrivateServer) -> Path:
    """A data directory made by ``initdb`` once per test session and bindir, removed
    at exit: each private server starts from a copy (initdb takes seconds)."""
    if server.bindir not in _TEMPLATES:
        directory = Path(tempfile.mkdtemp(prefix="plait-pg-template-"))
        atexit.register(shutil.rmtree, directory, True)
        if server._as_user:
            shutil.chown(directory, "postgres")
        server._run("initdb", "-D", str(directory / "data"), "-A", "trust", "-U",
                    "postgres", "--no-sync")
        _TEMPLATES[server.bindir] = directory / "data"
    return _TEMPLATES[server.bindir]


def _bindir() -> Path | None:
    config = shutil.which("pg_config")
    candidates = []
    if config is not None:
        found = subprocess.run([config, "--bindir"], capture_output=True, text=True)
        candidates.append(Path(found.stdout.strip()))
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    for bindir in candidates:
        if (bindir / "initdb").exists() and (bindir / "pg_ctl").exists():
            return bindir
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
