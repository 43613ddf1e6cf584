"""Validating and storing a definition written at run time (a ``workflow`` step's
``definition:`` template or function): the work its step does before the child run
starts, for generated definitions of 10, 100 and 1,000 steps.

    python benchmarks/written_definition.py [--sizes 10 100 1000] [--repeats 15]
        [--db URL] [--out FILE.json]

Each definition is what a planner might write: ``llm``-free, importable-free steps
(``transform`` steps with a template reading an earlier step, each depending on up to
three earlier ones, so the graph has real fan-in), plus ``limits`` and an ``output``.
One measurement is ``plait.steps.planned.written_definition`` (the size and shape
checks, the parent's limits, ``allowed_modules``, then every check loading does) and
``Store.save_workflow`` of its canonical JSON under ``PARENT.STEP``, on a SQLite file
(default) or the store ``--db`` names.  Each repeat changes the description, so each
one stores a new version, as a planner writing a new graph does.  The report gives the
median and the range in milliseconds.  Target: 1,000 steps under 50 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import machine_header, table

from plait.core.model import Limits
from plait.definitions import check_definition
from plait.steps.planned import written_definition
from plait.store import open_store

TARGET_MS = 50.0


def generated(steps: int, seed: int) -> dict[str, Any]:
    """A planner-like definition of ``steps`` steps."""
    body: list[dict[str, Any]] = []
    for i in range(steps):
        parents = [f"s{j}" for j in range(max(0, i - 3), i) if (i + j) % 2 == 0 or j == i - 1]
        value = "{{ input.topic }}" if not parents else \
            "{{ steps." + parents[-1] + ".output }} / " + str(i)
        body.append({"id": f"s{i}", "type": "transform", "value": value,
                     "depends_on": parents})
    return {"name": "anything", "description": f"plan {seed}",
            "input": {"type": "object", "required": ["topic"]},
            "limits": {"max_steps": 5000}, "steps": body,
            "output": "{{ steps.s" + str(steps - 1) + ".output }}"}


async def measure(db: str, sizes: list[int], repeats: int) -> dict[str, Any]:
    store = open_store(db)
    await store.open()
    limits = Limits(max_steps=5000)
    results: dict[str, Any] = {}
    try:
        for size in sizes:
            times = []
            for r in range(repeats + 1):  # the first is a warm-up
                value = generated(size, r)
                started = time.perf_counter()
                checked = written_definition(value, name="bench.execute", step="execute",
                                             limits=limits, check=check_definition)
                await store.save_workflow(checked.spec.name, checked.definition_json,
                                          checked.fingerprint, None)
                elapsed = (time.perf_counter() - started) * 1000
                if r:
                    times.append(elapsed)
            results[str(size)] = {"median_ms": round(statistics.median(times), 2),
                                  "min_ms": round(min(times), 2),
                                  "max_ms": round(max(times), 2)}
    finally:
        await store.close()
    return results


def markdown(db: str, repeats: int, results: dict[str, Any],
             load: tuple[float, float, float]) -> str:
    """The report ``make bench-plans`` writes (benchmarks/PLANS.md, quoted in the README)."""
    lines = machine_header("Checking and storing a definition written at run time", [
        "load average before the run (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in load),
        f"what: a generated definition (a random DAG) checked as a `workflow` step's "
        f"written definition is, with every check and the parent's limits, then stored as "
        f"a workflow version ({db.split(':')[0]}); median of {repeats}"])
    rows = []
    for size, row in results.items():
        largest = int(size) == 1000
        met = ("yes" if row["median_ms"] < TARGET_MS else "**no**") if largest else "—"
        rows.append((f"{int(size):,}", f"{row['median_ms']:.2f}",
                     f"{row['min_ms']:.2f} – {row['max_ms']:.2f}",
                     f"< {TARGET_MS:g} ms" if largest else "—", met))
    return "\n".join(lines + table(("steps", "median (ms)", "range (ms)", "target", "met"),
                                   rows))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--db", default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--md", default=None, help="also write the report as Markdown")
    args = parser.parse_args()
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or f"sqlite:///{Path(tmp) / 'bench.db'}"
        results = asyncio.run(measure(db, args.sizes, args.repeats))
    print(f"validate + store a definition written at run time ({db.split(':')[0]}, "
          f"median of {args.repeats}):")
    for size, row in results.items():
        print(f"  {int(size):>6,} steps  {row['median_ms']:8.2f} ms  "
              f"(range {row['min_ms']:.2f} - {row['max_ms']:.2f})")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    if args.md:
        Path(args.md).write_text(markdown(db, args.repeats, results, load))
    largest = results.get("1000")
    if largest is not None and largest["median_ms"] > TARGET_MS:
        print(f"1,000 steps: over the {TARGET_MS:g} ms target", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
