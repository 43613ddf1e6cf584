"""A ``map`` over N items against a static fan-out of N steps (issue 12: per-item cost
within 1.5x of a static fan-out's per-step cost), on the memory and SQLite stores.

    .venv/bin/python benchmarks/map_speed.py [--n 10000] [--repeat 3] [--out FILE]

Both run the same async python body, which takes its item (the static steps: their
index, from ``with``) and returns data.  The fan-out is ``src -> N steps``; the map is
``src -> map over src's list``.  Concurrency N + 2 for both (a map's items default to
the run's concurrency).  Per-step cost = the best wall time of the repeats / N.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from plait import Workflow


async def body(item: int) -> dict[str, int]:
    return {"item": item, "double": item * 2}


def items(n: int) -> list[int]:
    return list(range(n))


def fanout(n: int) -> Workflow:
    wf = Workflow(f"static-{n}", concurrency=n + 2)
    wf.add_step("src", items, with_={"n": n})
    for i in range(n):
        wf.add_step(f"m{i}", body, depends_on=["src"], with_={"item": i})
    return wf


def mapped(n: int) -> Workflow:
    wf = Workflow(f"map-{n}", concurrency=n + 2)
    wf.add_step("src", items, with_={"n": n})
    wf.map(body, over="src", id="fetch")
    return wf


async def best(wf: Workflow, db: str | None, repeat: int) -> float:
    checked = wf.validate()
    walls = []
    for _ in range(repeat):
        began = time.perf_counter()
        result = await wf.run_async({}, db=db) if db else await wf.run_async({})
        walls.append(time.perf_counter() - began)
        assert result.status == "completed", result.error
    del checked
    return min(walls)


async def measure(n: int, repeat: int, tmp: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"n": n, "stores": {}}
    for store in ("memory", "sqlite"):
        def db(name: str, store: str = store) -> str | None:
            return None if store == "memory" else f"sqlite:///{tmp / name}.db"
        static = await best(fanout(n), db("static"), repeat)
        mapped_s = await best(mapped(n), db("map"), repeat)
        out["stores"][store] = {
            "static_s": static, "map_s": mapped_s,
            "static_per_step_us": static / n * 1e6, "map_per_item_us": mapped_s / n * 1e6,
            "ratio": mapped_s / static}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="map-speed-") as tmp:
        result = asyncio.run(measure(args.n, args.repeat, Path(tmp)))
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
