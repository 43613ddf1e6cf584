"""Hostile definitions nested 10,000 and 100,000 levels deep (JSON, YAML flow and block
style, a Python structure): refused with a message naming the limit (256 levels), never
a RecursionError from a parser, on the command line or through the core."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from hostile import problems, refused, validate_and_run

from plait import DefinitionError, Workflow
from plait.core.source import parse_text

TOO_DEEP = "nests lists and mappings too deeply to read (at most 256 levels"


def json_text(depth: int, kind: str = "lists") -> str:
    inner = "[" * depth + "]" * depth if kind == "lists" else \
        '{"a": ' * depth + "1" + "}" * depth
    return ('{"name": "deep", "steps": [{"id": "a", "type": "transform", "value": '
            + inner + "}]}")


def yaml_text(depth: int) -> str:
    block = "".join("  " * (i + 3) + "a:\n" for i in range(depth)) + "  " * (depth + 3) + "b: 1\n"
    return "name: deep\nsteps:\n  - id: a\n    type: transform\n    value:\n" + block


@pytest.mark.parametrize("depth", [10_000, 100_000])
@pytest.mark.parametrize("kind", ["lists", "mappings"])
def test_deep_json_and_yaml_flow_text_is_refused(depth: int, kind: str) -> None:
    text = json_text(depth, kind)
    for source in ("deep.json", "deep.yaml"):  # YAML reads the JSON text as flow style
        with pytest.raises(DefinitionError) as info:
            parse_text(text, source=source)
        assert len(info.value.problems) == 1
        assert info.value.problems[0].message.startswith(f"the definition {TOO_DEEP}")


def test_deep_yaml_flow_style_is_refused_at_once() -> None:
    # PyYAML's scanner takes time quadratic in the depth of flow collections (seconds
    # for a thousand `[`): the loader stops at the 257th
    # CPU time of this process, so a loaded machine does not fail it: a guard
    # against a blow-up, not a speed goal
    started = time.process_time()
    with pytest.raises(DefinitionError, match="too deeply"):
        parse_text("value: " + "[" * 5_000 + "]" * 5_000, source="deep.yaml")
    assert time.process_time() - started < 1.0


def test_deep_yaml_block_style_is_refused() -> None:
    with pytest.raises(DefinitionError) as info:
        Workflow.from_dict(parse_text(yaml_text(2_000), source="deep.yaml"))
    assert len(info.value.problems) == 1


def test_a_little_past_the_limit_is_located() -> None:
    for text, source in ((json_text(300, "mappings"), "x.json"), (yaml_text(300), "x.yaml")):
        data = parse_text(text, source=source)
        found = problems(data)
        assert len(found) == 1 and found[0].location.startswith("steps[0].value.a.a.a")
        assert "256 levels" in found[0].message


def test_a_deep_python_structure_is_located() -> None:
    value: Any = 1
    for _ in range(100_000):
        value = [value]
    found = problems({"name": "deep", "steps": [{"id": "a", "type": "transform",
                                                 "value": value}]})
    assert len(found) == 1 and found[0].location.startswith("steps[0].value[0][0]")
    assert len(problems(value)) == 1  # the whole definition is the deep value


def test_validate_and_run_refuse_a_deep_file(tmp_path: Path) -> None:
    for name, text in (("deep.json", json_text(10_000)), ("block.yaml", yaml_text(2_000))):
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        validate_and_run(path, TOO_DEEP if name != "block.yaml" else "levels")


def test_no_traceback_from_the_real_command(plait: Any, tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text(json_text(100_000, "mappings"), encoding="utf-8")
    done = plait("run", str(path))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert TOO_DEEP in done.stderr
    refused_here = plait("validate", str(path))
    assert refused_here.returncode == 1 and "Traceback" not in refused_here.stderr


def test_refused_helper_sees_a_crash() -> None:
    from click.testing import Result

    crashed = Result(runner=None, stdout_bytes=b"", stderr_bytes=b"", output_bytes=b"",  # type: ignore[arg-type]
                     return_value=None, exit_code=1, exception=RecursionError("deep"))
    with pytest.raises(AssertionError):
        refused(crashed, 1)
