"""``plait serve``: the API and UI of ``plait.server`` under uvicorn.

Refuses (exit 2) to listen on anything but loopback without PLAIT_API_TOKEN.  uvicorn
turns SIGTERM/SIGINT into its shutdown: the event streams end at once, open requests
finish, then the app's lifespan drains its runs (``ServerRuntime``) and the command
exits 0.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import sys
from collections.abc import Iterator
from types import FrameType
from typing import TYPE_CHECKING

from . import output
from .settings import ExitCode

if TYPE_CHECKING:
    import uvicorn
    from fastapi import FastAPI

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
SHUTDOWN_TIMEOUT_S = 5  # for requests still open once the server stops


def is_loopback(host: str) -> bool:
    name = host.strip().strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


async def serve_command(*, db: str, host: str, port: int, worker: bool,
                        grace: float) -> ExitCode:
    from ..server.settings import TOKEN_ENV, ServerSettings, SettingError

    try:
        ServerSettings.from_environment()  # a bad PLAIT_MAX_* stops it here
    except SettingError as exc:
        output.console(stderr=True).print(output.error_text(
            f"refusing to start: {exc}"), end="")
        return ExitCode.USAGE
    token = os.environ.get(TOKEN_ENV) or None
    if token is None and not is_loopback(host):
        output.console(stderr=True).print(output.error_text(
            f"refusing to listen on {host}: anything but loopback needs an API token; "
            f"set {TOKEN_ENV} (clients then send 'Authorization: Bearer TOKEN'), or "
            f"serve on 127.0.0.1"), end="")
        return ExitCode.USAGE
    import uvicorn

    from ..server import create_app
    from .loading import add_import_paths

    add_import_paths(None)  # python steps import from the current directory
    from ..store.url import shown_url

    app = create_app(db, token=token, worker=worker, grace=grace)
    config = uvicorn.Config(app, host=host, port=port, log_level="info",
                            timeout_graceful_shutdown=SHUTDOWN_TIMEOUT_S,
                            proxy_headers=False, server_header=False)
    server = _server(config, app)
    logging.getLogger("plait").setLevel(logging.INFO)
    print(f"plait serve: {shown_url(db)} on http://{host}:{port} "
          f"(auth {'on' if token else 'off'})", file=sys.stderr, flush=True)
    await server.serve()
    return ExitCode.OK if server.started else ExitCode.FAILED


def _server(config: uvicorn.Config, app: FastAPI) -> uvicorn.Server:
    """uvicorn's server, whose exit signal also ends the app's event streams at once
    (they would otherwise hold the shutdown until SHUTDOWN_TIMEOUT_S)."""
    import asyncio
    import contextlib

    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # uvicorn raises the signal again once it has shut down (the process then
            # dies of it); plait serve drained, so it exits 0 like plait worker
            with super().capture_signals():
                try:
                    yield
                finally:
                    captured = getattr(self, "_captured_signals", None)
                    if isinstance(captured, list):
                        captured.clear()

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            super().handle_exit(sig, frame)
            runtime = getattr(app.state, "runtime", None)
            if runtime is None:
                return
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return
            loop.call_soon_threadsafe(runtime.closing.set)

    return Server(config)
