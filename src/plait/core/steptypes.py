"""What the core knows of step types: their names and how to check their fields.

The runtime attaches the code that executes each type (``plait.steps``); the core only
validates definitions, so it keeps the field checkers here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .model import JSON

# A checker returns (location suffix, message) pairs for a step's type-specific fields.
FieldChecker = Callable[[Mapping[str, JSON]], list[tuple[str, str]]]


@dataclass(frozen=True, slots=True, kw_only=True)
class StepTypeInfo:
    name: str
    fields: frozenset[str]
    required: frozenset[str] = frozenset()
    check: FieldChecker | None = None
    # fields whose strings are not templates (e.g. python `call`)
    literal_fields: frozenset[str] = frozenset()


_TYPES: dict[str, StepTypeInfo] = {}
# step types that were advertised but could not be loaded (an entry point whose import
# failed), with why: an unknown type of that name is reported with the reason
_UNAVAILABLE: dict[str, str] = {}


def register_type_info(info: StepTypeInfo) -> None:
    _TYPES[info.name] = info
    _UNAVAILABLE.pop(info.name, None)


def register_unavailable_type(name: str, reason: str) -> None:
    """Note that a step type named ``name`` was advertised but failed to load."""
    if name not in _TYPES:
        _UNAVAILABLE[name] = reason


def unavailable_reason(name: str) -> str | None:
    """Why the advertised step type ``name`` is missing, or None."""
    return _UNAVAILABLE.get(name)


def unavailable_types() -> dict[str, str]:
    """Every advertised step type that failed to load, with why."""
    return dict(_UNAVAILABLE)


def type_info(name: str) -> StepTypeInfo | None:
    return _TYPES.get(name)


def known_types() -> list[str]:
    return sorted(_TYPES)
