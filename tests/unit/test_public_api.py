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
