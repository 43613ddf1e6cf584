"""``/docs``: Swagger UI over ``/openapi.json``, served from this server.

Nothing is loaded from the internet at run time: the Swagger UI files (version 5, which
reads the OpenAPI 3.1 documents FastAPI writes) come from the ``swagger-ui-py`` package
(Apache-2.0) and are served under ``/docs/assets/``; the page itself is written here.
Its one inline script is allowed by its hash in the page's Content-Security-Policy (no
other inline script runs).  FastAPI's own ``/docs`` and ``/redoc`` (which load their
scripts from a CDN) are turned off in ``create_app``.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

DOCS_PATH = "/docs"
ASSETS_PATH = "/docs/assets"

router = APIRouter()


def assets_dir() -> Path:
    import swagger_ui  # type: ignore[import-untyped]

    return Path(swagger_ui.__file__).parent / "static"


def assets() -> StaticFiles:
    """The Swagger UI distribution, to mount at ``ASSETS_PATH``."""
    return StaticFiles(directory=assets_dir())


def init_script(openapi_url: str) -> str:
    return f"""
window.ui = SwaggerUIBundle({{
  url: {json.dumps(openapi_url)},
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  presets: [SwaggerUIBundle.presets.apis],
}});
"""


def csp(script: str) -> str:
    """The page's policy: this server's files, and the inline ``script`` by its hash
    (Swagger UI sets inline styles and shows data: images)."""
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    return (f"default-src 'self'; script-src 'self' 'sha256-{digest}'; "
            f"style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; "
            f"object-src 'none'; base-uri 'none'; form-action 'self'; "
            f"frame-ancestors 'none'")


def page(title: str, script: str) -> str:
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>{html.escape(title)}</title>
<link rel="stylesheet" href="{ASSETS_PATH}/swagger-ui.css">
<link rel="icon" type="image/png" href="{ASSETS_PATH}/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="{ASSETS_PATH}/swagger-ui-bundle.js"></script>
<script>{script}</script>
</body>
</html>
"""


@router.get(DOCS_PATH, include_in_schema=False)
async def docs(request: Request) -> HTMLResponse:
    app = request.app
    script = init_script(app.openapi_url or "/openapi.json")
    return HTMLResponse(page(f"{app.title} - API", script),
                        headers={"Content-Security-Policy": csp(script)})
