"""The server's caps on ``limits``: a definition registered over the API (or any
inline child definition in it) may not ask for more than PLAIT_MAX_STEPS,
PLAIT_MAX_MAP_ITEMS, PLAIT_MAX_OUTPUT_BYTES, PLAIT_MAX_DEPTH and
PLAIT_MAX_SUBWORKFLOW_DEPTH allow (default: the engine's default limits); the server's
engine bounds a stored definition too; a bad value stops ``plait serve`` (exit 2)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from plait.core.model import Limits
from plait.server import ServerSettings
from plait.server.settings import SettingError

from .conftest import settings
from .untrusted_kit import (
    ALLOWED,
    STORES,
    errors_of,
    nested,
    refusals,
    run_to_end,
    serving,
    store_directly,
    store_url,
    unique,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

CAPS = {"PLAIT_MAX_MAP_ITEMS": "5", "PLAIT_MAX_OUTPUT_BYTES": "1KiB",
        "PLAIT_MAX_STEPS": "50", "PLAIT_MAX_DEPTH": "20",
        "PLAIT_MAX_SUBWORKFLOW_DEPTH": "2"}


def capped() -> ServerSettings:
    return settings(allowed_modules=ALLOWED, caps=ServerSettings.from_environment(CAPS).caps)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with serving(f"sqlite:///{tmp_path_factory.mktemp('caps')}/api.db",
                 capped()) as started:
        yield started


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with serving(store_url(request.param, request, tmp_path_factory), capped()) as started:
        yield started


def test_settings_read_the_caps() -> None:
    caps = ServerSettings.from_environment(CAPS).caps
    assert caps == Limits(max_steps=50, max_depth=20, max_map_items=5,
                          max_subworkflow_depth=2, max_output_bytes=1024)
    assert ServerSettings.from_environment({}).caps == Limits()


@pytest.mark.parametrize(("variable", "value"), [
    ("PLAIT_MAX_MAP_ITEMS", "many"), ("PLAIT_MAX_STEPS", "0"), ("PLAIT_MAX_DEPTH", "-3"),
    ("PLAIT_MAX_SUBWORKFLOW_DEPTH", "2.5"), ("PLAIT_MAX_OUTPUT_BYTES", "16 parsecs")])
def test_a_bad_cap_names_its_variable(variable: str, value: str) -> None:
    with pytest.raises(SettingError) as caught:
        ServerSettings.from_environment({variable: value})
    assert caught.value.variable == variable and variable in str(caught.value)


def test_plait_serve_refuses_to_start_with_a_bad_cap(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
    env["PLAIT_MAX_MAP_ITEMS"] = "lots"
    result = subprocess.run([sys.executable, "-m", "plait", "serve", "--db", "memory://",
                             "--port", "1"], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 2
    assert "PLAIT_MAX_MAP_ITEMS" in result.stderr and "lots" in result.stderr


@pytest.mark.parametrize(("limits", "cap", "setting"), [
    ({"max_map_items": 10_000_000}, "max_map_items", "PLAIT_MAX_MAP_ITEMS"),
    ({"max_output_bytes": "16MiB"}, "max_output_bytes", "PLAIT_MAX_OUTPUT_BYTES"),
    ({"max_steps": 51}, "max_steps", "PLAIT_MAX_STEPS"),
    ({"max_depth": 1000}, "max_depth", "PLAIT_MAX_DEPTH"),
    ({"max_subworkflow_depth": 3}, "max_subworkflow_depth", "PLAIT_MAX_SUBWORKFLOW_DEPTH"),
])
@pytest.mark.parametrize("path", [(), ("workflow",), ("loop", "map", "workflow")])
def test_limits_over_a_cap_are_refused_at_any_depth(
        client: TestClient, limits: dict[str, Any], cap: str, setting: str,
        path: tuple[str, ...]) -> None:
    definition = {"name": unique("caps"), "limits": limits,
                  "steps": [{"id": "a", "type": "transform", "value": 1}]}
    where = "limits"
    if path:  # the limits of an inline child definition, `path` deep
        child = {"type": "workflow", "workflow": "kid",
                 "definition": {**definition, "name": "kid"}}
        definition, inner = nested(child, path[:-1], "caps")
        where = f"{inner}.definition.limits"
    found = refusals(client, definition)
    assert setting in found[f"{where}.{cap}"], found
    assert "over the cap" in found[f"{where}.{cap}"]


def test_limits_within_the_caps_are_accepted(client: TestClient) -> None:
    definition = {"name": unique("within"), "limits": {
        "max_map_items": 5, "max_output_bytes": "1KiB", "max_subworkflow_depth": 1},
        "steps": [{"id": "a", "type": "transform", "value": 1}]}
    assert client.post("/api/workflows", json=definition).status_code == 201


def test_default_caps_are_the_engine_defaults(tmp_path: Path) -> None:
    with serving(f"sqlite:///{tmp_path}/d.db") as client:
        found = refusals(client, {"name": unique("big"), "limits": {
            "max_map_items": 10_001}, "steps": [{"id": "a", "type": "transform",
                                                  "value": 1}]})
        assert "cap of 10000" in found["limits.max_map_items"]


@pytest.mark.parametrize("server", STORES, indirect=True)
def test_the_servers_engine_bounds_a_stored_definition(server: TestClient) -> None:
    # no limits of its own: the engine's default (10,000 items) is capped at 5
    definition, _ = nested({"type": "transform", "value": "{{ item }}"}, ("map",), "bound")
    definition["steps"][0]["over"] = "{{ range(6) | list }}"
    name = store_directly(server, definition)
    run = run_to_end(server, name)
    assert run["status"] == "failed"
    assert "6 items, over limits.max_map_items (5)" in errors_of(run)
    # asking for more than the cap: refused before any step starts
    asking = {**definition, "name": unique("asking"), "limits": {
        "max_map_items": 10_000_000}}
    run = run_to_end(server, store_directly(server, asking))
    assert run["status"] == "failed"
    assert "limits.max_map_items: asks for 10000000" in errors_of(run)
    assert "PLAIT_MAX_MAP_ITEMS" in errors_of(run)
