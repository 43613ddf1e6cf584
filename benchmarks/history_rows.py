"""Rows of ``events`` a run's history takes on SQLite, per completed step.

    python benchmarks/history_rows.py [STEPS]

Runs a chain of STEPS (default 100) python steps, each completing on its first
attempt, on a fresh SQLite file, then counts the rows of ``events`` and the events
``Store.get_events`` gives back (a step's changes and its attempt's first change of
one batch are one row: see ``store/sql/rows.py``).
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import tempfile
import warnings
from pathlib import Path

from plait import Workflow
from plait.store import open_store


def _step(input: object = None) -> int:
    return 1


def main(steps: int) -> None:
    wf = Workflow("history-rows")
    for n in range(steps):
        wf.add_step(f"s{n}", _step, depends_on=[f"s{n - 1}"] if n else [])
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "runs.db")
        url = f"sqlite:///{path}"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # steps defined in __main__
            result = wf.run({}, db=url)
        assert str(result.status) == "completed", result.status
        conn = sqlite3.connect(path)
        rows = conn.execute("SELECT count(*) FROM events").fetchone()[0]
        by_kind = dict(conn.execute("SELECT kind, count(*) FROM events GROUP BY kind"))
        conn.close()

        async def read() -> int:
            store = open_store(url, read_only=True)
            await store.open()
            try:
                return len(await store.get_events(result.run_id))
            finally:
                await store.close()

        events = asyncio.run(read())
    print(f"{steps} steps: {events} events in {rows} rows of events "
          f"({rows / steps:.2f} rows, {events / steps:.2f} events per step; "
          f"rows by kind {by_kind})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100)
