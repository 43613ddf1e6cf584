"""``/api/login``, ``/api/logout`` and ``/api/session``: the UI's cookie session
(``server.security`` describes the cookies and the CSRF rule)."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response

from ..errors import ApiError
from ..models import ErrorBody, Login, SessionState
from ..runtime import ServerRuntime
from ..security import CSRF_COOKIE, SESSION_COOKIE, Sessions, cookies_of, same
from ..throttle import LoginThrottle
from .deps import runtime

router = APIRouter(prefix="/api", tags=["auth"])
Runtime = Annotated[ServerRuntime, Depends(runtime)]


def sessions(request: Request) -> Sessions | None:
    value = request.app.state.sessions
    return value if isinstance(value, Sessions) else None


def authenticated(request: Request, rt: ServerRuntime) -> bool:
    token, keeper = rt.settings.token, sessions(request)
    if token is None or keeper is None:
        return True
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and same(given.strip(), token):
        return True
    cookie = cookies_of(request.scope).get(SESSION_COOKIE)
    return cookie is not None and keeper.csrf_of(cookie) is not None


@router.get("/session", response_model=SessionState)
async def session(request: Request, rt: Runtime) -> SessionState:
    """Whether this client is authenticated and whether the server needs a login
    (open: the UI calls it before logging in)."""
    return SessionState(authenticated=authenticated(request, rt),
                        auth_required=rt.settings.token is not None)


def throttle(request: Request) -> LoginThrottle:
    value = request.app.state.login_throttle
    assert isinstance(value, LoginThrottle)
    return value


def _check_token(request: Request, given: str, token: str) -> None:
    """401 for a wrong token, 429 once its client address failed too often."""
    limiter, address = throttle(request), request.client.host if request.client else ""
    now = time.monotonic()
    wait = limiter.retry_after(address, now)
    if wait is not None:
        raise ApiError(429, "too_many_logins", f"too many failed logins from {address}: "
                       f"try again in {wait} s", {"retry_after": wait},
                       {"Retry-After": str(wait)})
    if not same(given, token):
        limiter.failed(address, now)
        raise ApiError(401, "unauthorized", "wrong token")


@router.post("/login", responses={401: {"model": ErrorBody}, 429: {"model": ErrorBody}})
async def login(body: Login, request: Request, response: Response,
                rt: Runtime) -> dict[str, Any]:
    """Exchange the API token for the session cookies (plait_session, HttpOnly; and
    plait_csrf, to send back in X-CSRF-Token).  Failed logins are limited per client
    address (429 with Retry-After)."""
    token, keeper = rt.settings.token, sessions(request)
    if token is None or keeper is None:
        return {"authenticated": True, "auth_required": False, "csrf_token": None}
    _check_token(request, body.token, token)
    value, csrf = keeper.new()
    secure = request.url.scheme == "https"
    max_age = int(keeper.ttl)
    response.set_cookie(SESSION_COOKIE, value, max_age=max_age, path="/", httponly=True,
                        samesite="strict", secure=secure)
    response.set_cookie(CSRF_COOKIE, csrf, max_age=max_age, path="/", httponly=False,
                        samesite="strict", secure=secure)
    return {"authenticated": True, "auth_required": True, "csrf_token": csrf}


@router.post("/logout", status_code=204)
async def logout(request: Request, response: Response) -> Response:
    """Revoke the session (its cookie is refused from now on, until it expires) and
    clear both cookies."""
    keeper, cookie = sessions(request), cookies_of(request.scope).get(SESSION_COOKIE)
    if keeper is not None and cookie is not None:
        keeper.revoke(cookie)
    response.status_code = 204
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    response.delete_cookie(CSRF_COOKIE, path="/", samesite="strict")
    return response
