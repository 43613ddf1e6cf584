"""``POST /api/hooks/{name}``: start workflow ``name`` from a signed webhook (SPEC 9).

The signature is ``X-Plait-Signature: sha256=HEX``, HEX the HMAC-SHA256 of the raw
body under ``PLAIT_WEBHOOK_SECRET``, compared in constant time.  Unsigned, badly signed,
or no secret configured: 401 (nothing is parsed or started).  The body, a JSON value, is
the run's input.  Hooks need no bearer token: the signature authenticates them.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Annotated

from fastapi import APIRouter, Depends, Request

from ..errors import ApiError
from ..models import ErrorBody, HookStarted
from ..runtime import ServerRuntime
from .deps import runtime
from .runs import start_run

router = APIRouter(prefix="/api/hooks", tags=["hooks"])
SIGNATURE_HEADER = "X-Plait-Signature"


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@router.post("/{name}", status_code=201, response_model=HookStarted,
             responses={401: {"model": ErrorBody}, 404: {"model": ErrorBody},
                        422: {"model": ErrorBody}})
async def hook(name: str, request: Request,
               rt: Annotated[ServerRuntime, Depends(runtime)]) -> HookStarted:
    body = await request.body()
    secret = rt.settings.webhook_secret
    given = request.headers.get(SIGNATURE_HEADER)
    if secret is None:
        raise ApiError(401, "unauthorized", "webhooks are disabled: the server has no "
                       "PLAIT_WEBHOOK_SECRET")
    if given is None or not hmac.compare_digest(given.strip().lower().encode(),
                                                signature(secret, body).encode()):
        raise ApiError(401, "invalid_signature",
                       f"missing or invalid {SIGNATURE_HEADER}: expected sha256=HEX, the "
                       f"HMAC-SHA256 of the body with PLAIT_WEBHOOK_SECRET")
    try:
        value = json.loads(body) if body.strip() else {}
    except ValueError as exc:
        raise ApiError(400, "bad_request", f"the body is not JSON ({exc})") from exc
    run = await start_run(rt, name, value)
    return HookStarted(run_id=run.run_id)
