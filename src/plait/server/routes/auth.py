"""``/api/login``, ``/api/logout`` and ``/api/session``: the UI's cookie session
(``server.security`` describes the cookies and the CSRF rule)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response

from ..errors import ApiError
from ..models import ErrorBody, Login, SessionState
from ..runtime import ServerRuntime
from ..security import CSRF_COOKIE, SESSION_COOKIE, Sessions, cookies_of, same
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


@router.post("/login", responses={401: {"model": ErrorBody}})
async def login(body: Login, request: Request, response: Response,
                rt: Runtime) -> dict[str, Any]:
    """Exchange the API token for the session cookies (plait_session, HttpOnly; and
    plait_csrf, to send back in X-CSRF-Token)."""
    token, keeper = rt.settings.token, sessions(request)
    if token is None or keeper is None:
        return {"authenticated": True, "auth_required": False, "csrf_token": None}
    if not same(body.token, token):
        raise ApiError(401, "unauthorized", "wrong token")
    value, csrf = keeper.new()
    secure = request.url.scheme == "https"
    max_age = int(keeper.ttl)
    response.set_cookie(SESSION_COOKIE, value, max_age=max_age, path="/", httponly=True,
                        samesite="strict", secure=secure)
    response.set_cookie(CSRF_COOKIE, csrf, max_age=max_age, path="/", httponly=False,
                        samesite="strict", secure=secure)
    return {"authenticated": True, "auth_required": True, "csrf_token": csrf}


@router.post("/logout", status_code=204)
async def logout(response: Response) -> Response:
    """Clear both cookies."""
    response.status_code = 204
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    response.delete_cookie(CSRF_COOKIE, path="/", samesite="strict")
    return response
