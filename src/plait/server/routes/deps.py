"""What every route gets from the app: the runtime and the store."""

from __future__ import annotations

from fastapi import Request

from ..runtime import ServerRuntime


def runtime(request: Request) -> ServerRuntime:
    value = request.app.state.runtime
    assert isinstance(value, ServerRuntime)
    return value
