"""The ``store`` fixture: one conformance suite, parametrised over every backend.

A backend is one entry of ``BACKENDS``: its id, how to build its URL for a test, and
whether it needs a server.  Adding a backend to plait means the suite runs against it
with no edit here: until ``open_store`` accepts the URL's scheme the param is skipped on
a laptop (the backend does not exist yet) and fails under ``CI=true``; once it does, the
suite must pass.

Servers (PostgreSQL): when the backend exists but the server does not answer, the test
is skipped on a laptop and FAILS under ``CI=true`` (CI must never silently skip the
database it is meant to test).  The server URL comes from ``PLAIT_TEST_DATABASE_URL``;
each test module runs on a database of its own (the backend's ``database`` fixture,
``pg_database``: cloned from a migrated template, dropped after the module; see
tests/pgutil.py).

Tests never rely on a fresh database: every name and run id they use is unique (see the
``uid`` fixture), so the tests of a module share its database without truncation.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from pgutil import DEFAULT_URL as DEFAULT_POSTGRES_URL
from pgutil import in_ci
from plait.errors import StoreError
from plait.store import Store, open_store


@dataclass(frozen=True)
class Backend:
    name: str
    url: Callable[[Path], str]  # the server's URL, for a backend with a ``database``
    needs_server: bool = False
    database: str | None = None  # the fixture giving the URL of a database per module


POSTGRES = Backend("postgresql",
                   lambda tmp: os.environ.get("PLAIT_TEST_DATABASE_URL", DEFAULT_POSTGRES_URL),
                   needs_server=True, database="pg_database")

# A backend joins this list together with its implementation.  Listing it before the
# backend exists would make every CI run skip it, and under CI=true a skipped database
# test is a failure.
BACKENDS = [
    Backend("memory", lambda tmp: "memory://"),
    Backend("sqlite", lambda tmp: f"sqlite:///{tmp}/x.db"),
    POSTGRES,
]


def _unsupported(exc: StoreError) -> bool:
    return "unsupported store url" in str(exc).lower()


def _params(*names: str) -> list[object]:
    """The ``store`` fixture's params: every backend, or those ``names`` (a case that
    applies to some stores only is generated for those, never skipped for the rest:
    ``@pytest.mark.parametrize("store", backend_params("sqlite"), indirect=True)``)."""
    marks = {"postgresql": [pytest.mark.postgres]}
    return [pytest.param(b, id=b.name, marks=marks.get(b.name, [])) for b in BACKENDS
            if not names or b.name in names]


backend_params = _params


async def open_backend(backend: Backend, url: str,
                       opener: Callable[[str], Store] = open_store) -> Store:
    """The opened store for ``url``, or skip/fail the test as the module docstring says."""
    try:
        store = opener(url)
    except StoreError as exc:
        if _unsupported(exc):
            message = f"{backend.name} backend not implemented yet: {exc}"
            if in_ci():
                pytest.fail(f"{message} (CI=true: a listed backend may not be skipped)")
            pytest.skip(message)
        raise
    try:
        await store.open()
    except Exception as exc:
        if not backend.needs_server:
            raise
        message = (f"{backend.name} server at {url} did not answer: "
                   f"{type(exc).__name__}: {exc}")
        if in_ci():
            pytest.fail(f"{message} (CI=true: a database backend may not be skipped)")
        pytest.skip(message)
    return store


def backend_url(backend: Backend, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL a test opens ``backend`` at (a fresh database for a server backend)."""
    return str(request.getfixturevalue(backend.database)) if backend.database \
        else backend.url(tmp_path)


@pytest.fixture(params=_params())
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    backend: Backend = request.param
    opened = await open_backend(backend, backend_url(backend, request, tmp_path))
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def uid() -> Callable[[str], str]:
    """Unique names: ``uid("wf")`` -> ``wf-3f2a...``; valid as workflow names."""
    token = uuid.uuid4().hex[:10]
    return lambda prefix: f"{prefix}-{token}"
