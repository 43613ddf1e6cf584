"""The API's one error shape: ``{"error": {"code", "message", "details"}}``,
for the errors routes raise (``ApiError``), FastAPI's own (422 validation, 404 unknown
route, 405) and anything unexpected (500, without internals)."""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

_log = logging.getLogger("plait.server")

# codes of the statuses FastAPI and Starlette raise themselves
STATUS_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
                405: "method_not_allowed", 409: "conflict", 413: "payload_too_large",
                415: "unsupported_media_type", 422: "invalid_request",
                500: "internal_error", 503: "unavailable"}


# what any route may answer before it runs: a malformed request or body, a body over the
# limit, a host name the server does not serve (server.hosts)
EVERY_ROUTE: dict[int | str, dict[str, Any]] = {
    400: {"description": "malformed request (Host, body, header)"},
    413: {"description": "request body over the limit"},
    421: {"description": "a Host name this server does not answer to"},
}


class ApiError(Exception):
    """An error a route answers with: HTTP ``status``, a stable ``code``, a message for
    people and ``details`` for programs."""

    def __init__(self, status: int, code: str, message: str, details: Any = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details
        self.headers = headers


def error_body(code: str, message: str, details: Any = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details}}


class AsciiJSONResponse(JSONResponse):
    """JSON escaped to ASCII: an error that quotes a client's text holding a lone
    surrogate (valid in JSON as ``\\ud800``, not encodable as UTF-8) still renders."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False,
                          separators=(",", ":")).encode("ascii")


def error_response(status: int, code: str, message: str, details: Any = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    return AsciiJSONResponse(error_body(code, message, details), status_code=status,
                             headers=headers)


def not_found(what: str, key: str, message: str | None = None) -> ApiError:
    return ApiError(404, f"{what}_not_found", message or f"no {what} {key!r}",
                    {what: key})


def _location(loc: tuple[Any, ...] | list[Any]) -> str:
    """``("body", "input", 0)`` as ``body.input[0]``."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def allowed_methods(request: Request) -> list[str]:
    """Every method of the routes at the request's path (Starlette's 405 names only
    the first route's)."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        regex, more = getattr(route, "path_regex", None), getattr(route, "methods", None)
        if regex is not None and more and regex.match(request.url.path):
            methods.update(more)
    return sorted(methods)


def install(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(_: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, exc.code, exc.message, exc.details, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, exc: RequestValidationError) -> JSONResponse:
        details = [{"location": _location(e.get("loc", ())), "message": str(e.get("msg"))}
                   for e in exc.errors()]
        first = details[0] if details else {"location": "", "message": "invalid request"}
        return error_response(422, "invalid_request",
                              f"invalid request: {first['location']}: {first['message']}",
                              details)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = STATUS_CODES.get(exc.status_code, "error")
        message = str(exc.detail)
        if exc.status_code == 404 and message == "Not Found":
            message = f"no route {request.method} {request.url.path}"
        headers = getattr(exc, "headers", None)
        if exc.status_code == 405:
            message = f"method {request.method} is not allowed on {request.url.path}"
            headers = {**(headers or {}), "Allow": ", ".join(allowed_methods(request))}
        return error_response(exc.status_code, code, message, None, headers)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        _log.exception("%s %s failed", request.method, request.url.path)
        return error_response(500, "internal_error",
                              f"internal error ({type(exc).__name__}); see the server log")
