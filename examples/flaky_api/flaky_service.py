"""Simulated remote services for the flaky-api example (called by flow.yaml).

Each ``FlakyService`` counts its calls in this process and fails the first
``fail_first`` of them with ConnectionError, like a service that is briefly down.
Counting calls (rather than reading the attempt number) keeps the step functions
honest: they do not know they are being retried.
"""

from __future__ import annotations

import threading


class FlakyService:
    def __init__(self, name: str, fail_first: int) -> None:
        self.name = name
        self.fail_first = fail_first
        self.calls = 0
        self._lock = threading.Lock()  # sync steps run in a thread pool

    def call(self) -> int:
        """Count a call; raise ConnectionError while the service is still 'down'."""
        with self._lock:
            self.calls += 1
            number = self.calls
        if number <= self.fail_first:
            raise ConnectionError(f"{self.name} API unavailable (call {number}, "
                                  f"down for the first {self.fail_first} calls)")
        return number


RATES = FlakyService("rates", fail_first=2)
FORECAST = FlakyService("forecast", fail_first=1_000)
NEWS = FlakyService("news", fail_first=1_000)


def fetch_rates(currency: str) -> dict[str, object]:
    call = RATES.call()
    return {"currency": currency, "rate": 1.08, "served_on_call": call}


def fetch_forecast(city: str) -> dict[str, object]:
    FORECAST.call()
    return {"city": city, "forecast": "sunny", "source": "api"}


def fetch_news() -> dict[str, object]:
    NEWS.call()
    return {"headlines": ["live headline"], "source": "api"}


def cached_news(error: str) -> dict[str, object]:
    """The fallback of fetch_news: receives the last error and serves a cached copy."""
    return {"headlines": ["cached headline"], "source": "cache", "because": error}
