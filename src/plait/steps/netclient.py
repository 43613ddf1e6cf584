"""The httpx client of every step type that talks HTTP (``http``, ``llm``) and of
notifications: each TCP connection, redirects included, is judged by the run's
``NetworkPolicy`` (``plait.steps.netpolicy``) before it is made.

Why at the connection and not before the request: the check must cover every redirect
hop, and it must be made on the address actually used.  Resolving once, checking, then
letting the client resolve again would let a DNS server answer a public address to the
check and a denied one to the connection (DNS rebinding).  Here the name is resolved
once and the socket is opened to the very address checked; TLS still verifies the
certificate against the host name, which httpcore passes to ``start_tls`` separately.

Proxies from the environment (``HTTP_PROXY``...) are not used: a proxy would connect on
the step's behalf, where the policy cannot see the real destination.
"""

from __future__ import annotations

import asyncio
import functools
import socket
import ssl
from collections.abc import Iterable

import httpcore
import httpx

from .netpolicy import NetworkPolicy

# Per network operation (connect, each read or write), not per request: the step's own
# ``timeout`` bounds the attempt.  Generous because slow APIs (LLMs) are common.
TIMEOUT = httpx.Timeout(300.0, connect=30.0)


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    # Building a context loads the CA bundle (slow); one context serves every client.
    return httpx.create_ssl_context()


def guarded_client(policy: NetworkPolicy, *, step: str | None = None,
                   timeout: httpx.Timeout = TIMEOUT) -> httpx.AsyncClient:
    """A client for one attempt whose every connection obeys ``policy``; a refusal
    raises ``NetworkRefused`` (naming ``step``) out of the request, before connecting.

    One client per attempt, not one per engine: the engine has no hook to close a shared
    client, and an unclosed one leaks sockets.  The costly part (the SSL context) is
    shared, so an attempt pays only for its connection."""
    return httpx.AsyncClient(transport=_GuardedTransport(policy, step, _ssl_context()),
                             timeout=timeout, trust_env=False)


class _GuardedTransport(httpx.AsyncHTTPTransport):
    def __init__(self, policy: NetworkPolicy, step: str | None,
                 ssl_context: ssl.SSLContext) -> None:
        super().__init__(verify=ssl_context, trust_env=False)
        # httpx has no parameter for the network backend of its connection pool, so the
        # pool is rebuilt with ours (httpx's own code reads ``self._pool`` only).
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context, network_backend=_GuardedBackend(policy, step))


class _GuardedBackend(httpcore.AsyncNetworkBackend):
    """Judges every TCP connection by the policy, then connects to the very address it
    judged (see the module docstring)."""

    def __init__(self, policy: NetworkPolicy, step: str | None) -> None:
        self._policy = policy
        self._step = step
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
                          ) -> httpcore.AsyncNetworkStream:
        # NetworkRefused is not an httpcore error: httpx lets it through unchanged.
        exempt = self._policy.check_host(host, step=self._step)
        addresses = await resolve(host, port, timeout)
        if not exempt:
            for address in addresses:
                self._policy.check_address(host, address, step=self._step)
        error: httpcore.ConnectError | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(address, port, timeout=timeout,
                                                     local_address=local_address,
                                                     socket_options=socket_options)
            except httpcore.ConnectError as exc:
                error = exc  # try the next address, as a client resolving itself would
        assert error is not None  # resolve returns at least one address
        raise error

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


async def resolve(host: str, port: int, timeout: float | None) -> list[str]:
    """The addresses of ``host`` (in resolver order, without repeats).  Every spelling
    of an IPv4 address the system accepts (decimal, hex, octal, short forms) comes back
    as its dotted form, which is what the policy judges."""
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(timeout):
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except TimeoutError:
        raise httpcore.ConnectTimeout(f"resolving {host!r} timed out") from None
    except (OSError, UnicodeError) as exc:  # UnicodeError: a name IDNA cannot encode
        raise httpcore.ConnectError(f"cannot resolve {host!r}: {exc}") from exc
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise httpcore.ConnectError(f"{host!r} resolves to no address")
    return addresses
