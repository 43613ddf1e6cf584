"""The ``workflow`` and ``loop`` step types: child runs (SPEC 3, docs/subworkflows.md).

``workflow: NAME | NAME@VERSION | ./path.yaml`` names the child.  A stored workflow is
read from the run's store when the step runs; a path is resolved against the parent's
definition file when the parent is loaded (``include_child_files``): the child is
validated with the parent and its definition kept in the step's ``definition`` field,
so the parent's stored definition (and fingerprint) holds it and a resumed parent
needs no file.  ``definition`` may also be given inline.

The child run gets only ``input`` (rendered with the parent's templates), is recorded
with ``parent_run_id`` and its id is derived from the parent, the step and the
iteration (``runtime.children``): a resumed parent re-attaches to it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, cast

from ..core import expressions
from ..core.model import JSON, JSONDict
from ..errors import DefinitionError, FatalError, Problem, TemplateError
from .registry import StepCall, StepType, register_step_type

if TYPE_CHECKING:
    from ..core.validate import CheckedWorkflow
    from ..runtime.children import ChildRuns

ON_MAX_ITERATIONS = ("fail", "complete")
_NAME_VERSION = re.compile(r"^(?P<name>[^@]+)@(?P<version>\d+)$")
MAX_ITERATIONS_CAP = 10_000


def is_path(ref: str) -> bool:
    """Whether a ``workflow:`` reference is a file path (not a stored name)."""
    return ref.startswith(("./", "../", "/")) or ref.endswith((".yaml", ".yml", ".json"))


def split_ref(ref: str) -> tuple[str, int | None]:
    """``name`` or ``name@3`` -> (name, version)."""
    m = _NAME_VERSION.match(ref)
    if m is not None:
        return m["name"], int(m["version"])
    return ref, None


# ---------------------------------------------------------------- validation


def _check_ref(config: Mapping[str, JSON]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    ref = config.get("workflow")
    if not isinstance(ref, str) or not ref.strip():
        out.append((".workflow", "expected a workflow name, name@version or a relative "
                                 "file path such as ./review.yaml"))
    elif "@" in ref and not is_path(ref) and _NAME_VERSION.match(ref) is None:
        out.append((".workflow", f"{ref!r}: expected name@VERSION with a whole number "
                                 f"version, such as review@3"))
    elif is_path(ref) and "definition" not in config:
        out.append((".workflow", f"{ref!r} is a file path: it is resolved against the "
                                 f"parent's definition file, so load the parent with "
                                 f"Workflow.load or plait (not from a dict)"))
    given = config.get("input")
    if given is not None and not isinstance(given, dict) and not (
            isinstance(given, str) and "{{" in given):
        out.append((".input", "expected a mapping (the child run's input)"))
    definition = config.get("definition")
    if definition is not None and not isinstance(definition, dict):
        out.append((".definition", "expected a workflow definition (a mapping)"))
    return out


def _check_loop(config: Mapping[str, JSON]) -> list[tuple[str, str]]:
    out = _check_ref(config)
    until = config.get("until")
    if not isinstance(until, str | bool):
        out.append((".until", "expected a template such as \"{{ loop.output.approved }}\""))
    most = config.get("max_iterations")
    if not isinstance(most, int) or isinstance(most, bool) or not \
            1 <= most <= MAX_ITERATIONS_CAP:
        out.append((".max_iterations", f"expected a whole number from 1 to "
                                       f"{MAX_ITERATIONS_CAP}, got {most!r}"))
    choice = config.get("on_max_iterations")
    if choice is not None and choice not in ON_MAX_ITERATIONS:
        out.append((".on_max_iterations", f"expected 'fail' or 'complete', got {choice!r}"))
    return out


def include_child_files(data: object, source: str | None,
                        _stack: tuple[str, ...] = ()) -> tuple[object, list[Problem]]:
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
    stack = _stack + ((here,) if here is not None and here not in _stack else ())
    for i, step in enumerate(cast(list[object], data["steps"])):
        ref = step.get("workflow") if isinstance(step, dict) else None
        if isinstance(step, dict) and step.get("type") in ("workflow", "loop") \
                and isinstance(step.get("definition"), dict):
            problems += _inline_problems(step["definition"], f"steps[{i}].definition")
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
            steps.append(step)
            continue
        child, child_problems = _load_child(path, stack)
        problems += [Problem(location=where, message=f"{ref}: {p}")
                     for p in child_problems]
        if child is not None and not child_problems:
            step = {**step, "definition": child}
            changed = True
        steps.append(step)
    return ({**data, "steps": steps} if changed else data), problems


def _inline_problems(definition: object, where: str) -> list[Problem]:
    from ..definitions import check_definition

    try:
        check_definition(definition)
    except DefinitionError as exc:
        return [Problem(location=where, message=str(p)) for p in exc.problems]
    return []


def _load_child(path: Path, stack: tuple[str, ...]) -> tuple[JSONDict | None, list[Problem]]:
    from ..core.source import parse_text
    from ..definitions import check_definition

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        return None, [Problem(location="",
                              message=f"cannot read {path}: {exc.strerror or exc}")]
    try:
        data = parse_text(text, source=str(path))
        data, problems = include_child_files(data, str(path), stack)
        if problems:
            return None, problems
        check_definition(data, source=str(path))
    except DefinitionError as exc:
        return None, list(exc.problems)
    return cast(JSONDict, data), []


# ---------------------------------------------------------------- running


def _children(call: StepCall) -> ChildRuns:
    children = call.services.children
    if children is None:
        raise FatalError(f"step {call.step.id!r}: child runs need an engine (this "
                         f"runtime has none)", step=call.step.id)
    return cast("ChildRuns", children)


async def _child(call: StepCall,
                 children: ChildRuns) -> tuple[CheckedWorkflow, int | None]:
    """The child's checked definition, and its stored version when named by name."""
    config = call.step.config
    definition = config.get("definition")
    if isinstance(definition, dict):
        from ..definitions import check_definition

        try:
            return call.run.checked.derive(
                f"child:{call.step.id}",
                lambda: check_definition(definition, source=f"{config.get('workflow')}")), \
                None
        except DefinitionError as exc:  # (validated with the parent: a changed plugin)
            raise FatalError(f"step {call.step.id!r}: child workflow: {exc}",
                             step=call.step.id) from exc
    name, version = split_ref(cast(str, config["workflow"]))
    return await children.stored(call, name, version)


def _render(call: StepCall, value: JSON, field_name: str,
            loop: Mapping[str, JSON] | None) -> JSON:
    names = call.template_context()
    if loop is not None:
        names = {**names, "loop": loop}
    try:
        return expressions.render_value(value, names)
    except expressions.RenderError as exc:
        raise TemplateError(str(exc), step=call.step.id, field=field_name,
                            template=value if isinstance(value, str) else None) from exc


async def run_workflow(call: StepCall) -> JSON:
    children = _children(call)
    child, version = await _child(call, children)
    given = call.step.config.get("input") or {}
    return await children.run(call, child, _render(call, given, "input", None), "0",
                              version)


async def run_loop(call: StepCall) -> JSON:
    children = _children(call)
    child, version = await _child(call, children)
    config = call.step.config
    given = config.get("input") or {}
    until = config.get("until")
    most = cast(int, config["max_iterations"])
    previous: JSON = None
    for iteration in range(most):
        loop: JSONDict = {"iteration": iteration, "previous": previous}
        input = _render(call, given, "input", loop)
        output = await children.run(call, child, input, str(iteration), version)
        done = _render(call, until, "until", {**loop, "output": output})
        previous = output
        if done:
            return {"iterations": iteration + 1, "output": output}
    if config.get("on_max_iterations") == "complete":
        return {"iterations": most, "output": previous}
    raise FatalError(f"step {call.step.id!r}: `until` was still false after "
                     f"max_iterations ({most}) iterations", step=call.step.id)


def register_subworkflows() -> None:
    common = frozenset({"workflow", "input", "definition"})
    register_step_type(StepType(name="workflow", run=run_workflow, fields=common,
                                required=frozenset({"workflow"}), check=_check_ref,
                                literal_fields=frozenset({"workflow", "definition"})))
    register_step_type(StepType(
        name="loop", run=run_loop,
        fields=common | {"until", "max_iterations", "on_max_iterations"},
        required=frozenset({"workflow", "until", "max_iterations"}), check=_check_loop,
        literal_fields=frozenset({"workflow", "definition", "max_iterations",
                                  "on_max_iterations"})))
