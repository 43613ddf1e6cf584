"""Which ``Host`` names the server answers to, and the headers every answer carries.

DNS rebinding: a page at ``http://evil.test:8080/`` whose name the attacker then points
at 127.0.0.1 talks to a server on loopback as its own origin, so the browser's
same-origin rule (and the ``Origin`` check of ``server.security``) lets it read and
write.  The browser still sends ``Host: evil.test:8080``: ``HostMiddleware`` answers
421 (Misdirected Request) to every name the server does not serve, before routing.

Served names (the port is not compared):

- any IP literal (``127.0.0.1``, ``[::1]``, ``192.0.2.7``): a page loaded from an
  address is not on a name anyone can rebind;
- loopback names: ``localhost``, ``*.localhost`` (browsers resolve those to loopback
  themselves), ``localhost.localdomain``, ``ip6-localhost``;
- the ``--host`` the server listens on, when it is a name;
- ``PLAIT_ALLOWED_HOSTNAMES``: names, or ``*.example.com`` for its sub-names (a name a
  proxy forwards to the server).

A wildcard bind (``0.0.0.0``, ``::``) adds no name: it answers to addresses and to the
names above; its public names must be listed in ``PLAIT_ALLOWED_HOSTNAMES``.  A request
without a ``Host`` (HTTP/1.0), or with a malformed one, gets 400.

``SecurityHeadersMiddleware`` adds to every answer: ``X-Frame-Options: DENY`` and a
Content-Security-Policy with ``frame-ancestors 'none'`` (no page may frame the UI or
the API docs), ``X-Content-Type-Options: nosniff`` and ``Referrer-Policy:
no-referrer``.  The CSP allows this server's own scripts, styles and connections only
(no inline script); a route that needs more (``/docs``) sets its own.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable

from .security import ASGIApp, Message, Receive, Scope, Send, header, send_error

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost",
                            "ip6-loopback"})
_NAME = re.compile(r"^[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*\.?$")
_PORT = re.compile(r"^[0-9]{1,5}$")
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
       "frame-ancestors 'none'")
SECURITY_HEADERS = ((b"x-frame-options", b"DENY"),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"))


class BadHost(ValueError):
    """A ``Host`` header that is not ``NAME[:PORT]`` or ``[IPV6][:PORT]``."""


def host_name(value: str) -> str:
    """The host of a ``Host`` header value, lower-case, without port or brackets."""
    text = value.strip().lower()
    if text.startswith("["):
        address, sep, rest = text[1:].partition("]")
        if not sep or (rest and not (rest[0] == ":" and _PORT.match(rest[1:]))):
            raise BadHost(value)
        try:
            ipaddress.IPv6Address(address)
        except ValueError as exc:
            raise BadHost(value) from exc
        return address
    name, sep, port = text.partition(":")
    if (sep and not _PORT.match(port)) or not _NAME.match(name):
        raise BadHost(value)
    return name.rstrip(".")


def is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def is_loopback_name(name: str) -> bool:
    return name in LOOPBACK_NAMES or name.endswith(".localhost")


class HostNames:
    """The names one server answers to (see the module docstring)."""

    def __init__(self, listen_host: str | None, allowed: Iterable[str]) -> None:
        # an entry written with a port (``ci.example.com:8443``) names its host
        names = {n.strip().lower().split(":")[0].rstrip(".") for n in allowed if n.strip()}
        listen = (listen_host or "").strip().strip("[]").lower()
        if listen and not is_address(listen):
            names.add(listen)
        self.exact = frozenset(n for n in names if not n.startswith("*."))
        self.suffixes = tuple(n[1:] for n in names if n.startswith("*."))

    def serves(self, name: str) -> bool:
        return (is_address(name) or is_loopback_name(name) or name in self.exact
                or name.endswith(self.suffixes))


class HostMiddleware:
    """Answers 421 to a request for a name the server does not serve, 400 to one
    without a valid ``Host``; lets the others through."""

    def __init__(self, app: ASGIApp, *, names: HostNames) -> None:
        self.app, self.names = app, names

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(header(scope, b"host"))
        if refusal is None:
            await self.app(scope, receive, send)
        else:
            await send_error(send, *refusal)

    def refusal(self, value: str | None) -> tuple[int, str, str] | None:
        """None for a served Host, else (status, code, message)."""
        if value is None or not value.strip():
            return 400, "missing_host", "the request has no Host header"
        try:
            name = host_name(value)
        except BadHost:
            return 400, "invalid_host", f"malformed Host header {value[:100]!r}"
        if self.names.serves(name):
            return None
        return 421, "unknown_host", (
            f"this server does not answer to the host name {name!r} (Host header): it "
            f"serves its own address, loopback names and the names listed in "
            f"PLAIT_ALLOWED_HOSTNAMES; add {name!r} there if it is this server's")


class SecurityHeadersMiddleware:
    """Adds the anti-framing, no-sniffing and referrer headers and the default CSP to
    every answer (a response that sets its own CSP keeps it)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = with_security_headers(message.get("headers", []))
            await send(message)

        await self.app(scope, receive, secured)


def with_security_headers(headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    given = list(headers)
    names = {name.lower() for name, _ in given}
    extra = [(k, v) for k, v in SECURITY_HEADERS if k not in names]
    if b"content-security-policy" not in names:
        extra.append((b"content-security-policy", CSP.encode()))
    return given + extra
