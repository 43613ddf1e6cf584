"""uvicorn's h11 protocol with a deadline for a request's headers (slowloris).

uvicorn closes an idle keep-alive connection after ``timeout_keep_alive`` but has no
limit on how long a request's headers may take to arrive: a client sending one header
byte a second holds a connection (and its memory) for as long as it likes, and a few
hundred such clients exhaust the server.  ``header_timeout_protocol(seconds)`` is the
protocol class ``plait serve`` gives uvicorn: the clock starts when the connection
opens, or when the first byte of a following request arrives on a kept-alive one, and
the connection is closed when the request line and every header have not arrived
``seconds`` later.  A request's body and the response are not limited by it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT_S = 10.0


class HeaderTimeoutProtocol(H11Protocol):
    header_timeout = HEADER_TIMEOUT_S

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None

    def _awaiting_headers(self) -> bool:
        return self.conn.their_state is h11.IDLE

    def _arm(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout, self._expired)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _expired(self) -> None:
        self._header_timer = None
        if self._awaiting_headers() and not self.transport.is_closing():
            self.logger.info("closing a connection whose request headers took over %gs",
                             self.header_timeout)
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._awaiting_headers():
            self._arm()  # the first byte of a request on a kept-alive connection
        super().data_received(data)
        if not self._awaiting_headers():
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


def header_timeout_protocol(seconds: float) -> type[HeaderTimeoutProtocol]:
    """The protocol class to pass as uvicorn's ``http``, with ``seconds`` for headers."""
    return type("HeaderTimeoutProtocol", (HeaderTimeoutProtocol,),
                {"header_timeout": seconds})
