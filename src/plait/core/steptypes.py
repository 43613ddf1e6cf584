"""What the core knows of step types: their names, how to check their fields, and their
traits.

The runtime attaches the code that executes each type (``plait.steps``); the core only
validates definitions, so it keeps the field checkers here.  A trait says what a type
does to the shape of a run (it branches, expands, starts child runs, only waits...):
code outside ``plait.steps`` asks for the trait (``traits_of(name).branches``), never
for a type's name, so a plugin type with the trait is treated alike.
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
    # literal fields that hold a template when they are a string (a workflow step's
    # `definition`: an inline mapping, or a template written at run time)
    template_strings: frozenset[str] = frozenset()
    # traits (see the module docstring); the built-in types that have each in brackets
    # its `then`/`else` lists choose which of its children run (condition)
    branches: bool = False
    # runs its inline `step` once per item, as items `ID[i]` (map)
    expands: bool = False
    # its `call` field names a function imported to run it (python)
    imports_call: bool = False
    # at most how many child runs a step with these fields starts (workflow: 1, loop:
    # its max_iterations); None: it starts none
    child_runs: Callable[[Mapping[str, JSON]], int] | None = None
    # its attempts only wait (for a person, a moment, a child run): their time is not
    # compute time (approval, delay, workflow, loop)
    only_waits: bool = False


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


NO_TRAITS = StepTypeInfo(name="", fields=frozenset())  # an unknown type has none


def traits_of(name: object) -> StepTypeInfo:
    """The registered type ``name`` (for its traits), or ``NO_TRAITS``."""
    found = _TYPES.get(name) if isinstance(name, str) else None
    return NO_TRAITS if found is None else found


def known_types() -> list[str]:
    return sorted(_TYPES)


def types_with_field(name: str) -> list[str]:
    """The registered step types that have a field ``name``."""
    return sorted(t.name for t in _TYPES.values() if name in t.fields)
