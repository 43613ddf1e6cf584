"""Settings and fixtures shared by every test directory.

PostgreSQL: ``pg_database`` is the URL of a database of the test module's own, with
plait's schema (see pgutil.py); ``pg_empty_database`` one without (each test its own).

Slow tests: every test of ``acceptance/`` and ``examples/`` (the ``plait`` command or an
example as a subprocess) and ``browser/`` (chromium) is marked ``slow``, as is each module elsewhere that starts
processes, workers or servers (its ``pytestmark``); ``make test-fast`` leaves them out.

Hypothesis profiles: ``default`` keeps the property tests quick enough for every run of
the suite; ``thorough`` (``HYPOTHESIS_PROFILE=thorough``) explores much further.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

import pgutil

# ---------------------------------------------------------------- compiled bytecode

# The processes that tests start (`plait`, workers, servers, examples; about a thousand)
# inherit this environment.  Where PYTHONDONTWRITEBYTECODE is set (as in this project's
# development shells), each of them would compile every module it imports from source, a
# quarter of a second of CPU per `plait run`; instead they share one cache of compiled
# modules outside the work tree (PYTHONPYCACHEPREFIX), filled by the first process that
# imports each module.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    os.environ.setdefault("PYTHONPYCACHEPREFIX", str(
        Path(tempfile.gettempdir()) / f"plait-tests-pycache-{os.getuid()}"))


settings.register_profile(
    "default",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "thorough",
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


# ---------------------------------------------------------------- slow directories

# every module there starts `plait` (or an example) as a process, or a browser
_SLOW_DIRECTORIES = ("acceptance", "browser", "examples")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    tests = Path(__file__).parent
    slow = [tests / name for name in _SLOW_DIRECTORIES]
    for item in items:
        if any(item.path.is_relative_to(directory) for directory in slow):
            item.add_marker(pytest.mark.slow)


# ---------------------------------------------------------------- PostgreSQL


@pytest.fixture(scope="session")
def pg_databases() -> Iterator[pgutil.Databases]:
    """The test server's database maker; skips (fails under CI=true) when it is down."""
    databases = pgutil.connect_databases()
    try:
        yield databases
    finally:
        databases.close()


@pytest.fixture(scope="module")
def pg_database(pg_databases: pgutil.Databases) -> Iterator[str]:
    """The URL of a fresh database with plait's schema, for the test module; dropped
    after it."""
    url = pg_databases.create()
    try:
        yield url
    finally:
        pg_databases.drop(url)


@pytest.fixture
def pg_empty_database(pg_databases: pgutil.Databases) -> Iterator[str]:
    """The URL of a fresh database without any table, for the test; dropped after it."""
    url = pg_databases.create(migrated=False)
    try:
        yield url
    finally:
        pg_databases.drop(url)


# ---------------------------------------------------------------- a step type plugin

_PLUGIN_MODULE = '''
from plait.steps import StepType


async def _shout(call):
    return {"shout": str(call.render(call.step.config["text"], "text")).upper()}


SHOUT = StepType(name="shout", run=_shout, fields=frozenset({"text"}),
                 required=frozenset({"text"}))
'''


@pytest.fixture
def step_type_plugin(tmp_path: Path) -> Path:
    """A directory holding an installed distribution (a ``*.dist-info`` with
    ``entry_points.txt``) that advertises two ``plait.step_types``: ``shout`` (a
    StepType upper-casing its ``text`` field) and ``broken`` (whose import raises
    RuntimeError).  Put the directory on sys.path / PYTHONPATH to install it."""
    root = tmp_path / "site"
    (root / "plaitdemo_shout").mkdir(parents=True)
    (root / "plaitdemo_shout" / "__init__.py").write_text(_PLUGIN_MODULE)
    (root / "plaitdemo_broken").mkdir()
    (root / "plaitdemo_broken" / "__init__.py").write_text(
        'raise RuntimeError("plaitdemo_broken needs PLAITDEMO_TOKEN")\n')
    info = root / "plaitdemo-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: plaitdemo\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[plait.step_types]\nshout = plaitdemo_shout:SHOUT\n"
        "broken = plaitdemo_broken:TYPE\n")
    return root


# ---------------------------------------------------------------- `plait` processes


def pytest_sessionfinish() -> None:
    import plaitproc  # the warm process that `plait` commands are forked from

    plaitproc.close()
