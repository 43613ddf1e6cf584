"""What every route gets from the app: the runtime and the store."""

from __future__ import annotations

from fastapi import Request

from ..runtime import ServerRuntime


async def runtime(request: Request) -> ServerRuntime:
    # async: FastAPI runs a plain function dependency in its thread pool, a thread hop
    # on every request for a one-attribute read
    value = request.app.state.runtime
    assert isinstance(value, ServerRuntime)
    return value
