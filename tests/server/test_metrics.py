"""/metrics on plait serve (issue 13): the store's aggregates and this process's attempt
counters in the Prometheus text format, behind the API's authentication."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

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
