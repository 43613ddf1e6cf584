"""Python steps of the data-collection example (called by flow.yaml).

- ``discover`` lists the stations to collect from a JSON catalogue: how many there are
  is only known when the run runs (edit ``stations.json`` and the map grows or shrinks).
- ``fetch_readings`` collects one station (one map item). The Porto feed is "flaky": it
  fails its first call in this process with ConnectionError, so its item completes on
  attempt 2 under the inline step's retry policy.
- ``summarize`` aggregates the readings of every station.

Readings are computed from the station record, so every run gives the same numbers.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

CATALOGUE = Path(__file__).with_name("stations.json")

FLAKY = {"OPO"}  # stations whose feed fails its first call
_calls: dict[str, int] = {}
_lock = threading.Lock()  # sync steps run in a thread pool


def discover(catalogue: str | None = None, only_active: bool = True) -> list[dict[str, Any]]:
    """The station records to collect, in catalogue order."""
    path = Path(catalogue) if catalogue else CATALOGUE
    records = json.loads(path.read_text(encoding="utf-8"))["stations"]
    return [r for r in records if r.get("active", True) or not only_active]


def fetch_readings(item: dict[str, Any], index: int) -> dict[str, Any]:
    """Readings of one station (24 hourly temperatures), as a remote feed would give."""
    station = str(item["id"])
    with _lock:
        _calls[station] = call = _calls.get(station, 0) + 1
    if station in FLAKY and call == 1:
        raise ConnectionError(f"feed of station {station} timed out (call {call})")
    # a deterministic day: colder with altitude, a sine-like curve over the hours
    base = 21.0 - 0.0065 * float(item["elevation_m"])
    curve = [0, -1, -1.5, -2, -2, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 4, 4.5, 4.5, 4, 3.5,
             2.5, 1.5, 1, 0.5, 0, -0.5, -0.5, -1]
    temps = [round(base + c, 1) for c in curve]
    return {"station": station, "city": item["city"], "position": index,
            "min": min(temps), "max": max(temps),
            "mean": round(sum(temps) / len(temps), 2), "fetched_on_call": call}


def summarize(readings: list[dict[str, Any]]) -> dict[str, Any]:
    """One report over every station's readings."""
    if not readings:
        return {"stations": 0, "warmest": None, "coldest": None, "mean_of_means": None,
                "by_city": {}}
    warmest = max(readings, key=lambda r: r["mean"])
    coldest = min(readings, key=lambda r: r["mean"])
    return {
        "stations": len(readings),
        "warmest": warmest["city"],
        "coldest": coldest["city"],
        "mean_of_means": round(sum(r["mean"] for r in readings) / len(readings), 2),
        "by_city": {r["city"]: r["mean"] for r in readings},
    }
