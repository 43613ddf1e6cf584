"""Step functions that API-registered test definitions may call
(PLAIT_ALLOWED_MODULES=server.steps_for_api; tests/ is on sys.path)."""

from __future__ import annotations


def double(n: int) -> int:
    return n * 2


def fail_when(fail: bool) -> str:
    if fail:
        raise ValueError("asked to fail")
    return "ok"
