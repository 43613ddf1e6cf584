"""A definition's ``input`` schema (JSON Schema 2020-12): checked with the definition,
and each run's input checked against it.

jsonschema follows ``$ref`` by recursion and resolves it when it meets it, so a schema
can be well-formed yet unusable: ``{"$ref": "#"}`` or ``{"allOf": [{"$ref": "#"}]}``
recurse without end (RecursionError) on any input, and ``{"$ref": "#/nope"}`` or a
remote URL (never fetched) cannot be resolved.  Validation checks the simplest inputs
against the schema to find those at its top; a reference deeper in (reached only by
some inputs) is reported when a run's input reaches it, as a problem of that input,
never as an exception out of the run's creation."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..errors import Problem
from .model import JSON, JSONDict

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

# The inputs checked when the definition is: one of each JSON type (any reference at
# the schema's top is followed for all of them).
_PROBES: tuple[JSON, ...] = (None, {}, [], "", 0)


def schema_problems(schema: JSONDict | None) -> list[Problem]:
    """What makes ``schema`` unusable as an input schema (empty when it is usable)."""
    if schema is None:
        return []
    # imported here: only definitions with an input schema pay for jsonschema
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return [Problem(location=f"input{_path(exc.path)}",
                        message=f"not a valid JSON Schema: {exc.message}")]
    validator = Draft202012Validator(schema)
    for probe in _PROBES:
        problem = _reference_problem(validator, probe)
        if problem is not None:
            return [Problem(location="input", message=problem)]
    return []


def input_problems(schema: JSONDict | None, value: JSON) -> list[str]:
    """Messages for each way ``value`` fails ``schema`` (empty when it passes)."""
    if schema is None:
        return []
    from jsonschema import Draft202012Validator
    from referencing.exceptions import Unresolvable

    try:
        found = sorted(Draft202012Validator(schema).iter_errors(value),
                       key=lambda e: list(e.path))
    except (RecursionError, Unresolvable) as exc:  # see the module docstring
        return [f"input: {_unusable(exc)}"]
    return [f"input{_path(err.path)}: {err.message}" for err in found]


def _reference_problem(validator: Validator, value: JSON) -> str | None:
    """Why checking ``value`` cannot end, or None (it ends, valid or not)."""
    from referencing.exceptions import Unresolvable

    try:
        validator.is_valid(value)
    except (RecursionError, Unresolvable) as exc:
        return _unusable(exc)
    return None


def _unusable(exc: Exception) -> str:
    if isinstance(exc, RecursionError):  # jsonschema's own recursion, on a reference loop
        return ("the input schema refers to itself without end (a $ref loop that reads "
                "no part of the input), so no input can be checked against it")
    return f"the input schema has a reference that cannot be resolved: {exc}"


def _path(parts: Iterable[str | int]) -> str:
    return "".join(f".{p}" if isinstance(p, str) else f"[{p}]" for p in parts)
