"""``plait serve``: the REST API and the web UI (docs/rest.md, docs/ui.md).
``create_app`` builds the FastAPI application; ``plait.cli.serve`` runs it with uvicorn."""

from __future__ import annotations

from .app import ROUTERS, create_app
from .settings import ServerSettings

__all__ = ["ROUTERS", "ServerSettings", "create_app"]
