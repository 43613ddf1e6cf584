"""``/metrics`` of a real ``plait serve`` app (SQLite) holding a map run of N items
(default 10,000): the size of a scrape, how long a cold one takes (the store read, then
the folding and rendering in a thread) and a cached one, and how late ``/healthz``
answers while a cold scrape is in flight (the event loop's delay).

    .venv/bin/python benchmarks/metrics_scrape.py [--items 10000]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from browser.conftest import Server, serve  # noqa: E402


def big_map(items: int) -> dict[str, Any]:
    return {"name": "bench-map", "input": {"type": "object"},
            "steps": [{"id": "m", "type": "map", "over": "{{ input.xs }}",
                       "step": {"type": "transform", "value": "{{ item }}"}}]}


def healthz_during(server: Server, busy: threading.Thread) -> list[float]:
    """Latencies (ms) of /healthz asked one after the other while ``busy`` runs."""
    waits = []
    busy.start()
    while busy.is_alive():
        t = time.perf_counter()
        assert server.http.get("/healthz").status_code == 200
        waits.append((time.perf_counter() - t) * 1000)
    busy.join()
    return waits


def measure(items: int) -> dict[str, float | int]:
    with tempfile.TemporaryDirectory() as tmp:
        for server in serve(f"sqlite:///{tmp}/metrics.db", None):
            server.register(big_map(items))
            run_id = server.start("bench-map", {"xs": list(range(items))})
            server.wait(run_id, "completed", timeout=600)
            scraped: dict[str, Any] = {}

            def scrape() -> None:
                t = time.perf_counter()
                scraped["body"] = server.http.get("/metrics").content
                scraped["ms"] = (time.perf_counter() - t) * 1000

            waits = healthz_during(server, threading.Thread(target=scrape))
            t = time.perf_counter()
            server.http.get("/metrics")
            cached_ms = (time.perf_counter() - t) * 1000
    return {"items": items, "scrape_bytes": len(scraped["body"]),
            "cold_scrape_ms": round(scraped["ms"], 1), "cached_scrape_ms": round(cached_ms, 1),
            "healthz_during_scrape": len(waits),
            "healthz_max_ms": round(max(waits, default=0.0), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=10_000)
    print(json.dumps(measure(parser.parse_args().items), indent=2))


if __name__ == "__main__":
    main()
