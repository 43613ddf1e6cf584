"""``GET /api/runs/{id}/events``: the run's history as Server-Sent Events.

One SSE event per stored event, in order: ``id:`` its sequence number, ``data:`` JSON
``{"seq", "at", "kind", "step_id", "data"}`` (``at`` ISO-8601 UTC; every kind passes
through: step, attempt, run, note, and any kind added later, such as partial outputs).
No ``event:`` field, so ``EventSource.onmessage`` sees them all.  The stream stays open
until the run ends (completed, failed, cancelled), then closes once every event was
sent; a comment line every ``KEEPALIVE_S`` keeps proxies from closing it.
``Last-Event-ID`` (what browsers send when they reconnect) or ``?after=SEQ`` resumes
after that event.  A run that ended with nothing after the resume point answers 204
(No Content), which tells a browser's ``EventSource`` to stop reconnecting.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import Response, StreamingResponse

from ...core.states import FINAL_RUN_STATES
from ...runtime.results import iso
from ...store.base import EventRecord
from ..errors import ApiError
from ..models import ErrorBody
from ..runtime import ServerRuntime
from .deps import runtime
from .runs import get_run_or_404

router = APIRouter(prefix="/api/runs", tags=["events"])
KEEPALIVE_S = 15.0
MAX_SEQ = 2**63 - 1  # the stores' largest sequence number
_SEQ = re.compile(r"^[0-9]{1,19}$")


def sse(event: EventRecord) -> str:
    data = {"seq": event.seq, "at": iso(event.at), "kind": event.kind,
            "step_id": event.step_id, "data": event.data}
    return f"id: {event.seq}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


def _resume_point(last_event_id: str | None, after: int | None) -> int:
    if last_event_id is not None and last_event_id.strip():
        text = last_event_id.strip()
        if not _SEQ.match(text) or int(text) > MAX_SEQ:
            raise ApiError(400, "invalid_last_event_id",
                           f"Last-Event-ID must be an event's sequence number (0 to "
                           f"{MAX_SEQ}), not {text[:40]!r}", {"last_event_id": text[:40]})
        return int(text)
    return after or 0


@router.get("/{run_id}/events", response_class=StreamingResponse,
            responses={200: {"content": {"text/event-stream": {}}},
                       404: {"model": ErrorBody}})
async def run_events(run_id: str, request: Request,
                     rt: Annotated[ServerRuntime, Depends(runtime)],
                     last_event_id: Annotated[str | None, Header()] = None,
                     after: Annotated[int | None, Query(ge=0, le=MAX_SEQ)] = None) -> Response:
    """Stream the run's events, live until it ends."""
    run = await get_run_or_404(rt, run_id)
    start = _resume_point(last_event_id, after)
    if run.status in FINAL_RUN_STATES and not await rt.store.get_events(run_id, after=start):
        # nothing more will come: 204 tells a reconnecting EventSource to stop
        return Response(status_code=204)
    return StreamingResponse(_stream(rt, run_id, start, request),
                             media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache",
                                      "X-Accel-Buffering": "no"})


async def _stream(rt: ServerRuntime, run_id: str, after: int,
                  request: Request) -> AsyncIterator[str]:
    unfollow = rt.follow(run_id)
    try:
        async for chunk in _events(rt, run_id, after, request):
            yield chunk
    finally:
        unfollow()


async def _events(rt: ServerRuntime, run_id: str, after: int,
                  request: Request) -> AsyncIterator[str]:
    last = after
    quiet_since = time.monotonic()
    yield "retry: 1000\n\n"
    while not rt.closing.is_set():
        changed = rt.watch(run_id)  # before reading: no change slips in between
        async with rt.reads:  # two reads, one after the other: one slot
            run = await rt.store.get_run(run_id)
            events = await rt.store.get_events(run_id, after=last)
        for event in events:
            yield sse(event)
            last = event.seq
        if events:
            quiet_since = time.monotonic()
        if run.status in FINAL_RUN_STATES:
            # the run's final status was read before its events: every event is sent
            return
        if await request.is_disconnected():
            return
        if time.monotonic() - quiet_since >= KEEPALIVE_S:
            quiet_since = time.monotonic()
            yield ": keep-alive\n\n"
        closing = asyncio.ensure_future(rt.closing.wait())
        waiting = asyncio.ensure_future(changed.wait())
        try:
            await asyncio.wait([closing, waiting], timeout=rt.events_poll,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            closing.cancel()
            waiting.cancel()
