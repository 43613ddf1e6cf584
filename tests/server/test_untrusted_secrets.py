"""Keys and secrets of definitions registered over the API: an ``llm`` step's
``api_key_env`` only from PLAIT_ALLOWED_KEY_ENVS (never a ``PLAIT_*`` variable, even
listed); ``secrets.NAME`` only for names of PLAIT_ALLOWED_SECRETS, only by name, and
only in fields that leave the process, so no transform (upper, reverse, join, slices)
can bring one back in a run's output.  Refused at registration, at any depth, and by
the server's engine for a definition stored by another path."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from .untrusted_kit import (
    STORES,
    errors_of,
    everything_shown,
    nested,
    refusals,
    run_to_end,
    serving,
    store_directly,
    store_url,
    unique,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SECRET = "hunter2-Very-Secret"
ALLOWED = {"allowed_key_envs": ("MODEL_KEY", "PLAIT_WEBHOOK_SECRET"),
           "allowed_secrets": ("API_KEY",)}
PUBLIC = "https://api.example.com/v1"


@pytest.fixture(scope="module")
def secret_env() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PLAIT_SECRET_API_KEY", SECRET)
        patch.setenv("PLAIT_SECRET_DB", SECRET + "-db")
        yield


@pytest.fixture(scope="module")
def client(secret_env: None,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with serving(f"sqlite:///{tmp_path_factory.mktemp('secrets')}/api.db",
                 **ALLOWED) as started:
        yield started


@pytest.fixture(scope="module")
def server(secret_env: None, request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with serving(store_url(request.param, request, tmp_path_factory),
                 **ALLOWED) as started:
        yield started


def llm(key_env: str) -> dict[str, Any]:
    return {"type": "llm", "base_url": PUBLIC, "model": "m", "prompt": "hi",
            "api_key_env": key_env}


# ---------------------------------------------------------------- keys

@pytest.mark.parametrize(("key_env", "rule"), [
    ("PLAIT_API_TOKEN", "never send a PLAIT_* variable"),
    ("PLAIT_WEBHOOK_SECRET", "even when PLAIT_ALLOWED_KEY_ENVS lists it"),  # listed
    ("AWS_SECRET_ACCESS_KEY", "is not a key variable"),
])
@pytest.mark.parametrize("path", [(), ("map",), ("loop", "map"), ("workflow",)])
def test_key_envs_not_allowed_are_refused_at_any_depth(
        client: TestClient, key_env: str, rule: str, path: tuple[str, ...]) -> None:
    definition, where = nested(llm(key_env), path, "keys")
    found = refusals(client, definition)
    assert rule in found[f"{where}.api_key_env"], found


def test_a_listed_key_env_is_accepted(client: TestClient) -> None:
    definition, _ = nested(llm("MODEL_KEY"), ("map",), "listed")
    response = client.post("/api/workflows", json=definition)
    assert response.status_code == 201, response.text


# ---------------------------------------------------------------- secrets

TRANSFORMS = {
    "as it is": "{{ secrets.API_KEY }}",
    "upper": "{{ secrets.API_KEY | upper }}",
    "reverse and join": "{{ secrets.API_KEY | reverse | join }}",
    "slice": "{{ secrets.API_KEY[1:] }}",
    "list and join": "{{ secrets.API_KEY | list | join('-') }}",
    "by key": "{{ secrets['API_KEY'] | lower }}",
}


@pytest.mark.parametrize("template", sorted(TRANSFORMS))
@pytest.mark.parametrize("path", [(), ("map",), ("workflow", "map"), ("loop",)])
def test_no_transform_of_a_secret_may_reach_an_output(
        client: TestClient, template: str, path: tuple[str, ...]) -> None:
    definition, where = nested({"type": "transform", "value": {
        "leak": TRANSFORMS[template]}}, path, "transforms")
    found = refusals(client, definition)
    assert "only in fields that leave the process" in found[f"{where}.value.leak"]


FIELDS: dict[str, tuple[dict[str, Any], str]] = {
    "run output": ({"name": "x", "steps": [{"id": "a", "type": "transform", "value": 1}],
                    "output": "{{ secrets.API_KEY | upper }}"}, "output"),
    "when": ({"name": "x", "steps": [{"id": "a", "type": "transform", "value": 1,
                                      "when": "{{ secrets.API_KEY[0] == 'h' }}"}]},
             "steps[0].when"),
    "condition if": ({"name": "x", "steps": [
        {"id": "c", "type": "condition", "if": "{{ 'h' in secrets.API_KEY }}",
         "then": ["a"]}, {"id": "a", "type": "transform", "value": 1}]}, "steps[0].if"),
    "map over": ({"name": "x", "steps": [
        {"id": "m", "type": "map", "over": "{{ secrets.API_KEY | list }}",
         "step": {"type": "transform", "value": "{{ item }}"}}]}, "steps[0].over"),
    "loop until": ({"name": "x", "steps": [
        {"id": "l", "type": "loop", "workflow": "kid", "max_iterations": 1,
         "until": "{{ secrets.API_KEY | length > 3 }}",
         "definition": {"name": "kid", "steps": [
             {"id": "a", "type": "transform", "value": 1}]}}]}, "steps[0].until"),
    "cache key": ({"name": "x", "steps": [
        {"id": "a", "type": "transform", "value": 1,
         "cache": {"key": "{{ secrets.API_KEY }}", "ttl": "1h"}}]}, "steps[0].cache.key"),
    "http url": ({"name": "x", "steps": [
        {"id": "h", "type": "http", "url": PUBLIC + "/{{ secrets.API_KEY }}"}]},
                 "steps[0].url"),
    "python with": ({"name": "x", "steps": [
        {"id": "p", "type": "python", "call": "server.steps_for_api:double",
         "with": {"n": "{{ secrets.API_KEY | length }}"}}]}, "steps[0].with.n"),
    "fallback output": ({"name": "x", "steps": [
        {"id": "a", "type": "transform", "value": 1,
         "fallback": {"output": "{{ secrets.API_KEY }}"}}]}, "steps[0].fallback.output"),
}


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_secrets_are_refused_in_every_field_that_stays(client: TestClient,
                                                       field: str) -> None:
    definition, where = FIELDS[field]
    found = refusals(client, {**definition, "name": unique("fields")})
    assert "only in fields that leave the process" in found[where], found


@pytest.mark.parametrize(("template", "rule"), [
    ("{{ secrets['API' ~ '_KEY'] }}", "other than as secrets.NAME"),
    ("{{ secrets | tojson }}", "other than as secrets.NAME"),
    ("{% for k in secrets %}{{ k }}{% endfor %}", "other than as secrets.NAME"),
    ("{{ secrets.values() | list }}", "other than as secrets.NAME"),
    ("{{ secrets.DB }}", "secrets.DB is not a secret"),
])
def test_secrets_read_dynamically_or_not_listed_are_refused(
        client: TestClient, template: str, rule: str) -> None:
    definition, where = nested({"type": "http", "url": PUBLIC,
                                "headers": {"Authorization": template}}, ("map",))
    found = refusals(client, definition)
    assert rule in found[f"{where}.headers.Authorization"], found


def test_a_listed_secret_may_be_sent_in_a_header(client: TestClient) -> None:
    definition, _ = nested({"type": "http", "url": PUBLIC, "headers": {
        "Authorization": "Bearer {{ secrets.API_KEY }}"}, "json": {
        "k": "{{ secrets.API_KEY }}"}}, ("workflow", "map"), "sent")
    response = client.post("/api/workflows", json=definition)
    assert response.status_code == 201, response.text


# ---------------------------------------------------------------- defence in depth

@pytest.mark.parametrize("server", STORES, indirect=True)
@pytest.mark.parametrize("template", ["upper", "reverse and join", "list and join"])
def test_a_stored_transform_of_a_secret_never_comes_back(server: TestClient,
                                                         template: str) -> None:
    definition, where = nested({"type": "transform", "value": {
        "leak": TRANSFORMS[template]}}, ("map",), "stored")
    definition["output"] = "{{ steps.top.output }}"
    name = store_directly(server, definition)
    run = run_to_end(server, name)
    assert run["status"] == "failed"
    assert f"{where}.value.leak: secrets.API_KEY" in errors_of(run)
    shown = everything_shown(server, run["run_id"], name)
    for form in (SECRET, SECRET.upper(), SECRET[::-1], "-".join(SECRET), SECRET[1:]):
        assert form not in shown


@pytest.mark.parametrize("server", ["sqlite"], indirect=True)
def test_a_stored_llm_step_never_reads_a_server_variable(server: TestClient) -> None:
    definition, where = nested(llm("PLAIT_API_TOKEN"), ("loop",), "stored-key")
    name = store_directly(server, definition)
    run = run_to_end(server, name)
    assert run["status"] == "failed"
    assert f"{where}.api_key_env: api_key_env 'PLAIT_API_TOKEN'" in errors_of(run)
