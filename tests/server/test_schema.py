"""The definition format's JSON Schema: served, printed, and in step with the loader."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from plait.cli.main import cli
from plait.core.steptypes import known_types, type_info
from plait.defschema import definition_schema, described_fields

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").rglob("*.yaml"))


@functools.cache  # checking the schema against the meta-schema takes a second or more
def _validator() -> jsonschema.Draft202012Validator:
    schema = definition_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.parent.name)
def test_every_example_validates(path: Path) -> None:
    errors = [e.message for e in _validator().iter_errors(yaml.safe_load(path.read_text()))]
    assert errors == []


def test_typos_and_wrong_shapes_are_flagged() -> None:
    validator = _validator()
    base = yaml.safe_load(EXAMPLES[0].read_text())
    for change, expected in [
        (lambda d: d["steps"][0].update(dependz_on=["x"]), "dependz_on"),
        (lambda d: d.update(concurency=3), "concurency"),
        (lambda d: d["steps"][0].update(type="pythn"), "pythn"),
        (lambda d: d["steps"][0].update(retry={"max_retry": 1}), "max_retry"),
        (lambda d: d["steps"][0].pop("id"), "'id' is a required property"),
        (lambda d: d.update(on_failure="stop"), "stop"),
    ]:
        data = json.loads(json.dumps(base))
        change(data)
        messages = " ".join(e.message for e in validator.iter_errors(data))
        assert expected in messages, (expected, messages)


def test_transform_needs_its_value_and_knows_its_fields() -> None:
    validator = _validator()
    data = {"name": "t", "steps": [{"id": "a", "type": "transform"}]}
    assert any("'value'" in e.message for e in validator.iter_errors(data))
    data["steps"][0]["value"] = 1
    assert list(validator.iter_errors(data)) == []
    data["steps"][0]["call"] = "m:f"  # a python field on a transform step
    assert list(validator.iter_errors(data))


def test_every_loader_field_is_described() -> None:
    schema = definition_schema()
    fields = described_fields()
    assert set(schema["properties"]) == set(fields["top"])
    assert set(schema["$defs"]["step"]["properties"]) == set(fields["step"])
    defaults = schema["properties"]["defaults"]["properties"]
    assert set(defaults) == set(fields["defaults"]) | set(known_types())
    assert set(defaults["llm"]["properties"]) == set(type_info("llm").fields) | set(
        fields["defaults"])
    retry = schema["$defs"]["step"]["properties"]["retry"]["oneOf"][1]["properties"]
    assert set(retry) == set(fields["retry"])
    schedule = schema["properties"]["schedules"]["items"]["properties"]
    assert set(schedule) == set(fields["schedule"])


def test_plait_schema_prints_it() -> None:
    result = CliRunner().invoke(cli, ["schema"])
    assert result.exit_code == 0
    assert json.loads(result.output) == definition_schema()


def test_defaults_by_type_and_x_keys() -> None:
    validator = _validator()
    data = {"name": "t", "x-llm": {"any": "thing"}, "steps": [
        {"id": "a", "type": "llm", "prompt": "hi", "x-note": 1}],
        "defaults": {"llm": {"model": "m", "base_url": "https://e.com/v1",
                             "api_key_env": "K", "timeout": "1m"}, "x-team": "ml"}}
    assert [e.message for e in validator.iter_errors(data)] == []
    data["defaults"]["llm"]["modle"] = "m"
    data["defaults"]["lmm"] = {}
    messages = " ".join(e.message for e in validator.iter_errors(data))
    assert "modle" in messages and "lmm" in messages
    del data["defaults"]["llm"]["api_key_env"]  # then each llm step must give it
    messages = " ".join(e.message for e in validator.iter_errors(data))
    assert "'api_key_env' is a required property" in messages
