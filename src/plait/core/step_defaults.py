"""A definition's ``defaults:``: the fields every step takes unless it sets them.

Two kinds of keys (docs/definitions.md):

- a field of every step (``DEFAULTABLE`` in ``core.loader``: ``retry``, ``timeout``,
  ``trigger``, ``pool``, ``circuit_breaker``, ``allow_failure``): every step takes it;
- the name of a registered step type (``llm``, ``http``): a mapping of that type's
  fields (and of the fields above), taken by every step of that type, a map's inline
  step included.

A step's own value wins over ``defaults.TYPE``, which wins over ``defaults``.  A value
replaces the default whole, except ``retry`` (merged field by field) and ``headers``
(merged by name, case-insensitively: a default ``Authorization`` header and a step's
own ``X-Trace`` are both sent).  An inline child definition (a ``workflow`` step's)
has its own defaults: the parent's do not reach into it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import Problem
from .extension_keys import is_extension
from .model import JSON, JSONDict
from .steptypes import StepTypeInfo, known_types, type_info, unavailable_reason
from .suggest import did_you_mean

MERGED_BY_FIELD = "retry"
MERGED_BY_NAME = "headers"


@dataclass(frozen=True, slots=True)
class StepDefaults:
    """``common``: what every step takes; ``by_type``: what the steps of each type
    named under ``defaults`` take (``common`` included)."""

    common: JSONDict = field(default_factory=dict)
    by_type: Mapping[str, JSONDict] = field(default_factory=dict)

    def of(self, step_type: str) -> JSONDict:
        return self.by_type.get(step_type, self.common)


def merge(layer: JSONDict, own: JSONDict) -> JSONDict:
    """``own`` (a step, or a type's defaults) over ``layer`` (its defaults)."""
    if not layer:
        return own
    merged = {**layer, **own}
    base, mine = layer.get(MERGED_BY_FIELD), own.get(MERGED_BY_FIELD)
    if isinstance(base, dict) and isinstance(mine, dict):
        merged[MERGED_BY_FIELD] = {**base, **mine}
    base, mine = layer.get(MERGED_BY_NAME), own.get(MERGED_BY_NAME)
    if isinstance(base, dict) and isinstance(mine, dict):
        names = {str(k).lower() for k in mine}
        kept = {k: v for k, v in base.items() if str(k).lower() not in names}
        merged[MERGED_BY_NAME] = {**kept, **mine}
    return merged


def type_config(raw: JSONDict, merged: JSONDict, layer: JSONDict,
                fields: frozenset[str]) -> JSONDict:
    """A step's type fields: its own (merged with a default where that merges), then
    the defaults it does not set."""
    config = {k: merged[k] for k in raw if k in fields}
    for key in layer:
        if key in fields and key not in config:
            config[key] = layer[key]
    return config


def parse_defaults(value: JSON, common_fields: tuple[str, ...]
                   ) -> tuple[StepDefaults, list[Problem]]:
    """The defaults of a definition and the problems of its ``defaults:`` mapping."""
    if value is None:
        return StepDefaults(), []
    if not isinstance(value, dict):
        return StepDefaults(), [Problem(location="defaults", message=(
            "expected a mapping of step fields (retry, timeout, ...) and of step types "
            "(llm: {model: ...})"))]
    problems: list[Problem] = []
    common: JSONDict = {}
    typed: dict[str, JSONDict] = {}
    for key, body in value.items():
        if is_extension(key):
            continue
        info = None if key in common_fields else type_info(key)
        if key in common_fields:
            common[key] = body
        elif info is not None:
            own, found = _type_defaults(info, body, common_fields)
            typed[key] = own
            problems += found
        else:
            problems.append(_unknown(key, common_fields))
    return StepDefaults(common, {k: merge(common, v) for k, v in typed.items()}), problems


def _unknown(key: str, common_fields: tuple[str, ...]) -> Problem:
    where = f"defaults.{key}"
    reason = unavailable_reason(key)
    if reason is not None:  # a plugin advertised it, and failed to load
        return Problem(location=where, message=f"unknown step type {key!r}: {reason}",
                       hint="fix or reinstall the package that provides it")
    return Problem(location=where, message=(
        "unknown field for defaults: neither a field every step has (" + ", ".join(
            common_fields) + ") nor a registered step type"),
        hint=did_you_mean(key, (*common_fields, *known_types()))
        or f"step types: {', '.join(known_types())}")


def _type_defaults(info: StepTypeInfo, body: JSON, common_fields: tuple[str, ...]
                   ) -> tuple[JSONDict, list[Problem]]:
    """The defaults of the steps of one type, without the fields that are refused
    (each refused once, here, rather than at every step that would take it)."""
    where = f"defaults.{info.name}"
    if not isinstance(body, dict):
        return {}, [Problem(location=where, message=(
            f"expected a mapping of fields of {info.name} steps, got "
            f"{type(body).__name__}"))]
    allowed = info.fields | frozenset(common_fields)
    problems = [_unknown_field(info, f"{where}.{key}", key, allowed)
                for key in body if key not in allowed and not is_extension(key)]
    own = {k: v for k, v in body.items() if k in allowed}
    refused: set[str] = set()
    for suffix, message in info.check(own) if info.check is not None else []:
        name = _field_of(suffix)
        if name in own:  # (a check about a field it does not set: the step's to meet)
            refused.add(name)
            problems.append(Problem(location=f"{where}{suffix}", message=message))
    return {k: v for k, v in own.items() if k not in refused}, problems


def _unknown_field(info: StepTypeInfo, where: str, key: str,
                   allowed: frozenset[str]) -> Problem:
    return Problem(location=where, message=f"unknown field for {info.name} steps' defaults",
                   hint=did_you_mean(key, allowed)
                   or f"fields of {info.name} steps: {', '.join(sorted(info.fields))}")


def _field_of(suffix: str) -> str:
    """``.headers.X`` / ``.messages[0]`` -> the field: ``headers`` / ``messages``."""
    name = suffix.lstrip(".")
    for stop in (".", "["):
        name = name.split(stop, 1)[0]
    return name
