"""Child workflow files of ``workflow`` and ``loop`` steps, read and validated with the
parent (docs/subworkflows.md).  Apart from ``steps.subworkflow`` so that loading a
definition (``plait.definitions``) needs nothing of the runtime."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from contextvars import ContextVar
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



def include_child_files(data: object, source: str | None,
                        check: Check) -> tuple[object, list[Problem]]:
    """``data`` with each ``workflow``/``loop`` step whose ``workflow`` is a file path
    given the child's definition (``definition``), read relative to ``source`` (the
    parent's file) and validated; the child's problems are reported at
    ``steps[i].workflow``.  A file that includes itself (directly or not) is a
    problem.  ``data`` is not changed: changed steps are copies."""
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        return data, []
    problems: list[Problem] = []
    steps: list[object] = []
    changed = False
    base = Path(source).parent if source and os.path.isfile(source) else None
    here = str(Path(source).resolve()) if base is not None and source else None
    outer = _LOADING.get()
    stack = outer + ((here,) if here is not None and here not in outer else ())
    for i, step in enumerate(cast(list[object], data["steps"])):
        ref = step.get("workflow") if isinstance(step, dict) else None
        if isinstance(step, dict) and step.get("type") in ("workflow", "loop") \
                and isinstance(step.get("definition"), dict):
            problems += _inline_problems(step["definition"], f"steps[{i}].definition",
                                         check)
        if not (isinstance(step, dict) and step.get("type") in ("workflow", "loop")
                and isinstance(ref, str) and is_path(ref) and "definition" not in step):
            steps.append(step)
            continue
        where = f"steps[{i}].workflow"
        if base is None:
            steps.append(step)  # reported by the type's check
            continue
        path = (base / ref).resolve()
        if str(path) in stack:
            chain = " -> ".join(Path(p).name for p in (*stack, str(path)))
            problems.append(Problem(location=where,
                                    message=f"{ref!r} includes itself: {chain}",
                                    hint="a workflow cannot run itself as a child; "
                                         "repeat work with a `loop` step"))
            steps.append({**step, "definition": {}})
            changed = True
            continue
        child, child_problems = _load_child(path, stack, check)
        problems += [Problem(location=where, message=f"{ref}: {p}")
                     for p in child_problems]
        # (a child that failed is reported here, not again by the type's check)
        steps.append({**step, "definition": child if child is not None else {}})
        changed = True
    return ({**data, "steps": steps} if changed else data), problems


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
