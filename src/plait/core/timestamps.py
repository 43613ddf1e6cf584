"""How plait writes a moment in JSON: ISO 8601 in UTC with a ``Z`` (the run object of
``plait run --json``, notifications, metrics, the API)."""

from __future__ import annotations

from datetime import UTC, datetime


def iso(ts: float | None) -> str | None:
    """``ts`` (seconds since the epoch) as ``2026-01-02T03:04:05.678000Z``; None stays
    None."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")
