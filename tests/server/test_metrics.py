"""/metrics on plait serve (issue 13): the store's aggregates and this process's attempt
counters in the Prometheus text format, behind the API's authentication."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from plait.observe import prometheus
from plait.store.observations import MetricsSnapshot

from .conftest import HELLO, TOKEN, Client, register, wait_status


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_count_the_runs_the_server_executed(make_client: Client) -> None:
    client = make_client()
    register(client, HELLO)
    for n in (1, 2):
        run_id = client.post("/api/runs", json={"workflow": "hello",
                                                "input": {"n": n}}).json()["run_id"]
        wait_status(client, run_id, ("completed",))
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples = _samples(response.text)
    assert samples[("plait_runs", (("status", "completed"), ("workflow", "hello")))] == 2
    ended = {labels: v for (name, labels), v in samples.items()
             if name == "plait_attempts_ended_total"}
    assert sum(ended.values()) == 4  # two steps per run, executed by this process


def test_metrics_need_the_token(make_client: Client) -> None:
    client = make_client(token=TOKEN)
    refused = client.get("/metrics")
    assert refused.status_code == 401
    assert refused.json()["error"]["code"]
    allowed = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert allowed.status_code == 200 and "plait_runs" in allowed.text


BIG_MAP: dict[str, Any] = {
    "name": "big-map",
    "input": {"type": "object", "properties": {"xs": {"type": "array"}}},
    "steps": [{"id": "m", "type": "map", "over": "{{ input.xs }}",
               "step": {"type": "transform", "value": "{{ item }}"}}],
}


def test_metrics_answers_without_a_redirect(make_client: Client) -> None:
    client = make_client()
    for path in ("/metrics", "/metrics/"):
        response = client.get(path, follow_redirects=False)
        assert response.status_code == 200, path
        assert "plait_queue_depth" in response.text


def test_a_map_of_10000_items_is_a_few_series(make_client: Client, tmp_path: Path) -> None:
    """Items count under their map step: the scrape of a store holding a 10,000-item
    map run stays small (it was 39 MB with a series per item)."""
    client = make_client(f"sqlite:///{tmp_path}/big.db")
    register(client, BIG_MAP)
    run_id = client.post("/api/runs", json={"workflow": "big-map", "input": {
        "xs": list(range(10_000))}}).json()["run_id"]
    wait_status(client, run_id, ("completed",), timeout=60)
    response = client.get("/metrics")
    assert response.status_code == 200
    assert len(response.content) < 200_000
    assert "m[" not in response.text
    samples = _samples(response.text)
    steps = (("status", "completed"), ("step", "m"), ("workflow", "big-map"))
    assert samples[("plait_steps", steps)] == 10_000 + 1  # the items and the map step
    started = (("step", "m"), ("workflow", "big-map"))
    assert samples[("plait_attempts_started_total", started)] >= 10_000


def test_a_slow_scrape_does_not_hold_the_event_loop(make_client: Client,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's aggregates are folded into series in a thread: while that is held,
    /healthz answers; the scrape completes once it is released."""
    entered, release = threading.Event(), threading.Event()
    order: list[str] = []
    folded = prometheus.bounded

    def held(raw: MetricsSnapshot) -> MetricsSnapshot:
        entered.set()
        release.wait(timeout=30)
        order.append("folded")
        return folded(raw)

    monkeypatch.setattr(prometheus, "bounded", held)
    client = make_client()
    scraped: list[int] = []
    scrape = threading.Thread(target=lambda: scraped.append(client.get("/metrics")
                                                            .status_code))
    scrape.start()
    try:
        assert entered.wait(timeout=30)
        assert client.get("/healthz").status_code == 200
        order.append("healthz")
    finally:
        release.set()
        scrape.join(timeout=30)
    assert order == ["healthz", "folded"]
    assert scraped == [200]
