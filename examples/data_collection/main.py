"""The data-collection workflow of flow.yaml, written with the Python API.

    python examples/data_collection/main.py            # active stations
    python examples/data_collection/main.py --all      # inactive ones too

`@wf.map(over=stations)` is the YAML `map` step: the function runs once per item of
the list `stations` returns, as steps `collect[0]`, `collect[1]`..., each with its own
attempts and retries.  The step functions are the ones flow.yaml calls (collector.py).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from collector import discover, fetch_readings, summarize  # next to this file

import plait

wf = plait.Workflow("data-collection-py")


@wf.step
def stations(input: dict[str, Any]) -> list[dict[str, Any]]:
    return discover(only_active=not input.get("include_inactive", False))


@wf.map(over=stations, concurrency=2,
        retry={"max_retries": 2, "initial_delay": "50ms", "retry_on": ["ConnectionError"]})
def collect(item: dict[str, Any], index: int) -> dict[str, Any]:
    return fetch_readings(item, index)


@wf.step(depends_on=["collect"])
def report(collect: list[dict[str, Any]]) -> dict[str, Any]:
    return summarize(collect)


if __name__ == "__main__":
    result = wf.run({"include_inactive": "--all" in sys.argv[1:]})
    for step_id, step in result.steps.items():
        print(f"{step_id:12} {step.status:10} attempts={step.attempts}")
    print(json.dumps(result.output, indent=2))
    sys.exit(0 if result.status == "completed" else 1)
