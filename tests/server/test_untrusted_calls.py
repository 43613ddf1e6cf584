"""Code execution through definitions registered over the API: every step-like place
at any depth (a map's inline step, the inline definition of a workflow or loop step,
a map in a definition in a loop, fallbacks, defaults, notify targets) follows the
rules for untrusted definitions, in every spelling an attacker tried (a module not
allowed, an attribute path, a private name, a function re-exported from elsewhere).
Refused at registration (422 naming each place), and refused again by the server's
engine (and its worker on PostgreSQL) for a definition stored by another path."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from .steps_untrusted import marker_of
from .untrusted_kit import (
    STORES,
    errors_of,
    nested,
    refusals,
    run_to_end,
    serving,
    shell,
    store_directly,
    store_url,
    unique,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

CATALOGUE = Path(__file__).parents[2] / "examples" / "data_collection" / "stations.json"

# (call, its `with`, given the marker file; what the refusal says)
SPELLINGS: dict[str, tuple[str, Any, str]] = {
    "module not allowed": ("os:system", lambda m: {"command": shell(m)},
                           "module 'os' may not be called"),
    "attribute path": ("server.steps_untrusted:os.system", lambda m: {"command": shell(m)},
                       "attribute paths (dots) are refused"),
    "attribute path of the example": ("collector:threading._os.system",
                                      lambda m: {"command": shell(m)},
                                      "attribute paths (dots) are refused"),
    "method of a module global": ("collector:CATALOGUE.write_text",
                                  lambda m: {"data": "overwritten"},
                                  "attribute paths (dots) are refused"),
    "private name": ("server.steps_untrusted:_touch", lambda m: {"path": str(m)},
                     "private name"),
    "re-exported function": ("server.steps_untrusted:getoutput",
                             lambda m: {"cmd": shell(m)},
                             "is defined in module 'subprocess', not in "
                             "'server.steps_untrusted'"),
}
# where the call sits: wrappers (outermost first), or a place of its own
PLACES: dict[str, tuple[str, ...]] = {
    "top-level step": (),
    "map inline step": ("map",),
    "workflow inline definition": ("workflow",),
    "loop inline definition": ("loop",),
    "map in a definition in a loop": ("loop", "map"),
    "workflow in a map in a workflow": ("workflow", "map", "workflow"),
}


def placed(place: str, call: str, given: Any) -> tuple[dict[str, Any], str]:
    """A definition with ``call`` at ``place``, and the location of the call."""
    if place == "fallback":
        return {"name": unique("fb"), "steps": [
            {"id": "a", "type": "transform", "value": 1, "fallback": {"call": call}}]}, \
            "steps[0].fallback.call"
    if place == "fallback of a map's inline step":
        definition, where = nested({"type": "transform", "value": 1,
                                    "fallback": {"call": call}}, ("map",), "fbmap")
        return definition, f"{where}.fallback.call"
    if place == "defaults":
        return {"name": unique("defaults"), "defaults": {"fallback": {"call": call}},
                "steps": [{"id": "a", "type": "transform", "value": 1}]}, \
            "defaults.fallback.call"
    if place == "notify":
        return {"name": unique("notify"), "notify": [{"on": ["run_failed"], "call": call}],
                "steps": [{"id": "a", "type": "transform", "value": 1}]}, "notify[0].call"
    step = {"type": "python", "call": call}
    if given is not None:
        step["with"] = given
    definition, where = nested(step, PLACES[place], "calls")
    return definition, f"{where}.call"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with serving(f"sqlite:///{tmp_path_factory.mktemp('calls')}/api.db") as started:
        yield started


@pytest.fixture(scope="module")
def server(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with serving(store_url(request.param, request, tmp_path_factory)) as started:
        yield started


@pytest.fixture(scope="module", autouse=True)
def catalogue_untouched() -> Iterator[None]:
    before = CATALOGUE.read_bytes()
    yield
    assert CATALOGUE.read_bytes() == before


OTHER_PLACES = ("fallback", "fallback of a map's inline step", "defaults", "notify")


# every place with every spelling, but `defaults` with a re-exported function: defaults
# cannot hold a fallback at all, so the validator refuses it before anything imports
# (the other spellings show the rule is applied there too)
MATRIX = [(place, spelling) for place in [*PLACES, *OTHER_PLACES]
          for spelling in sorted(SPELLINGS)
          if (place, spelling) != ("defaults", "re-exported function")]


@pytest.mark.parametrize(("place", "spelling"), MATRIX)
def test_every_place_and_spelling_is_refused_at_registration(
        client: TestClient, tmp_path: Path, place: str, spelling: str) -> None:
    call, given, rule = SPELLINGS[spelling]
    marker = tmp_path / "marker"
    definition, where = placed(place, call, given(marker))
    found = refusals(client, definition)
    assert where in found, found
    assert rule in found[where]
    assert not marker.exists()


def test_a_refusal_lists_every_place_at_once(client: TestClient, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    definition, where = nested({"type": "python", "call": "os:system",
                                "with": {"command": shell(marker)}}, ("loop", "map"))
    definition["steps"].append({"id": "b", "type": "python", "call": "os:popen",
                                "with": {"cmd": shell(marker)}})
    definition["notify"] = [{"on": ["run_failed"], "url": "http://127.0.0.1:9/hook"}]
    definition["steps"].append({"id": "c", "type": "workflow", "workflow": "kid",
                                "definition": {"name": "kid", "steps": [
                                    {"id": "h", "type": "http",
                                     "url": "http://169.254.169.254/latest"}]}})
    found = refusals(client, definition)
    assert {where + ".call", "steps[1].call", "notify[0].url",
            "steps[2].definition.steps[0].url"} <= set(found)
    assert "denied network" in found["notify[0].url"]
    assert "169.254.169.254" in found["steps[2].definition.steps[0].url"]
    assert not marker.exists()


@pytest.mark.parametrize("path", [("map",), ("loop", "map"), ("workflow",)])
def test_a_nested_http_step_to_loopback_is_refused(client: TestClient,
                                                   path: tuple[str, ...]) -> None:
    definition, where = nested({"type": "http", "url": "http://127.0.0.1:5432/"}, path)
    found = refusals(client, definition)
    assert "127.0.0.0/8" in found[f"{where}.url"]


def test_a_function_defined_in_an_allowed_module_still_runs(client: TestClient) -> None:
    definition, _ = nested({"type": "python", "call": "server.steps_untrusted:public",
                            "with": {}}, ("map",), "fine")
    response = client.post("/api/workflows", json=definition)
    assert response.status_code == 201, response.text
    run = run_to_end(client, definition["name"])
    assert run["status"] == "completed"
    assert run["steps"]["top"]["output"] == ["public"]


# ---------------------------------------------------------------- defence in depth

STORED_PLACES = [pytest.param(store, place, id=f"{store}-{place}")
                 for store in ("sqlite",) for place in [*PLACES, "fallback"]] + [
    pytest.param("postgres", place, marks=pytest.mark.postgres, id=f"postgres-{place}")
    for place in ("map inline step", "map in a definition in a loop", "fallback")]


@pytest.mark.parametrize(("server", "place"), STORED_PLACES, indirect=["server"])
def test_a_definition_stored_by_another_path_never_runs_the_call(
        server: TestClient, tmp_path: Path, place: str) -> None:
    marker = tmp_path / "marker"
    # os:system's `command` comes from the run input (a fallback has no `with`)
    definition, where = placed(place, "os:system", None)
    name = store_directly(server, definition)
    run = run_to_end(server, name, {"command": shell(marker)})
    assert run["status"] == "failed"
    errors = errors_of(run)
    assert "UntrustedRefused" in errors or "refused" in errors, errors
    assert f"{where}: module 'os' may not be called" in errors
    assert not marker.exists()
    # never retried: one attempt (and one of its fallback, refused too)
    assert len([a for a in run["attempts"] if a["step"] == "top" or a["step"] == "a"]) <= 2


@pytest.mark.parametrize("server", STORES, indirect=True)
def test_a_stored_notify_call_is_never_called(server: TestClient) -> None:
    definition = {"name": unique("notify"), "steps": [
        {"id": "a", "type": "python", "call": "server.steps_for_api:fail_when"}],
        "notify": [{"on": ["run_failed"], "call": "server.steps_untrusted:_notified"},
                   {"on": ["run_failed"], "call": "server.steps_untrusted:notified"}]}
    name = store_directly(server, definition)
    run = run_to_end(server, name, {"fail": True})
    assert run["status"] == "failed"
    assert "notify[0].call" in errors_of(run)
    allowed = marker_of("notified", run["run_id"])
    deadline = time.monotonic() + 10
    while not allowed.exists():  # the allowed target is called: delivery happened
        assert time.monotonic() < deadline, "the allowed notify target was not called"
        time.sleep(0.02)
    allowed.unlink()
    assert not marker_of("private", run["run_id"]).exists()


@pytest.mark.parametrize("server", ["sqlite"], indirect=True)
def test_a_refused_run_never_completes_even_when_its_steps_may_fail(
        server: TestClient, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    definition = {"name": unique("lenient"), "output": "{{ steps.a.status }}", "steps": [
        {"id": "a", "type": "python", "call": "server.steps_untrusted:_touch",
         "with": {"path": str(marker)}, "allow_failure": True},
        {"id": "b", "type": "transform", "value": 1, "allow_failure": True}]}
    run = run_to_end(server, store_directly(server, definition))
    assert run["status"] == "failed" and run["output"] is None
    assert "steps[0].call" in run["error"] and "private name" in run["error"]
    assert not marker.exists()


def test_trusted_definitions_keep_attribute_paths(tmp_path: Path) -> None:
    from plait import Workflow

    # `plait run FILE` and the Python API are trusted: module:qualname still resolves
    workflow = Workflow.from_dict({"name": "trusted", "steps": [
        {"id": "a", "type": "python", "call": "server.steps_untrusted:os.path.basename",
         "with": {"p": "/x/y.txt"}}]})
    result = workflow.run({}, db=f"sqlite:///{tmp_path}/trusted.db")
    assert result.status == "completed" and result.output == {"a": "y.txt"}


@pytest.mark.parametrize("server", ["sqlite"], indirect=True)
def test_a_refused_run_does_not_wait_for_a_person(server: TestClient) -> None:
    definition = {"name": unique("gated"), "steps": [
        {"id": "sign_off", "type": "approval", "prompt": "Ship it?"},
        {"id": "ship", "type": "python", "call": "os:system", "depends_on": ["sign_off"],
         "with": {"command": "true"}}]}
    run = run_to_end(server, store_directly(server, definition))
    assert run["status"] == "failed"
    assert run["steps"]["sign_off"]["status"] == "failed"
    assert "steps[1].call: module 'os' may not be called" in errors_of(run)
