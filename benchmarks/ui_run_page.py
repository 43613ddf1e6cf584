"""The web UI's run page with a big run: a fan-out of N transform steps (default 10,000)
executed by a real ``plait serve`` app (SQLite), then opened in headless chromium.

Measures what the page downloads (GET /api/runs/{id}, bytes) and how long it takes to
fetch and draw (the page's own counters in ``window.__plaitRunPage``: fetch, render, first
render), and how many DOM nodes the graph, the timeline and the steps table use.

    .venv/bin/python benchmarks/ui_run_page.py [--steps 10000] [--md benchmarks/UI.md]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from browser.conftest import CHROMIUM, serve  # noqa: E402
from browser.workflows import fan_out  # noqa: E402


def measure(steps: int) -> dict[str, float | int]:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        for server in serve(f"sqlite:///{tmp}/ui.db", None):
            definition = fan_out(steps)
            server.register(definition)
            t = time.perf_counter()
            run_id = server.start(definition["name"])
            server.wait(run_id, "completed", timeout=600)
            run_s = time.perf_counter() - t
            with sync_playwright() as pw:
                browser = pw.chromium.launch(
                    executable_path=CHROMIUM, headless=True,
                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
                page = browser.new_page(viewport={"width": 1440, "height": 1000})
                t = time.perf_counter()
                page.goto(f"{server.base}/#/runs/{run_id}")
                page.wait_for_selector("[data-testid=run-status][data-status=completed]",
                                       timeout=120_000)
                page.wait_for_selector("svg.graph [data-node]")
                load_s = time.perf_counter() - t
                stats = page.evaluate("window.__plaitRunPage")
                dom = page.evaluate("document.getElementsByTagName('*').length")
                nodes = page.locator("svg.graph [data-node]").count()
                rows = page.locator(".vrow").count()
                # scrolling the steps table to the end draws the last rows only
                t = time.perf_counter()
                page.eval_on_selector(".vlist.steps",
                                      "el => el.scrollTop = el.scrollHeight")
                page.wait_for_selector(".vlist.steps [data-step=join]", timeout=10_000)
                scroll_ms = (time.perf_counter() - t) * 1000
                browser.close()
    return {"steps": steps + 2, "run_s": round(run_s, 1), "json_bytes": stats["bytes"],
            "fetch_ms": round(stats["fetchMs"]), "render_ms": round(stats["renderMs"]),
            "first_render_ms": round(stats["firstRenderMs"]), "page_load_s": round(load_s, 2),
            "dom_elements": dom, "graph_nodes": nodes, "rows_drawn": rows,
            "scroll_to_end_ms": round(scroll_ms)}


def markdown(result: dict[str, float | int]) -> str:
    mib = int(result["json_bytes"]) / (1024 * 1024)
    return (
        "# The web UI with a big run\n\n"
        "`benchmarks/ui_run_page.py`: a fan-out of "
        f"{result['steps']:,} steps run by `plait serve` (SQLite), its run page opened in "
        "headless Debian chromium (2 shared cores).\n\n"
        "| measure | value |\n|---|---|\n"
        f"| GET /api/runs/{{id}} | {mib:.1f} MiB ({int(result['json_bytes']):,} bytes) |\n"
        f"| fetch + parse in the page | {result['fetch_ms']} ms |\n"
        f"| render (header, graph, Gantt, table) | {result['render_ms']} ms |\n"
        f"| first render after navigation | {result['first_render_ms']} ms |\n"
        f"| navigation to a drawn page | {result['page_load_s']} s |\n"
        f"| DOM elements on the page | {int(result['dom_elements']):,} |\n"
        f"| graph nodes drawn | {result['graph_nodes']} (wide layers clustered) |\n"
        f"| table rows in the DOM | {result['rows_drawn']} (virtualized) |\n"
        f"| scroll the steps table to its end | {result['scroll_to_end_ms']} ms |\n\n"
        f"(running the {result['steps']:,}-step run itself took {result['run_s']} s)\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--md", type=Path, default=None)
    args = parser.parse_args()
    result = measure(args.steps)
    print(json.dumps(result, indent=2))
    if args.md:
        args.md.write_text(markdown(result))


if __name__ == "__main__":
    main()
