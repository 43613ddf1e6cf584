"""examples/flaky_api: retries with backoff, and fallbacks once retries are spent."""

from __future__ import annotations


def test_attempts_and_fallbacks(plait_run):
    code, result, _ = plait_run("flaky_api/flow.yaml")
    assert code == 0
    assert result["status"] == "completed"
    steps = result["steps"]

    rates = steps["fetch_rates"]  # fails twice, then answers
    assert (rates["status"], rates["attempts"], rates["fallback_used"]) == ("completed", 3, False)
    assert rates["output"]["served_on_call"] == 3

    forecast = steps["fetch_forecast"]  # down: 1 + 2 retries, then the fallback value
    assert (forecast["status"], forecast["attempts"], forecast["fallback_used"]) == (
        "completed", 3, True)
    assert forecast["output"] == {"city": "Lisbon", "forecast": "unknown", "source": "fallback"}

    news = steps["fetch_news"]  # down: 1 + 1 retry, then the fallback function
    assert (news["attempts"], news["fallback_used"]) == (2, True)
    assert news["output"]["source"] == "cache"
    assert news["output"]["because"].startswith("ConnectionError: news API unavailable")

    assert result["output"] == {"report": {"eur_usd": 1.08, "forecast": "unknown",
                                           "headline": "cached headline"}}
    # retries waited: 50ms then 100ms (plus jitter) before the third attempt of fetch_rates
    assert result["duration_s"] >= 0.14
