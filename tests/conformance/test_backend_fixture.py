"""The conformance fixture's own rules: outside CI, skip a backend that does not exist
yet and a server that does not answer; under CI=true, fail both."""

from __future__ import annotations

import pytest

from plait.errors import StoreError
from plait.store import MemoryStore, Store

from .conftest import BACKENDS, POSTGRES, Backend, open_backend

PG = POSTGRES


class DownStore(MemoryStore):
    async def open(self) -> None:
        raise ConnectionRefusedError("connection refused")


def unsupported(url: str) -> Store:
    raise StoreError(f"unsupported store URL {url!r} (scheme 'x')")


def down(url: str) -> Store:
    return DownStore(url)


def test_every_implemented_backend_is_listed() -> None:
    assert [b.name for b in BACKENDS] == ["memory", "sqlite", "postgresql"]
    assert PG in BACKENDS and PG.needs_server and PG.database == "pg_database"
    assert [b.name for b in BACKENDS if b.needs_server] == ["postgresql"]


def test_postgres_url_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: object) -> None:
    monkeypatch.delenv("PLAIT_TEST_DATABASE_URL", raising=False)
    # trust authentication as the server's superuser (the tests may run as root)
    assert PG.url(tmp_path) == "postgresql://postgres@127.0.0.1:5432/test"  # type: ignore[arg-type]
    monkeypatch.setenv("PLAIT_TEST_DATABASE_URL", "postgresql://db:5433/ci")
    assert PG.url(tmp_path) == "postgresql://db:5433/ci"  # type: ignore[arg-type]


async def test_an_unsupported_scheme_is_skipped_outside_ci(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="not implemented yet"):
        await open_backend(PG, "postgresql://x/y", opener=unsupported)


async def test_an_unsupported_scheme_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    # a backend listed in BACKENDS must exist when CI runs the suite
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="not implemented yet.*CI=true"):
        await open_backend(PG, "postgresql://x/y", opener=unsupported)


async def test_a_silent_server_is_skipped_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="did not answer"):
        await open_backend(PG, "postgresql://x/y", opener=down)


async def test_a_silent_server_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        await open_backend(PG, "postgresql://x/y", opener=down)


async def test_a_serverless_backend_that_fails_to_open_is_an_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    local = Backend("sqlite", lambda tmp: "sqlite:///x.db")
    with pytest.raises(ConnectionRefusedError):
        await open_backend(local, "sqlite:///x.db", opener=down)


async def test_other_store_errors_are_not_skipped() -> None:
    def broken(url: str) -> Store:
        raise StoreError("bad path")

    with pytest.raises(StoreError, match="bad path"):
        await open_backend(PG, "postgresql://x/y", opener=broken)


async def test_a_working_backend_is_opened() -> None:
    store = await open_backend(BACKENDS[0], "memory://", opener=MemoryStore)
    assert isinstance(store, MemoryStore)
