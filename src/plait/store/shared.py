"""One open store per URL for every run of an event loop: ``plait.connect``.

``async with plait.connect("sqlite:///runs.db") as db:`` holds the store of that URL
open; ``wf.run_async(input, db=db)`` runs on it, and so does every other holder of the
same URL in the same event loop: ``run_async(db="sqlite:///runs.db")`` with a URL
string, the CLI commands.  The store is opened by its first holder and closed when its
last holder lets go (reference counted), so 50 concurrent ``run_async`` calls on one URL
share one connection set and one writer, whose commits group together.

What is shared, by URL:

- ``sqlite:///path.db``: one store per file (the path made absolute, so
  ``sqlite:///x.db`` and ``sqlite:////abs/x.db`` are the same file) and ``synchronous``
  mode; read-only holders (``plait runs``...) share a read-only store of their own.
- ``postgresql://...``: one store, so one connection pool, per URL as written (its
  options included); read-only holders share a read-only one.
- ``memory://name``: the named memory store of the process (as ``open_store``).
- ``memory://``: private.  Each ``connect("memory://")`` is a store of its own, shared by
  the runs given that handle; each ``run_async(db="memory://")`` (or no ``db``) runs on a
  private store, as before, so runs that did not ask to share never see each other.

Event loops: a store's connections and its group commit belong to the event loop that
opened it, so sharing is per event loop.  A handle works in the loop that opened it;
used from another (``wf.run(db=handle)``, which starts a loop of its own, or another
thread's loop) it is refused with a StoreError.  Sync code passes the URL instead: each
``wf.run(db=url)`` opens the store and closes it when the run ends.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from ..errors import StoreError
from .base import Store
from .postgres_url import is_postgres, parse_url
from .url import open_store, shown_url


@dataclass(slots=True, eq=False)
class _Shared:
    """An open (or opening) store and how many hold it."""

    store: Store
    ready: asyncio.Future[bool]  # True: open; False: its opener failed, try again
    users: int = 1


@dataclass(slots=True)
class _LoopStores:
    by_key: dict[tuple[str, bool], _Shared] = field(default_factory=dict)


_LOOPS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopStores] = \
    weakref.WeakKeyDictionary()


_SQLITE_KEYS: dict[tuple[str, str], str] = {}  # (url, working directory) -> its key


def shared_key(url: str) -> str | None:
    """The URL that names the same store as ``url`` (None: ``url`` is never shared)."""
    if url == "memory://":
        return None
    if url.startswith("sqlite:"):
        return _sqlite_key(url, os.getcwd())
    if is_postgres(url):
        parse_url(url)  # a bad URL is refused here (psycopg is not loaded for it)
        return url
    if not url.startswith("memory://"):
        open_store(url)  # an unsupported scheme: refused, naming the known ones
    return url


def _sqlite_key(url: str, cwd: str) -> str:
    """The file (absolute: a relative path is relative to ``cwd``) and mode of a URL."""
    key = _SQLITE_KEYS.get((url, cwd))
    if key is None:
        from .sqlite_url import parse_url

        path, synchronous = parse_url(url)
        key = f"sqlite:///{Path(cwd, path)}?synchronous={synchronous}"
        if len(_SQLITE_KEYS) < 1024:  # a process names few files
            _SQLITE_KEYS[(url, cwd)] = key
    return key


async def acquire(url: str, *, read_only: bool = False) -> Store:
    """The open store of ``url`` for this event loop, opened if nobody holds it; every
    ``acquire`` is matched by one ``release``."""
    key = shared_key(url)
    if key is None:
        store = open_store(url, read_only=read_only)
        await store.open()
        return store
    stores = _LOOPS.setdefault(asyncio.get_running_loop(), _LoopStores()).by_key
    while True:
        entry = stores.get((key, read_only))
        if entry is None:
            return await _open_first(stores, (key, read_only), url, read_only)
        entry.users += 1
        try:
            opened = await asyncio.shield(entry.ready)
        except asyncio.CancelledError:
            await _let_go(stores, (key, read_only), entry)
            raise
        if opened:
            return entry.store
        # its opener failed or was cancelled: open it ourselves (and meet its error)


async def _open_first(stores: dict[tuple[str, bool], _Shared], key: tuple[str, bool],
                      url: str, read_only: bool) -> Store:
    store = open_store(url, read_only=read_only)
    entry = stores[key] = _Shared(store, asyncio.get_running_loop().create_future())
    try:
        await store.open()
    except BaseException:
        del stores[key]
        entry.ready.set_result(False)
        raise
    entry.ready.set_result(True)
    return store


async def release(store: Store, url: str, *, read_only: bool = False) -> None:
    """Let go of a store ``acquire`` returned; the last holder closes it."""
    key = shared_key(url)
    if key is None:
        await store.close()
        return
    stores = _LOOPS[asyncio.get_running_loop()].by_key
    entry = stores.get((key, read_only))
    assert entry is not None and entry.store is store, "release without acquire"
    await _let_go(stores, (key, read_only), entry)


async def _let_go(stores: dict[tuple[str, bool], _Shared], key: tuple[str, bool],
                  entry: _Shared) -> None:
    entry.users -= 1
    if entry.users == 0 and stores.get(key) is entry and entry.ready.done() \
            and entry.ready.result():
        del stores[key]  # a later acquire opens a new one, even while this one closes
        await entry.store.close()


class StoreHandle:
    """The shared store of a URL, held open: what ``plait.connect`` returns.

    ``async with plait.connect(url) as db:`` holds it; pass ``db`` as ``db=`` to
    ``Workflow.run_async``.  ``db.store`` is the open ``Store`` (for reading runs back).
    Used outside its ``async with``, or from another event loop, it raises StoreError.
    """

    def __init__(self, url: str, *, read_only: bool = False) -> None:
        self.url = url
        self.read_only = read_only
        self._store: Store | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    @property
    def _shown(self) -> str:
        return shown_url(self.url)

    async def open(self) -> StoreHandle:
        if self._store is not None or self._closed:
            raise StoreError(f"the handle of {self._shown} was already "
                             f"{'opened' if self._store is not None else 'closed'}: "
                             f"call plait.connect({self.url!r}) again for a new one")
        self._store = await acquire(self.url, read_only=self.read_only)
        self._loop = asyncio.get_running_loop()
        return self

    async def close(self) -> None:
        store, self._store = self._store, None
        self._closed = True
        if store is not None:
            await release(store, self.url, read_only=self.read_only)

    @property
    def store(self) -> Store:
        """The open store (StoreError when closed or used from another event loop)."""
        store = self._store
        if store is None:
            state = "closed" if self._closed else "not open yet"
            raise StoreError(f"the store handle of {self._shown} is {state}: use it inside "
                             f"`async with plait.connect({self.url!r}) as db:`")
        try:
            current = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        if current is not self._loop:
            raise StoreError(f"the store handle of {self._shown} belongs to the event loop "
                             f"that opened it and is used here from another one (for "
                             f"example through wf.run, which starts its own): pass the "
                             f"URL instead, or await wf.run_async in the handle's loop")
        return store

    async def __aenter__(self) -> StoreHandle:
        return await self.open()

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    def __repr__(self) -> str:
        state = "open" if self._store is not None else "closed" if self._closed else "new"
        return f"<StoreHandle {self._shown} ({state})>"


def connect(url: str) -> StoreHandle:
    """The shared store of ``url`` (``memory://``, ``sqlite:///path.db``,
    ``postgresql://...``), to hold
    with ``async with``: see this module's docstring."""
    if not isinstance(url, str):
        raise StoreError(f"plait.connect takes a store URL (memory://, "
                         f"sqlite:///path.db, postgresql://...), not "
                         f"{type(url).__name__}")
    shared_key(url)  # a bad URL is refused here, not at the first run
    return StoreHandle(url)

