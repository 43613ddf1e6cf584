"""Child workflow files of ``workflow`` and ``loop`` steps, read and validated with the
parent (docs/subworkflows.md).  Apart from ``steps.subworkflow`` so that loading a
definition (``plait.definitions``) needs nothing of the runtime."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from ..core.model import JSONDict
from ..errors import DefinitionError, Problem

if TYPE_CHECKING:
    from ..core.validate import CheckedWorkflow

# check(data, source): the definition checked (``definitions.check_definition``), or
# DefinitionError
Check = Callable[[object, str | None], "CheckedWorkflow"]
# the files being loaded, outermost first (a file that includes itself is refused)
_LOADING: ContextVar[tuple[str, ...]] = ContextVar("plait_loading", default=())


def is_path(ref: str) -> bool:
    """Whether a ``workflow:`` reference is a file path (not a stored name)."""
    return ref.startswith(("./", "../", "/")) or ref.endswith((".yaml", ".yml", ".json"))


@dataclass(frozen=True, slots=True)
class _Parent:
    """Where the children of one definition are read from."""

    base: Path | None  # the parent's folder (None: the parent has no file)
    stack: tuple[str, ...]  # the files being loaded, this one last
    check: Check


def include_child_files(data: object, source: str | None,
                        check: Check) -> tuple[object, list[Problem]]:
    """``data`` with each ``workflow``/``loop`` step whose ``workflow`` is a file path
    given the child's definition (``definition``), read relative to ``source`` (the
    parent's file) and validated; the child's problems are reported at
    ``steps[i].workflow``.  A map's inline step (``steps[i].step``) is treated the same
    way: its child is read once, and each item runs it.  A file that includes itself
    (directly or not) is a problem.  ``data`` is not changed: changed steps are
    copies."""
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        return data, []
    base = Path(source).parent if source and os.path.isfile(source) else None
    here = str(Path(source).resolve()) if base is not None and source else None
    outer = _LOADING.get()
    parent = _Parent(base, outer + ((here,) if here is not None and here not in outer
                                    else ()), check)
    problems: list[Problem] = []
    steps: list[object] = []
    for i, step in enumerate(cast(list[object], data["steps"])):
        new, found = _include(step, f"steps[{i}]", parent)
        inline = new.get("step") if isinstance(new, dict) and new.get("type") == "map" \
            else None
        if isinstance(inline, dict):
            new_inline, more = _include(inline, f"steps[{i}].step", parent)
            found += more
            new = new if new_inline is inline else {**cast(JSONDict, new), "step": new_inline}
        steps.append(new)
        problems += found
    changed = any(a is not b for a, b in zip(steps, data["steps"], strict=True))
    return ({**data, "steps": steps} if changed else data), problems


def _include(step: object, where: str, parent: _Parent) -> tuple[object, list[Problem]]:
    """One step (or a map's inline step) at ``where``, its child file included."""
    if not isinstance(step, dict) or step.get("type") not in ("workflow", "loop"):
        return step, []
    if isinstance(step.get("definition"), dict):
        return step, _inline_problems(step["definition"], f"{where}.definition",
                                      parent.check)
    ref = step.get("workflow")
    if not isinstance(ref, str) or not is_path(ref) or "definition" in step \
            or parent.base is None:  # (a path with no parent file: the type's check says)
        return step, []
    path = (parent.base / ref).resolve()
    if str(path) in parent.stack:
        chain = " -> ".join(Path(p).name for p in (*parent.stack, str(path)))
        return {**step, "definition": {}}, [Problem(
            location=f"{where}.workflow", message=f"{ref!r} includes itself: {chain}",
            hint="a workflow cannot run itself as a child; repeat work with a `loop` "
                 "step")]
    child, child_problems = _load_child(path, parent.stack, parent.check)
    # (a child that failed is reported here, not again by the type's check)
    return {**step, "definition": child if child is not None else {}}, [
        Problem(location=f"{where}.workflow", message=f"{ref}: {p}")
        for p in child_problems]


def _inline_problems(definition: object, where: str, check: Check) -> list[Problem]:
    try:
        check(definition, None)
    except DefinitionError as exc:
        return [Problem(location=where, message=str(p)) for p in exc.problems]
    return []


def _load_child(path: Path, stack: tuple[str, ...],
                check: Check) -> tuple[JSONDict | None, list[Problem]]:
    """The child file's definition (canonical, its own children included) or its
    problems."""
    from ..core.source import parse_text

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        return None, [Problem(location="",
                              message=f"cannot read {path}: {exc.strerror or exc}")]
    token = _LOADING.set(stack)
    try:
        checked = check(parse_text(text, source=str(path)), str(path))
    except DefinitionError as exc:
        return None, list(exc.problems)
    finally:
        _LOADING.reset(token)
    return cast(JSONDict, json.loads(checked.definition_json)), []
