"""Small builders shared by the core unit tests."""

from __future__ import annotations

from typing import Any

import pytest

from plait.core.loader import parse_definition
from plait.core.validate import CheckedWorkflow, check
from plait.errors import DefinitionError, Problem

# the front end registers the built-in step types the loader checks against (a bare
# `import plait` loads nothing: this module's tests must also pass when run alone)
import plait.workflow  # noqa: F401  isort: skip


def t(id: str, *deps: str, value: Any = 1, **fields: Any) -> dict[str, Any]:
    """A transform step (the simplest type: no code to import)."""
    step: dict[str, Any] = {"id": id, "type": "transform", "value": value, **fields}
    if deps:
        step["depends_on"] = list(deps)
    return step


def wf(*steps: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"name": "test", "steps": list(steps), **top}


def load(definition: object) -> CheckedWorkflow:
    spec, problems = parse_definition(definition)
    if spec is None:
        raise DefinitionError(problems)
    return check(spec, prior=problems)


def problems_of(definition: object) -> list[Problem]:
    with pytest.raises(DefinitionError) as info:
        load(definition)
    assert info.value.problems, "a DefinitionError lists its problems"
    return list(info.value.problems)


def find(problems: list[Problem], location: str) -> Problem:
    found = [p for p in problems if p.location == location]
    assert found, f"no problem at {location!r}; got {[str(p) for p in problems]}"
    return found[0]
