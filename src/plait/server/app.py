"""``create_app``: the FastAPI application of ``plait serve``.

The app opens the store in its lifespan, runs a ``ServerRuntime`` there (the task
group that executes the runs the server starts, and on PostgreSQL a worker), and drains
on shutdown.  Routers are listed in ``ROUTERS``; ``create_app(..., routers=[...])`` adds
more (metrics, notifications) without touching this module.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .. import __version__
from . import errors
from .hosts import HostMiddleware, HostNames, SecurityHeadersMiddleware
from .routes import auth, docs, events, hooks, meta, runs, workflows
from .routes.meta import UI_DIR
from .runtime import EVENTS_POLL_S, ServerRuntime
from .security import AuthMiddleware, BodyLimitMiddleware, Sessions
from .settings import ServerSettings
from .throttle import LoginThrottle

ROUTERS: list[APIRouter] = [meta.router, docs.router, auth.router, workflows.router,
                            runs.router, events.router, hooks.router]
DEFAULT_GRACE_S = 10.0


def create_app(db_url: str, *, host: str | None = None, token: str | None = None,
               worker: bool = True,
               settings: ServerSettings | None = None, grace: float = DEFAULT_GRACE_S,
               events_poll: float = EVENTS_POLL_S,
               routers: Sequence[APIRouter] = ()) -> FastAPI:
    """The API over the store at ``db_url``.

    ``host``: the address or name the server listens on (``--host``): besides
    addresses, loopback names and PLAIT_ALLOWED_HOSTNAMES, the one ``Host`` name it
    answers to (``server.hosts``).  ``token``: the API token (default:
    ``settings.token``, i.e. PLAIT_API_TOKEN).
    ``worker``: with a PostgreSQL store, run a worker in the server (``--no-worker``:
    False).  ``settings``: default ``ServerSettings.from_environment()``.  ``grace``:
    seconds the runs get to end on shutdown before they are left resumable.
    ``events_poll``: how often event streams re-read runs executed elsewhere.
    ``routers``: more routers, after ``ROUTERS``."""
    base = settings if settings is not None else ServerSettings.from_environment()
    if token is not None:
        from dataclasses import replace

        base = replace(base, token=token)
    chosen = base

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        from prometheus_client import CollectorRegistry

        from ..observe.prometheus import LiveMetrics, metrics_asgi_app
        from ..store.shared import StoreHandle

        # this lifespan's: two apps in one process, or one app started twice (a test
        # client's), never share one
        registry = CollectorRegistry()

        async with StoreHandle(db_url) as held:
            rt = ServerRuntime(held.store, db_url, chosen, worker=worker, grace=grace,
                               events_poll=events_poll, metrics=LiveMetrics(registry))
            app.state.metrics = metrics_asgi_app(held.store, registry)
            async with rt.running():
                app.state.runtime = rt
                yield {}

    # FastAPI's /docs and /redoc load their scripts from a CDN: docs.router serves
    # Swagger UI from this process instead
    app = FastAPI(title="plait", version=__version__, lifespan=lifespan,
                  docs_url=None, redoc_url=None, responses=errors.EVERY_ROUTE,
                  description="The REST API of plait serve. With PLAIT_API_TOKEN "
                  "set, send `Authorization: Bearer TOKEN`.")
    app.state.settings = chosen
    app.state.sessions = Sessions(chosen.token, chosen.session_ttl) \
        if chosen.token is not None else None
    app.state.login_throttle = LoginThrottle(chosen.login_failures, chosen.login_window)
    errors.install(app)
    for router in [*ROUTERS, *routers]:
        app.include_router(router)
    # a route, not a mount: /metrics answers itself (a mount redirects it to /metrics/)
    for path in ("/metrics", "/metrics/"):
        app.router.routes.append(Route(path, MetricsEndpoint(app), include_in_schema=False))
    app.mount("/ui", StaticFiles(directory=UI_DIR, html=True), name="ui")
    app.mount(docs.ASSETS_PATH, docs.assets(), name="docs-assets")
    # added innermost first: the security headers on every answer, then the Host
    # check (before anything else runs), the body limit and authentication
    app.add_middleware(AuthMiddleware, token=chosen.token, sessions=app.state.sessions)
    app.add_middleware(BodyLimitMiddleware, limit=chosen.max_body_bytes)
    app.add_middleware(HostMiddleware, names=HostNames(host, chosen.allowed_hostnames))
    app.add_middleware(SecurityHeadersMiddleware)
    return app


class MetricsEndpoint:
    """``/metrics``: the Prometheus exposition of the store and of this process
    (``observe.prometheus``; the store's part refreshed at most every
    ``SCRAPE_CACHE_S`` seconds), behind the same authentication as the API.  An ASGI
    app (a class, so the router passes the request through as it is)."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app.state.metrics(scope, receive, send)
