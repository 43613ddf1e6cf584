"""``/docs``: Swagger UI over ``/openapi.json``, served from this server.

Nothing is loaded from the internet at run time (SPEC 9): the Swagger UI files come
from the ``swagger-ui-bundle`` package (Apache-2.0) and are served under
``/docs/assets/``; the page itself is written here.  FastAPI's own ``/docs`` and
``/redoc`` (which load their scripts from a CDN) are turned off in ``create_app``.
"""

from __future__ import annotations

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
    from swagger_ui_bundle import swagger_ui_path  # type: ignore[import-untyped]

    return Path(str(swagger_ui_path))


def assets() -> StaticFiles:
    """The Swagger UI distribution, to mount at ``ASSETS_PATH``."""
    return StaticFiles(directory=assets_dir())


def page(title: str, openapi_url: str) -> str:
    spec = json.dumps(openapi_url)
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
<script>
window.ui = SwaggerUIBundle({{
  url: {spec},
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  presets: [SwaggerUIBundle.presets.apis],
}});
</script>
</body>
</html>
"""


@router.get(DOCS_PATH, include_in_schema=False)
async def docs(request: Request) -> HTMLResponse:
    app = request.app
    return HTMLResponse(page(f"{app.title} - API", app.openapi_url or "/openapi.json"))
