"""The public API is one sorted ``__all__``: every name in it imports, and every error
class plait raises on purpose is reachable from ``plait`` itself."""

from __future__ import annotations

import inspect

import plait
from plait import errors


def test_all_is_sorted_and_unique() -> None:
    assert list(plait.__all__) == sorted(set(plait.__all__))


def test_every_exported_name_exists() -> None:
    missing = [name for name in plait.__all__ if not hasattr(plait, name)]
    assert missing == []


def test_every_error_class_is_exported() -> None:
    defined = {name for name, obj in vars(errors).items()
               if inspect.isclass(obj) and issubclass(obj, errors.PlaitError)
               and obj.__module__ == errors.__name__}
    assert defined <= set(plait.__all__), sorted(defined - set(plait.__all__))


def test_error_tree_docstring_names_every_error() -> None:
    doc = errors.__doc__ or ""
    undocumented = [name for name, obj in vars(errors).items()
                    if inspect.isclass(obj) and issubclass(obj, errors.PlaitError)
                    and obj.__module__ == errors.__name__ and name not in doc]
    assert undocumented == []


def test_import_plait_loads_names_on_first_use() -> None:
    """``import plait`` alone loads neither the engine nor Jinja2; a type registered
    through plait still replaces the built-in one of its name (the built-ins register
    first)."""
    import subprocess
    import sys

    code = """
import sys, plait
assert "plait.workflow" not in sys.modules and "jinja2" not in sys.modules
from plait import StepType, register_step_type
register_step_type(StepType(name="delay", run=None, fields=frozenset()))
from plait.steps.registry import get_step_type
assert get_step_type("delay").fields == frozenset(), "the built-in delay came back"
print(plait.Workflow.__name__, plait.PlaitError.__name__)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["Workflow", "PlaitError"]
