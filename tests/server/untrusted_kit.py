"""What the tests of untrusted definitions share: a server over SQLite or PostgreSQL
with given settings, definitions registered or stored by another path (as ``plait
run`` on a shared database would), runs started over the API and waited for."""

from __future__ import annotations

import contextlib
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plait.definitions import check_definition
from plait.server import ServerSettings, create_app

from .conftest import settings, wait_status

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

# the stores every server test of this kind runs on (the PostgreSQL share is kept small:
# only the tests that ask for `STORES`)
STORES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
ALLOWED = ("server.steps_for_api", "server.steps_untrusted", "collector")


def store_url(kind: str, request: pytest.FixtureRequest,
              tmp_path_factory: pytest.TempPathFactory) -> str:
    if kind == "postgres":
        return str(request.getfixturevalue("pg_database"))
    return f"sqlite:///{tmp_path_factory.mktemp('untrusted')}/api.db"


@contextlib.contextmanager
def serving(url: str, chosen: ServerSettings | None = None,
            **changes: Any) -> Iterator[TestClient]:
    """A started server over ``url`` (the server's worker too, on PostgreSQL)."""
    app = create_app(url, settings=chosen or settings(allowed_modules=ALLOWED, **changes),
                     worker=True, grace=2.0, events_poll=0.05)
    with TestClient(app) as client:
        yield client


def unique(stem: str) -> str:
    return f"{stem}-{uuid.uuid4().hex[:10]}"


def refusals(client: TestClient, definition: dict[str, Any]) -> dict[str, str]:
    """Register ``definition``: it must be refused with 422; its problems by location
    (each location once: messages of one place joined)."""
    response = client.post("/api/workflows", json=definition)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_definition"
    found: dict[str, str] = {}
    for detail in error["details"]:
        found[detail["location"]] = found.get(detail["location"], "") + detail["message"]
    # never stored: a run of it is refused as unknown
    name = definition.get("name")
    assert client.get(f"/api/workflows/{name}").status_code == 404
    return found


def store_directly(client: TestClient, definition: dict[str, Any]) -> str:
    """Store ``definition`` without registration (what ``plait run`` on the server's
    database does): checked as a trusted definition, saved as it is."""
    checked = check_definition(definition)
    rt = client.app.state.runtime  # type: ignore[attr-defined]
    client.portal.call(rt.store.save_workflow, checked.spec.name,  # type: ignore[union-attr]
                       checked.definition_json, checked.fingerprint, None)
    return checked.spec.name


def run_to_end(client: TestClient, name: str, input: Any = None) -> dict[str, Any]:
    """Start ``name`` over the API (201) and wait for its end."""
    response = client.post("/api/runs", json={"workflow": name, "input": input or {}})
    assert response.status_code == 201, response.text
    return wait_status(client, response.json()["run_id"], ("completed", "failed",
                                                           "cancelled"), timeout=30)


def errors_of(run: dict[str, Any]) -> str:
    """Every attempt's error of the run, as one text."""
    return "\n".join(str(a["error"]) for a in run["attempts"] if a["error"])


def everything_shown(client: TestClient, run_id: str, name: str) -> str:
    """What the API shows of a run and its workflow, as one text."""
    paths = (f"/api/runs/{run_id}", f"/api/runs/{run_id}/events", "/api/runs",
             f"/api/workflows/{name}")
    return "\n".join(client.get(path).text for path in paths)


def shell(marker: Path) -> str:
    return f"touch {marker}"


# ---------------------------------------------------------------- nesting

# what a step may be wrapped in, and the location from the wrapper to the step inside
WRAPPERS = ("map", "workflow", "loop")


def wrap(step: dict[str, Any], kind: str) -> tuple[dict[str, Any], str]:
    """``step`` (an inline step: no id) inside a step of ``kind``; the location of
    ``step`` relative to the new step."""
    if kind == "map":
        return {"type": "map", "over": "{{ [1] }}", "step": step}, ".step"
    child = {"name": "child", "steps": [{"id": "inner", **step}]}
    if kind == "workflow":
        return {"type": "workflow", "workflow": "child", "definition": child}, \
            ".definition.steps[0]"
    return {"type": "loop", "workflow": "child", "until": "{{ true }}",
            "max_iterations": 1, "definition": child}, ".definition.steps[0]"


def nested(step: dict[str, Any], path: tuple[str, ...],
           stem: str = "nested") -> tuple[dict[str, Any], str]:
    """A definition holding ``step`` at the end of ``path`` (wrappers, outermost
    first: ``("loop", "workflow", "map")`` is a map in a definition in a loop), and
    the location of ``step`` in it."""
    where = ""
    for kind in reversed(path):
        step, inner = wrap(step, kind)
        where = inner + where
    return {"name": unique(stem), "steps": [{"id": "top", **step}]}, f"steps[0]{where}"
