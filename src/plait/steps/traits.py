"""The traits of a step type by name, for code that reads stored definitions without
loading them (metrics, the run document): the built-in types, and the plugins'
(entry points), are registered first, as loading a definition would."""

from __future__ import annotations

from ..core.steptypes import StepTypeInfo, traits_of, type_info
from .builtin import ensure_builtins
from .registry import load_plugins


def traits(name: object) -> StepTypeInfo:
    """The registered type ``name`` (``core.steptypes.NO_TRAITS`` when there is none)."""
    ensure_builtins()
    if isinstance(name, str) and type_info(name) is None:
        load_plugins()  # once per process
    return traits_of(name)
