"""A property of the rules for untrusted definitions: whatever the nesting (a map in
a definition in a loop in a workflow..., at random depth, after random harmless
steps), a definition with a forbidden call, key or secret somewhere is never
registered, and never executed when stored by another path."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from .untrusted_kit import (
    WRAPPERS,
    errors_of,
    everything_shown,
    nested,
    refusals,
    run_to_end,
    serving,
    store_directly,
    unique,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SECRET = "Prop-Secret-Value"


def forbidden(marker: Path) -> dict[str, tuple[dict[str, Any], str, str]]:
    """By name: a forbidden inline step, the field at fault, what its refusal says."""
    touch = {"command": f"touch {marker}"}
    return {
        "module": ({"type": "python", "call": "os:system", "with": touch}, "call",
                   "may not be called"),
        "dotted": ({"type": "python", "call": "server.steps_untrusted:os.system",
                    "with": touch}, "call", "attribute paths"),
        "private": ({"type": "python", "call": "server.steps_untrusted:_touch",
                     "with": {"path": str(marker)}}, "call", "private name"),
        "secret": ({"type": "transform", "value": "{{ secrets.API_KEY | upper }}"},
                   "value", "leave the process"),
        "key": ({"type": "llm", "base_url": "https://api.example.com", "model": "m",
                 "prompt": "hi", "api_key_env": "PLAIT_API_TOKEN"}, "api_key_env",
                "PLAIT_*"),
    }


def _no_map_in_map(path: list[str]) -> bool:
    return all(not (a == b == "map") for a, b in zip(path, path[1:], strict=False))


PATHS = st.lists(st.sampled_from(WRAPPERS), max_size=5).filter(_no_map_in_map)
KINDS = st.sampled_from(["module", "dotted", "private", "secret", "key"])


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PLAIT_SECRET_API_KEY", SECRET)
        with serving(f"sqlite:///{tmp_path_factory.mktemp('nesting')}/api.db",
                     allowed_secrets=("API_KEY",)) as started:
            yield started


@settings(max_examples=30, deadline=None)
@given(path=PATHS, kind=KINDS, before=st.integers(min_value=0, max_value=2))
def test_nothing_forbidden_is_registered_or_run_at_any_depth(
        client: TestClient, path: list[str], kind: str, before: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        marker = Path(folder) / "marker"
        step, field, rule = forbidden(marker)[kind]
        definition, where = nested(step, tuple(path), "prop")
        harmless = [{"id": f"h{i}", "type": "transform", "value": i} for i in range(before)]
        definition["steps"] = harmless + definition["steps"]
        where = where.replace("steps[0]", f"steps[{before}]", 1)
        found = refusals(client, definition)
        assert rule in found.get(f"{where}.{field}", ""), (where, found)
        # the same definition, stored by another path: no step of it runs
        definition["name"] = unique("prop-stored")
        name = store_directly(client, definition)
        run = run_to_end(client, name)
        assert run["status"] == "failed"
        assert f"{where}.{field}" in errors_of(run)
        assert all(s["status"] != "completed" for s in run["steps"].values())
        assert not marker.exists()
        shown = everything_shown(client, run["run_id"], name)
        assert SECRET not in shown and SECRET.upper() not in shown
