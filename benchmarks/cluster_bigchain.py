"""``cluster.py --only bigchain``: what a large output early in a long run costs every
later step.

A chain of ``n`` python steps (1,000; ``--quick``: 200) on ``--workers`` ``plait
worker`` processes (one fresh database per mode).  The first step
(``cluster_steps:head``) returns a JSON object of ``input.first_bytes`` bytes: 100,000
(the *big* chain) or 100 (the *small* one); every later step (``cluster_steps:relay``)
reads its parent's output and returns a small object.  Both chains are the same
definition, started with ``plait run --detach`` on idle workers, interleaved big,
small, big, small... (``pairs`` pairs); each run's output is checked (the last step's
count, and the second step having seen the whole document).  Per step: from the first
body's start to the last body's end, over ``n``.  Reported per mode (eager workers, and
``--no-eager``: every attempt a ticket): the median per-step time of each chain, the
ratio big/small of every pair, their median and spread (min, max).
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

from cluster import Cluster, fresh_database, submit, wait_all
from harness import fmt_num, met

BIG, SMALL = 100_000, 100
TARGET = 1.5  # the big chain's per-step time within 1.5x the small one's


def chain_definition(n: int) -> str:
    steps: list[dict[str, Any]] = [{"id": "s0", "type": "python",
                                    "call": "cluster_steps:head"}]
    steps += [{"id": f"s{i}", "type": "python", "call": "cluster_steps:relay",
               "depends_on": [f"s{i - 1}"]} for i in range(1, n)]
    return json.dumps({"name": "bench-bigchain", "concurrency": 10_000, "steps": steps})


def per_step(shown: dict[str, Any], n: int, first_bytes: int) -> float:
    """Seconds per step of one finished chain, after checking what it computed."""
    if shown.get("status") != "completed":
        raise RuntimeError(f"run {shown.get('run_id')} ended {shown.get('status')}: "
                           f"{shown.get('error')}")
    outs = {sid: step["output"] for sid, step in shown["steps"].items()}
    last = outs[f"s{n - 1}"]
    if last["n"] != n:
        raise RuntimeError(f"the chain's last step counted {last['n']}, expected {n}")
    if outs["s1"]["seen"] != max(0, first_bytes - 60):
        raise RuntimeError(f"s1 saw a document of {outs['s1']['seen']} characters")
    return (last["t1"] - outs["s0"]["t0"]) / n


def mode(server: str, workers: int, concurrency: int, path: Path, n: int, pairs: int,
         extra: tuple[str, ...]) -> dict[str, Any]:
    big: list[float] = []
    small: list[float] = []
    with fresh_database(server, "plait_bench") as url, \
            Cluster(url, workers, concurrency, extra=extra):
        time.sleep(2)  # the workers are up and idle
        for _ in range(pairs):
            for size, into in ((BIG, big), (SMALL, small)):
                run_id = submit(url, path, {"first_bytes": size})
                (shown,) = wait_all(url, [run_id], 900)
                into.append(per_step(shown, n, size))
    ratios = sorted(b / s for b, s in zip(big, small, strict=True))
    return {"options": " ".join(extra), "steps": n, "pairs": pairs,
            "big_per_step_ms": round(statistics.median(big) * 1e3, 3),
            "small_per_step_ms": round(statistics.median(small) * 1e3, 3),
            "big_tries_ms": [round(x * 1e3, 3) for x in big],
            "small_tries_ms": [round(x * 1e3, 3) for x in small],
            "ratio_median": round(statistics.median(ratios), 3),
            "ratio_min": round(ratios[0], 3), "ratio_max": round(ratios[-1], 3)}


def bigchain(server: str, workers: int, concurrency: int, tmp: Path, quick: bool,
             no_eager: tuple[str, ...]) -> dict[str, Any]:
    n = 200 if quick else 1000
    path = tmp / "bigchain.yaml"
    path.write_text(chain_definition(n))
    return {"first_bytes": {"big": BIG, "small": SMALL}, "workers": workers,
            "concurrency": concurrency,
            "eager": mode(server, workers, concurrency, path, n, 3, ()),
            "no_eager": mode(server, workers, concurrency, path, n, 3, no_eager)}


def rows(result: dict[str, Any]) -> list[list[str]]:
    """Rows for the report's table: what, measured, threshold, met."""
    out = []
    for key, label in (("eager", "eager workers"), ("no_eager", "`--no-eager` workers "
                                                    "(every attempt a ticket)")):
        m = result[key]
        out.append([
            f"{m['steps']:,}-step chain, first step returns 100 KB vs 100 B, "
            f"{result['workers']} workers, {label}; {m['pairs']} interleaved pairs",
            f"{fmt_num(m['big_per_step_ms'], 2)} ms vs {fmt_num(m['small_per_step_ms'], 2)}"
            f" ms per step: ratio {m['ratio_median']:.2f} (pairs {m['ratio_min']:.2f}"
            f"-{m['ratio_max']:.2f})",
            f"<= {TARGET}x", met(m["ratio_median"] <= TARGET)])
    return out
