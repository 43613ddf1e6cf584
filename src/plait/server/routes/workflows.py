"""``/api/workflows``: list, register (untrusted: docs/server.md) and read definitions."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from ...core.source import parse_text
from ...definitions import check_definition
from ...errors import DefinitionError, Problem, VersionConflict, WorkflowNotFound
from ...runtime.preflight import preflight
from ...runtime.results import iso
from ...store.base import Store
from ..errors import ApiError, not_found
from ..models import ErrorBody, WorkflowCreated, WorkflowDetail, WorkflowSummary
from ..runtime import ServerRuntime
from ..untrusted import call_problems, untrusted_problems
from .deps import runtime

router = APIRouter(prefix="/api/workflows", tags=["workflows"])
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")
Runtime = Annotated[ServerRuntime, Depends(runtime)]


@router.get("", response_model=list[WorkflowSummary])
async def list_workflows(rt: Runtime) -> list[WorkflowSummary]:
    """The latest version of each stored workflow, by name."""
    latest: dict[str, Any] = {}
    for rec in await rt.store.list_workflows():
        if rec.name not in latest or rec.version > latest[rec.name].version:
            latest[rec.name] = rec
    return [WorkflowSummary(name=r.name, version=r.version, fingerprint=r.fingerprint,
                            created_at=iso(r.created_at))
            for r in sorted(latest.values(), key=lambda r: r.name)]


def _invalid(problems: list[Problem] | tuple[Problem, ...]) -> ApiError:
    details = [{"location": p.location, "message": p.message + (f" ({p.hint})" if p.hint
                                                                else "")}
               for p in problems]
    return ApiError(422, "invalid_definition",
                    f"the definition has {len(details)} problem(s)", details)


@router.post("", status_code=201, response_model=WorkflowCreated,
             responses={422: {"model": ErrorBody}, 409: {"model": ErrorBody}},
             openapi_extra={"requestBody": {"content": {
                 "application/json": {"schema": {
                     "type": "object", "description": "a definition: see GET /api/schema"}},
                 "application/yaml": {"schema": {"type": "string"}}}, "required": True}})
async def register(request: Request, rt: Runtime) -> WorkflowCreated:
    """Register a definition (JSON, or YAML with ``Content-Type: application/yaml``).
    Untrusted (``plait.core.trust``, at any depth): python steps may only call
    functions of PLAIT_ALLOWED_MODULES, http/llm steps may not name private addresses,
    keys and secrets only as allowed, limits within the server's caps.  422 lists
    every problem."""
    raw = await request.body()
    kind = request.headers.get("content-type", "application/json").split(";")[0].strip()
    fmt = "yaml" if kind.lower() in YAML_TYPES else "json"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(400, "bad_request", f"the body is not UTF-8 text ({exc})") from exc
    try:
        data = parse_text(text, source="request", fmt=fmt)
    except DefinitionError as exc:
        raise _invalid(exc.problems) from exc
    refused = untrusted_problems(data, rt.settings)  # every step-like place, any depth
    try:
        checked = check_definition(data, source="request")
    except DefinitionError as exc:
        raise _invalid([*exc.problems, *refused]) from exc
    if refused:
        raise _invalid(refused)
    try:
        preflight(checked)  # the allowed modules import, their functions exist
    except DefinitionError as exc:
        raise _invalid(exc.problems) from exc
    elsewhere = call_problems(data)  # each function is defined where it is named
    if elsewhere:
        raise _invalid(elsewhere)
    spec = checked.spec
    try:
        stored = await rt.store.save_workflow(spec.name, checked.definition_json,
                                              checked.fingerprint, spec.version)
    except VersionConflict as exc:
        raise ApiError(409, "version_conflict", str(exc),
                       {"name": exc.name, "version": exc.version}) from exc
    return WorkflowCreated(name=stored.name, version=stored.version,
                           fingerprint=stored.fingerprint)


async def stored_versions(store: Store, name: str) -> list[int]:
    """The versions stored of ``name`` (a store names them when a version is missing)."""
    try:
        await store.get_workflow(name, 0)
    except WorkflowNotFound as exc:
        return sorted(exc.versions)
    return [0]  # pragma: no cover - versions start at 1


@router.get("/{name}", response_model=WorkflowDetail,
            responses={404: {"model": ErrorBody}})
async def get_workflow(name: str, rt: Runtime,
                       version: Annotated[int | None, Query(ge=1)] = None) -> WorkflowDetail:
    """A stored definition: the latest version, or ``?version=N``."""
    try:
        rec = await rt.store.get_workflow(name, version)
    except WorkflowNotFound as exc:
        raise not_found("workflow", name, str(exc)) from exc
    return WorkflowDetail(name=rec.name, version=rec.version, fingerprint=rec.fingerprint,
                          created_at=iso(rec.created_at), definition=rec.definition,
                          versions=await stored_versions(rt.store, name))
