"""How the command line draws statuses and durations (shared by every renderer)."""

from __future__ import annotations

STATUS_STYLES: dict[str, str] = {
    "completed": "green", "failed": "bold red", "upstream_failed": "red",
    "cancelled": "magenta", "skipped": "dim", "running": "cyan", "queued": "blue",
    "waiting": "yellow", "pending": "dim",
}


def format_seconds(seconds: float | None) -> str:
    """``0.004s``, ``1.25s``, ``3m05s``, ``2h03m``; ``-`` when unknown."""
    if seconds is None:
        return "-"
    if seconds < 10:
        return f"{seconds:.3f}s" if seconds < 1 else f"{seconds:.2f}s"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
