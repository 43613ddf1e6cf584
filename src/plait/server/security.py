"""Authentication and the body limit, as ASGI middleware.

With a token, every route but ``/healthz`` needs ``Authorization: Bearer TOKEN`` or the
session cookie the UI gets from ``POST /api/login``:

- ``plait_session`` (HttpOnly, SameSite=Strict, Path=/): ``v1.EXPIRES.CSRF.SIG``, where
  SIG is the HMAC-SHA256 of ``v1.EXPIRES.CSRF`` under a key derived from the token (the
  token itself is never in a cookie; a new token ends every session).  CSRF, random per
  login, is also the session's id: ``POST /api/logout`` revokes it until it expires, in
  the server process that receives the logout (another process behind the same name
  keeps accepting it until it expires: ``session_ttl``, 12 hours; change the token to
  end every session everywhere);
- ``plait_csrf`` (readable by JavaScript, SameSite=Strict, Path=/): the CSRF value the
  session carries.  A request authenticated by the cookie that changes state (POST, PUT,
  PATCH, DELETE) must send it back in ``X-CSRF-Token`` (403 otherwise); a request with a
  bearer token needs none.

Without a token or with one, a request that changes state (POST, PUT, PATCH, DELETE)
sent by a browser from another site's page is refused with 403 ``cross_origin``: its
``Origin`` is not this server's own (``Sec-Fetch-Site: cross-site`` when it has none).
A page can make a browser send such a request (a form, a ``text/plain`` fetch) to a
server on loopback without a token; programs send no Origin.  Webhooks are exempt
(their signature authenticates them).

Open without a token: ``/healthz``, the UI's files (``/`` and ``/ui/...``), Swagger
UI's files (``/docs/assets/...``; the page ``/docs`` itself needs the token),
``/api/session``, ``/api/login``, ``/api/logout``, and ``/api/hooks/...`` (a hook is
authenticated by its HMAC signature instead).  Every comparison is constant-time.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import secrets
import time
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import CookieError, SimpleCookie
from typing import Any

from .errors import error_body

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

SESSION_COOKIE = "plait_session"
CSRF_COOKIE = "plait_csrf"
CSRF_HEADER = "x-csrf-token"
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
OPEN_PATHS = frozenset({"/healthz", "/", "/api/session", "/api/login", "/api/logout"})
HOOKS_PREFIX = "/api/hooks/"
OPEN_PREFIXES = ("/ui/", "/docs/assets/", HOOKS_PREFIX)


def digits(text: str, most: int) -> bool:
    """Whether ``text`` is 1 to ``most`` ASCII digits (``str.isdigit`` takes ``²``)."""
    return 0 < len(text) <= most and text.isascii() and text.isdigit()


def same(given: str, expected: str) -> bool:
    """Constant-time string equality (of any strings: a lone surrogate is no error)."""
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"),
                               expected.encode("utf-8", "surrogatepass"))


class Sessions:
    """Signed sessions for one token, and the ones logged out (kept until they
    expire)."""

    def __init__(self, token: str, ttl: float) -> None:
        self._key = hmac.new(token.encode("utf-8", "surrogatepass"), b"plait-session-v1",
                             hashlib.sha256).digest()
        self.ttl = ttl
        self._revoked: dict[str, float] = {}  # session id (its CSRF value): expiry

    def revoke(self, value: str, now: float | None = None) -> bool:
        """Refuse the session of cookie ``value`` from now on; False when it is not a
        valid session (nothing is kept for a forged cookie)."""
        at = time.time() if now is None else now
        parts = value.split(".")
        if self.csrf_of(value, at) is None:
            return False
        self._revoked = {sid: end for sid, end in self._revoked.items() if end >= at}
        self._revoked[parts[2]] = float(parts[1])
        return True

    def _sign(self, payload: str) -> str:
        return hmac.new(self._key, payload.encode(), hashlib.sha256).hexdigest()

    def new(self, now: float | None = None) -> tuple[str, str]:
        """A fresh session cookie value and its CSRF value."""
        csrf = secrets.token_urlsafe(24)
        expires = int((time.time() if now is None else now) + self.ttl)
        payload = f"v1.{expires}.{csrf}"
        return f"{payload}.{self._sign(payload)}", csrf

    def csrf_of(self, value: str, now: float | None = None) -> str | None:
        """The CSRF value of a valid, unexpired session cookie; None otherwise."""
        parts = value.split(".")
        if len(parts) != 4 or parts[0] != "v1" or not digits(parts[1], 12):
            return None
        payload = ".".join(parts[:3])
        if not same(parts[3], self._sign(payload)):
            return None
        if int(parts[1]) < (time.time() if now is None else now) \
                or parts[2] in self._revoked:
            return None
        return parts[2]


def cookies_of(scope: Scope) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    for name, value in scope.get("headers", ()):
        if name == b"cookie":
            with contextlib.suppress(CookieError):  # a malformed header is no cookie
                jar.load(value.decode("latin-1"))
    return {key: morsel.value for key, morsel in jar.items()}


def header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return str(value.decode("latin-1"))
    return None


def cross_site(scope: Scope) -> bool:
    """Whether a browser sent the request from another site's page: its ``Origin`` is
    not this server's (scheme aside: a proxy may end TLS), or, without an Origin, its
    ``Sec-Fetch-Site`` says cross-site.  Programs (curl, httpx, plait) send neither."""
    origin = header(scope, b"origin")
    if origin is not None:
        host = header(scope, b"host")
        _, sep, netloc = origin.strip().partition("://")
        return not sep or host is None or netloc.lower() != host.strip().lower()
    return (header(scope, b"sec-fetch-site") or "").strip().lower() == "cross-site"


async def send_error(send: Send, status: int, code: str, message: str,
                     headers: list[tuple[bytes, bytes]] | None = None) -> None:
    import json

    body = json.dumps(error_body(code, message)).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


class AuthMiddleware:
    """Refuses unauthenticated requests (401) and cookie requests that change state
    without the CSRF header (403), when a token is configured."""

    def __init__(self, app: ASGIApp, *, token: str | None, sessions: Sessions | None) -> None:
        self.app, self.token, self.sessions = app, token, sessions

    def is_open(self, path: str) -> bool:
        return path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["method"] in UNSAFE_METHODS and not scope["path"].startswith(HOOKS_PREFIX) \
                and cross_site(scope):
            await send_error(send, 403, "cross_origin", (
                "a browser request from another site may not change state here: its "
                "Origin (or Sec-Fetch-Site) is not this server's own (a reverse proxy "
                "must pass the Host header the browser sent)"))
            return
        if self.token is None or self.is_open(scope["path"]):
            await self.app(scope, receive, send)
            return
        verdict = self.judge(scope)
        if verdict is None:
            await self.app(scope, receive, send)
        elif verdict[0] == 401:
            await send_error(send, 401, verdict[1], verdict[2],
                             [(b"www-authenticate", b'Bearer realm="plait"')])
        else:
            await send_error(send, verdict[0], verdict[1], verdict[2])

    def judge(self, scope: Scope) -> tuple[int, str, str] | None:
        """None when the request may go on, else (status, code, message)."""
        assert self.token is not None and self.sessions is not None
        authorization = header(scope, b"authorization")
        if authorization is not None:
            scheme, _, given = authorization.partition(" ")
            if scheme.lower() == "bearer" and same(given.strip(), self.token):
                return None
            return 401, "unauthorized", "invalid bearer token"
        cookies = cookies_of(scope)
        session = cookies.get(SESSION_COOKIE)
        csrf = self.sessions.csrf_of(session) if session else None
        if csrf is None:
            return 401, "unauthorized", ("authentication required: send "
                                         "'Authorization: Bearer TOKEN' (PLAIT_API_TOKEN) "
                                         "or log in with POST /api/login")
        if scope["method"] in UNSAFE_METHODS:
            sent = header(scope, CSRF_HEADER.encode())
            cookie = cookies.get(CSRF_COOKIE)
            if sent is None or cookie is None or not same(sent, cookie) \
                    or not same(sent, csrf):
                return 403, "csrf_failed", ("a request authenticated by the session "
                                            "cookie that changes state must send the "
                                            "plait_csrf cookie's value in X-CSRF-Token")
        return None


class BodyLimitMiddleware:
    """Refuses request bodies over ``limit`` bytes with 413, by Content-Length or, for a
    chunked body, as soon as more than ``limit`` bytes arrived (the body is read before
    the route runs and replayed to it)."""

    def __init__(self, app: ASGIApp, *, limit: int) -> None:
        self.app, self.limit = app, limit

    def _too_large(self) -> str:
        return f"request body too large: at most {self.limit} bytes are accepted"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = header(scope, b"content-length")
        if length is not None and (not digits(length, 19) or int(length) > self.limit):
            if not digits(length, 19):
                await send_error(send, 400, "bad_request", "invalid Content-Length")
            else:
                await send_error(send, 413, "payload_too_large", self._too_large())
            return
        if scope["method"] in ("GET", "HEAD", "OPTIONS") and length is None \
                and header(scope, b"transfer-encoding") is None:
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await send_error(send, 413, "payload_too_large", self._too_large())
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
