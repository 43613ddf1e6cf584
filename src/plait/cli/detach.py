"""``plait run --detach``: the stored run is continued by ``plait resume`` in a
background process of its own session, so it outlives the terminal.

Only a store other processes can open can be handed over: SQLite (the default).  The
child gets an absolute database URL, the directory it was started from, the
definition's directory on PYTHONPATH (so python steps import as they would in the
foreground), and writes its output to ``.plait/logs/RUN_ID.log`` beside the database:
``logs/`` next to a database that lives in a ``.plait`` directory (the default
``./.plait/plait.db`` -> ``./.plait/logs/``), ``.plait/logs/`` next to any other.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..store.base import RunRecord

LOG_DIR = "logs"


@dataclass(frozen=True, slots=True, kw_only=True)
class Detached:
    """The background process continuing a run."""

    pid: int
    log: Path
    db: str  # the absolute URL the process uses


def detachable(url: str) -> bool:
    """Whether another process can continue a run stored at ``url``: a background
    ``plait resume`` (SQLite) or the workers (PostgreSQL)."""
    from ..store.postgres_url import is_postgres

    return url.startswith("sqlite:") or is_postgres(url)


def database_file(url: str) -> Path:
    from ..store.sqlite_url import parse_url

    path, _ = parse_url(url)
    return path.absolute()


def absolute_url(url: str) -> str:
    """``sqlite:///rel.db?x=y`` -> ``sqlite:////cwd/rel.db?x=y`` (same options)."""
    _, sep, query = url.partition("?")
    return f"sqlite:///{database_file(url)}{sep}{query}"


def log_path(url: str, run_id: str) -> Path:
    directory = database_file(url).parent
    base = directory if directory.name == ".plait" else directory / ".plait"
    return base / LOG_DIR / f"{run_id}.log"


def start_resume(run: RunRecord, url: str, definition: Path | None) -> Detached:
    """Start ``python -m plait resume RUN_ID --db URL`` in a new session, detached from
    this terminal, and return at once.  OSError when the log cannot be written or the
    process cannot be started (the run stays stored: ``plait resume`` continues it)."""
    db = absolute_url(url)
    log = log_path(url, run.run_id)
    env = dict(os.environ)
    paths = [str(Path.cwd())]
    if definition is not None:
        paths.insert(0, str(definition.resolve().parent))
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONUNBUFFERED"] = "1"
    argv = [sys.executable, "-m", "plait", "resume", run.run_id, "--db", db]
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as sink:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=sink,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                close_fds=True)
    return Detached(pid=proc.pid, log=log, db=db)
