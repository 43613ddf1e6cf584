"""``POST /api/hooks/{name}``: start workflow ``name`` from a signed webhook.

A sender signs each delivery (docs/server.md shows it with openssl):

- ``X-Plait-Timestamp: T``: the Unix time of sending, in whole seconds;
- ``X-Plait-Signature: sha256=HEX``: HEX the HMAC-SHA256, under
  ``PLAIT_WEBHOOK_SECRET``, of ``T`` + ``.`` + the hook name + ``.`` + the raw body.

The signature binds the body to its hook (a delivery to ``/api/hooks/a`` cannot start
``b``) and to its time: one whose timestamp is more than ``TOLERANCE_S`` (5 minutes)
from the server's clock is refused, so a captured delivery cannot be replayed later.
``X-Plait-Delivery: ID`` (optional, up to 200 of ``A-Z a-z 0-9 . _ : -``) makes a
delivery count once: the store keeps the run each delivery id of a hook started, for
every server on it (``Store.claim_delivery``), and a delivery whose id was received
already answers 200 with that run's id and ``"duplicate": true``, starting nothing.
Ids are kept for twice the tolerance (the longest a signed delivery can be replayed).

Unsigned, badly signed, stale, or no secret configured: 401 (nothing is parsed or
started).  The body, a JSON value, is the run's input.  Hooks need no bearer token: the
signature authenticates them.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from ..errors import ApiError
from ..models import ErrorBody, HookStarted
from ..runtime import ServerRuntime
from .deps import runtime
from .runs import start_run

router = APIRouter(prefix="/api/hooks", tags=["hooks"])
SIGNATURE_HEADER = "X-Plait-Signature"
TIMESTAMP_HEADER = "X-Plait-Timestamp"
DELIVERY_HEADER = "X-Plait-Delivery"
TOLERANCE_S = 300
_TIMESTAMP = re.compile(r"^[0-9]{1,12}$")
_DELIVERY = re.compile(r"^[A-Za-z0-9._:-]{1,200}$")
_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": HookStarted, "description": "a duplicate delivery: nothing started"},
    400: {"model": ErrorBody}, 401: {"model": ErrorBody}, 404: {"model": ErrorBody},
    422: {"model": ErrorBody}}


def signed_content(timestamp: str, name: str, body: bytes) -> bytes:
    return f"{timestamp}.{name}.".encode() + body


def signature(secret: str, timestamp: str, name: str, body: bytes) -> str:
    """``sha256=HEX``: what a sender puts in X-Plait-Signature."""
    digest = hmac.new(secret.encode(), signed_content(timestamp, name, body), hashlib.sha256)
    return "sha256=" + digest.hexdigest()


def _unauthorized(code: str, message: str) -> ApiError:
    return ApiError(401, code, message, None, {"WWW-Authenticate": "Signature"})


def _timestamp(given: str | None, now: float) -> str:
    """The X-Plait-Timestamp sent, when it is within the tolerance of ``now``."""
    text = (given or "").strip()
    if not _TIMESTAMP.match(text):
        raise _unauthorized("invalid_timestamp", f"missing or invalid {TIMESTAMP_HEADER}: "
                            f"expected the Unix time of sending in seconds")
    if abs(int(text) - now) > TOLERANCE_S:
        raise _unauthorized("stale_timestamp", f"{TIMESTAMP_HEADER} {text} is more than "
                            f"{TOLERANCE_S} s from the server's time {int(now)}: sign each "
                            f"delivery when sending it (and keep the sender's clock right)")
    return text


def _check_signature(secret: str | None, request: Request, name: str, body: bytes,
                     now: float) -> None:
    if secret is None:
        raise _unauthorized("unauthorized", "webhooks are disabled: the server has no "
                            "PLAIT_WEBHOOK_SECRET")
    timestamp = _timestamp(request.headers.get(TIMESTAMP_HEADER), now)
    given = request.headers.get(SIGNATURE_HEADER, "").strip().lower()
    if not hmac.compare_digest(given.encode(),
                               signature(secret, timestamp, name, body).encode()):
        raise _unauthorized("invalid_signature", (
            f"missing or invalid {SIGNATURE_HEADER}: expected sha256=HEX, the HMAC-SHA256 "
            f"with PLAIT_WEBHOOK_SECRET of '{{{TIMESTAMP_HEADER}}}.{{hook name}}.' followed "
            f"by the body"))


def _delivery_id(request: Request) -> str | None:
    given = request.headers.get(DELIVERY_HEADER)
    if given is None:
        return None
    if not _DELIVERY.match(given.strip()):
        raise ApiError(400, "invalid_delivery_id", f"{DELIVERY_HEADER} must be 1 to 200 "
                       f"characters among A-Z a-z 0-9 . _ : -", {"header": DELIVERY_HEADER})
    return given.strip()


def _input(body: bytes) -> Any:
    try:
        return json.loads(body) if body.strip() else {}
    except ValueError as exc:
        raise ApiError(400, "bad_request", f"the body is not JSON ({exc})") from exc


@router.post("/{name}", status_code=201, response_model=HookStarted, responses=_RESPONSES)
async def hook(name: str, request: Request,
               rt: Annotated[ServerRuntime, Depends(runtime)]) -> HookStarted | JSONResponse:
    """Start workflow ``name`` with the JSON body as input, when the delivery is signed
    (X-Plait-Timestamp, X-Plait-Signature); X-Plait-Delivery makes it count once."""
    body, now = await request.body(), time.time()
    _check_signature(rt.settings.webhook_secret, request, name, body, now)
    delivery, value = _delivery_id(request), _input(body)
    run_id = uuid.uuid4().hex
    if delivery is not None:
        first = await rt.store.claim_delivery(name, delivery, run_id, now,
                                              now - 2 * TOLERANCE_S)
        if first != run_id:
            return JSONResponse({"run_id": first, "duplicate": True})
    try:
        run = await start_run(rt, name, value, run_id=run_id)
    except Exception:
        if delivery is not None:  # nothing started: a later delivery may try again
            await rt.store.forget_delivery(name, delivery, run_id)
        raise
    return HookStarted(run_id=run.run_id)
