"""``/healthz``, ``/api/schema`` and the UI's files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter
from fastapi.responses import FileResponse

from ..models import Health

UI_DIR = Path(__file__).resolve().parent.parent / "ui"

router = APIRouter()


@router.get("/healthz", response_model=Health, tags=["meta"])
async def healthz() -> Health:
    """Liveness: always open, also when a token is required."""
    return Health()


@router.get("/api/schema", tags=["meta"])
async def schema() -> dict[str, Any]:
    """The JSON Schema of the definition format (as ``plait schema`` prints it)."""
    from ...defschema import definition_schema

    return definition_schema()


@router.get("/", include_in_schema=False)
async def index() -> FileResponse:
    return FileResponse(UI_DIR / "index.html", media_type="text/html")
