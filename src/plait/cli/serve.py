"""``plait serve``: the API and UI of ``plait.server`` under uvicorn.

Refuses (exit 2) to listen on anything but loopback without PLAIT_API_TOKEN, a token
shorter than 16 characters, and an ``--import`` module that cannot be imported; exits 1
when it cannot listen (the port is taken).  uvicorn turns SIGTERM/SIGINT into its
shutdown: the event streams end at once, open requests finish, then the app's lifespan
drains its runs (``ServerRuntime``) and the command exits 0.
"""

from __future__ import annotations

import ipaddress
import logging
import sys
from collections.abc import Iterator, Sequence
from types import FrameType
from typing import TYPE_CHECKING

from . import output
from .settings import ExitCode

if TYPE_CHECKING:
    import uvicorn
    from fastapi import FastAPI

    from ..server.settings import ServerSettings

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


def _refusal(host: str, settings: ServerSettings) -> str | None:
    """Why ``plait serve`` must not start with these settings (exit 2), or None."""
    from ..server.settings import MIN_TOKEN_LENGTH, TOKEN_ENV

    token = settings.token
    if token is None and not is_loopback(host):
        return (f"refusing to listen on {host}: anything but loopback needs an API token; "
                f"set {TOKEN_ENV} (clients then send 'Authorization: Bearer TOKEN'), or "
                f"serve on 127.0.0.1")
    if token is not None and len(token) < MIN_TOKEN_LENGTH:
        return (f"{TOKEN_ENV} is {len(token)} characters long: a token needs at least "
                f"{MIN_TOKEN_LENGTH} (e.g. python -c 'import secrets; "
                f"print(secrets.token_urlsafe(32))')")
    return None


def _imported(modules: Sequence[str]) -> str | None:
    """Import the ``--import`` modules (the current directory on sys.path), or say
    which one cannot be imported."""
    from .worker import ImportRefused, import_modules

    try:
        import_modules(modules)
    except ImportRefused as exc:
        return str(exc)
    return None


def _settings() -> ServerSettings | str:
    """The server's settings from the environment, or what is wrong with them."""
    from ..server.settings import ServerSettings

    try:
        return ServerSettings.from_environment()
    except ValueError as exc:
        return str(exc)


async def serve_command(*, db: str, host: str, port: int, worker: bool, grace: float,
                        imports: Sequence[str] = ()) -> ExitCode:
    settings = _settings()
    problem = settings if isinstance(settings, str) else _refusal(host, settings)
    if problem is None:
        problem = _imported(imports)
    if problem is not None or isinstance(settings, str):
        output.console(stderr=True).print(output.error_text(str(problem)), end="")
        return ExitCode.USAGE
    import uvicorn

    from ..observe.logs import configure
    from ..server import create_app
    from ..server.protocol import header_timeout_protocol
    from .loading import add_import_paths

    add_import_paths(None)  # python steps import from the current directory
    from ..store.url import shown_url

    app = create_app(db, host=host, worker=worker, grace=grace, settings=settings)
    config = uvicorn.Config(app, host=host, port=port, log_level="info",
                            timeout_graceful_shutdown=SHUTDOWN_TIMEOUT_S,
                            http=header_timeout_protocol(settings.header_timeout),
                            proxy_headers=False, server_header=False)
    server = _server(config, app)
    # plait's log lines on stderr, as a worker's (the retention's, a drain's, ...)
    configure(level=logging.INFO)
    print(f"plait serve: {shown_url(db)} on http://{host}:{port} "
          f"(auth {'on' if settings.token else 'off'})", file=sys.stderr, flush=True)
    try:
        await server.serve()
    except SystemExit:  # uvicorn's way of failing to start (exit 3): plait's is 1
        if server.started:
            raise
    if server.started:
        return ExitCode.OK
    output.console(stderr=True).print(output.error_text(
        f"plait serve could not listen on {host} port {port}: the port is taken or the "
        f"address is not this machine's (see the error above); choose another --port"),
        end="")
    return ExitCode.FAILED


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
