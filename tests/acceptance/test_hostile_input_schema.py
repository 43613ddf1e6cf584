"""Hostile input schemas: well-formed JSON Schema whose references loop without end
(``{"$ref": "#"}``: a RecursionError in jsonschema) or point nowhere.  A loop or a
dangling reference at the schema's top is a located problem of the definition; one
deeper in, reached by some inputs only, refuses those inputs (exit 2), never a crash."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hostile import invoke, located, refused, validate_and_run, write_json

from plait import Workflow
from plait.errors import InputError

LOOP = "refers to itself without end"
NOWHERE = "reference that cannot be resolved"


def with_schema(schema: Any) -> dict[str, Any]:
    return {"name": "schema", "input": schema,
            "steps": [{"id": "a", "type": "transform", "value": 1}]}


@pytest.mark.parametrize("schema, needle", [
    ({"$ref": "#"}, LOOP), ({"allOf": [{"$ref": "#"}]}, LOOP),
    ({"not": {"$ref": "#"}}, LOOP), ({"anyOf": [{"$ref": "#/$defs/a"}],
                                      "$defs": {"a": {"$ref": "#"}}}, LOOP),
    ({"$ref": "#/nope"}, NOWHERE), ({"$ref": "http://127.0.0.1:9/schema"}, NOWHERE),
    ({"$dynamicRef": "#missing"}, NOWHERE),
])
def test_an_unusable_schema_is_a_located_problem(schema: Any, needle: str) -> None:
    located(with_schema(schema), "input", needle)


@pytest.mark.parametrize("schema, needle", [
    ({"properties": {"a": {"$ref": "#/nope"}}}, NOWHERE),
    ({"properties": {"a": {"allOf": [{"$ref": "#/properties/a"}]}}}, LOOP),
])
def test_a_deeper_reference_refuses_the_inputs_that_reach_it(schema: Any,
                                                            needle: str) -> None:
    wf = Workflow.from_dict(with_schema(schema))
    assert wf.run({"b": 1}, db="memory://").status == "completed"
    with pytest.raises(InputError, match=needle):
        wf.run({"a": 1}, db="memory://")


def test_a_recursive_schema_that_reads_its_input_stays_valid() -> None:
    tree = {"type": "object", "properties": {"kids": {"type": "array",
                                                      "items": {"$ref": "#"}}}}
    wf = Workflow.from_dict(with_schema(tree))
    assert wf.run({"kids": [{"kids": []}]}, db="memory://").status == "completed"


def test_the_command_line_names_the_field_or_the_input(tmp_path: Path) -> None:
    validate_and_run(write_json(tmp_path, "loop.json", with_schema({"$ref": "#"})),
                     f"input: the input schema {LOOP}")
    deeper = write_json(tmp_path, "deeper.json",
                        with_schema({"properties": {"a": {"$ref": "#/nope"}}}))
    refused(invoke("run", str(deeper), "--db", "memory://", "--input", '{"a": 1}'), 2,
            NOWHERE)
