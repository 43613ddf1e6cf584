"""Parsing definition text safely: duplicate keys, alias bombs, size limits."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from plait import Workflow
from plait.core.source import parse_text
from plait.errors import DefinitionError

VALID = """\
name: tiny
steps:
  - id: a
    type: transform
    value: {x: 1}
  - id: b
    type: transform
    depends_on: [a]
    value: "{{ steps.a.output.x }}"
"""


def only_problem(exc: DefinitionError) -> str:
    assert len(exc.problems) == 1
    return exc.problems[0].message


def test_valid_yaml_and_json_load() -> None:
    assert parse_text(VALID, source="f.yaml")["steps"][1]["depends_on"] == ["a"]
    assert parse_text('{"name": "x", "steps": []}', source="f.json") == {"name": "x",
                                                                         "steps": []}
    wf = Workflow.from_yaml(VALID)
    assert wf.validate().graph.ids == ("a", "b")


def test_duplicate_yaml_key_is_refused_with_its_line() -> None:
    text = "name: w\nsteps:\n  - id: a\n    type: transform\n    value: 1\n    value: 2\n"
    with pytest.raises(DefinitionError) as info:
        parse_text(text, source="dup.yaml")
    message = only_problem(info.value)
    # each location once: where the key repeats, and where it first appeared
    assert message == ("YAML error: duplicate key 'value' at line 6, column 5 "
                       "(first at line 5, column 5)")
    assert info.value.source == "dup.yaml"
    assert str(info.value) == ("dup.yaml: invalid workflow definition (1 problem):\n"
                               f"  - {message}")


def test_duplicate_top_level_yaml_key() -> None:
    with pytest.raises(DefinitionError) as info:
        parse_text("name: a\nsteps: []\nname: b\n", source="f.yaml")
    assert only_problem(info.value) == ("YAML error: duplicate key 'name' at line 3, "
                                        "column 1 (first at line 1, column 1)")


def test_duplicate_json_key_is_refused() -> None:
    with pytest.raises(DefinitionError) as info:
        parse_text('{"name": "a", "name": "b"}', source="f.json")
    assert "duplicate key 'name'" in only_problem(info.value)


def test_merge_keys_still_work() -> None:
    text = "base: &b {type: transform, value: 1}\nstep: {<<: *b, id: a}\n"
    assert parse_text(text, source="f.yaml")["step"] == {"type": "transform", "value": 1,
                                                         "id": "a"}


def test_alias_bomb_is_refused_quickly() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 10):
        refs = ", ".join([f"*a{i - 1}"] * 10)
        lines.append(f"a{i}: &a{i} [{refs}]")
    text = "\n".join(lines) + "\n"  # 10**10 values once expanded
    # CPU time of this process, so a loaded machine does not fail it: a guard
    # against a blow-up, not a speed goal
    started = time.process_time()
    with pytest.raises(DefinitionError) as info:
        parse_text(text, source="bomb.yaml")
    assert time.process_time() - started < 5
    assert "expands to over" in only_problem(info.value)


def test_moderate_alias_reuse_is_allowed() -> None:
    text = "shared: &s {type: transform, value: [1, 2, 3]}\n" + "".join(
        f"s{i}: *s\n" for i in range(100))
    data = parse_text(text, source="f.yaml")
    assert data["s99"] == {"type": "transform", "value": [1, 2, 3]}


def test_recursive_alias_is_refused() -> None:
    with pytest.raises(DefinitionError) as info:
        parse_text("name: w\nsteps: &s\n  - *s\n", source="loop.yaml")
    assert "expands" in only_problem(info.value)


def test_python_tags_are_never_constructed(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    text = f"!!python/object/apply:os.system ['touch {marker}']\n"
    with pytest.raises(DefinitionError) as info:
        parse_text(text, source="evil.yaml")
    assert "YAML error" in only_problem(info.value)
    assert not marker.exists()


def test_yaml_syntax_error_names_the_line() -> None:
    with pytest.raises(DefinitionError) as info:
        parse_text("name: w\nsteps: [\n", source="bad.yaml")
    assert "line 3" in only_problem(info.value)


def test_load_refuses_files_over_max_bytes(tmp_path: Path) -> None:
    path = tmp_path / "flow.yaml"
    path.write_text(VALID, encoding="utf-8")
    size = path.stat().st_size
    with pytest.raises(DefinitionError) as info:
        Workflow.load(path, max_bytes=size - 1)
    assert f"{size} bytes" in only_problem(info.value)
    assert info.value.source == str(path)
    assert Workflow.load(path, max_bytes=size).validate().graph.size == 2


def test_load_reports_missing_and_non_utf8_files(tmp_path: Path) -> None:
    with pytest.raises(DefinitionError) as info:
        Workflow.load(tmp_path / "absent.yaml")
    assert "cannot read" in only_problem(info.value)
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"name: \xff\xfe\n")
    with pytest.raises(DefinitionError) as info:
        Workflow.load(binary)
    assert "UTF-8" in only_problem(info.value)


def test_load_lists_definition_problems_with_the_file_name(tmp_path: Path) -> None:
    path = tmp_path / "flow.yaml"
    path.write_text("name: w\nsteps:\n  - {id: a, type: transform, value: 1, "
                    "depends_on: [b]}\n", encoding="utf-8")
    with pytest.raises(DefinitionError) as info:
        Workflow.load(path)
    assert info.value.problems[0].location == "steps[0].depends_on[0]"
    assert str(path) in str(info.value)


MERGED = """\
name: merged
x-llm: &llm {type: transform, value: base, id: from_anchor}
x-other: &other {value: other, description: from other}
steps:
  - <<: *llm
    id: a
  - <<: [*other, *llm]
    id: b
  - <<: [*llm, *other]
    id: c
    value: own
"""


def test_merge_keys_yield_to_the_mappings_own_keys_and_the_first_listed() -> None:
    steps = parse_text(MERGED, source="f.yaml")["steps"]
    assert steps[0] == {"type": "transform", "value": "base", "id": "a"}
    assert steps[1] == {"type": "transform", "value": "other", "id": "b",
                        "description": "from other"}
    assert steps[2]["value"] == "own" and steps[2]["id"] == "c"
    assert Workflow.from_yaml(MERGED).validate().graph.ids == ("a", "b", "c")


@pytest.mark.parametrize(("text", "message"), [
    ("a: &a {k: 1}\nb: {<<: *a, j: 1, j: 2}\n",
     "duplicate key 'j' at line 2, column 19 (first at line 2, column 13)"),
    ("a: &a {k: 1}\nb: {<<: *a, <<: *a}\n",
     "duplicate key '<<' at line 2, column 13 (first at line 2, column 5)"),
    ("b:\n  <<: &a {k: 1, k: 2}\n  j: 1\n",
     "duplicate key 'k' at line 2, column 17 (first at line 2, column 11)"),
])
def test_a_key_written_twice_in_one_mapping_is_still_a_duplicate(text: str,
                                                                 message: str) -> None:
    with pytest.raises(DefinitionError) as info:
        parse_text(text, source="f.yaml")
    assert only_problem(info.value) == f"YAML error: {message}"


def test_a_chain_of_merges_is_bounded_like_aliases() -> None:
    lines = ["a0: &a0 {k0: 1}"] + [f"a{i}: &a{i} {{<<: *a{i - 1}, k{i}: 1}}"
                                   for i in range(1, 3000)]
    # CPU time of this process, so a loaded machine does not fail it: a guard
    # against a blow-up, not a speed goal
    started = time.process_time()
    with pytest.raises(DefinitionError) as info:
        parse_text("\n".join(lines), source="f.yaml")
    assert "expands to over 1000000 values" in only_problem(info.value)
    assert time.process_time() - started < 5
