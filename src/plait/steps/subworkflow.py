"""The ``workflow`` and ``loop`` step types: child runs (docs/subworkflows.md).

``workflow: NAME | NAME@VERSION | ./path.yaml`` names the child.  A stored workflow is
read from the run's store when the step runs; a path is resolved against the parent's
definition file when the parent is loaded (``include_child_files``): the child is
validated with the parent and its definition kept in the step's ``definition`` field,
so the parent's stored definition (and fingerprint) holds it and a resumed parent
needs no file.  ``definition`` may also be given inline, or be written at run time: a
template string, or a ``call`` returning it (``steps.planned``).

The child run gets only ``input`` (rendered with the parent's templates), is recorded
with ``parent_run_id`` and its id is derived from the parent, the step and the
iteration (``runtime.children``): a resumed parent re-attaches to it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, cast

from ..core import expressions
from ..core.mapping import split_item_id
from ..core.model import JSON, JSONDict
from ..errors import FatalError, TemplateError
from .child_files import is_path
from .planned import is_planned, planned_child
from .registry import StepCall, StepType, register_step_type

if TYPE_CHECKING:
    from ..core.validate import CheckedWorkflow


class ChildRuns(Protocol):
    """What these steps use of the engine (``runtime.children.ChildRuns``, lent as
    ``Services.children``)."""

    def checked(self, call: StepCall, definition: JSONDict,
                source: str) -> CheckedWorkflow: ...

    async def stored(self, call: StepCall, name: str,
                     version: int | None) -> tuple[CheckedWorkflow, int]: ...

    async def run(self, call: StepCall, child: CheckedWorkflow, input: JSON,
                  key: str, version: int | None = None) -> JSON: ...

    async def depth(self, run_id: str) -> int: ...

    def check(self, data: JSONDict) -> CheckedWorkflow: ...

ON_MAX_ITERATIONS = ("fail", "complete")
_NAME_VERSION = re.compile(r"^(?P<name>[^@]+)@(?P<version>\d+)$")
MAX_ITERATIONS_CAP = 10_000


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
    definition = config.get("definition")
    if not any(key in config for key in ("workflow", "definition", "call")):
        out.append((".workflow", "missing field 'workflow' (a stored workflow's name or a "
                                 "file path), or give the child as `definition:`"))
    elif "workflow" in config and not is_planned(config):
        if not isinstance(ref, str) or not ref.strip():
            out.append((".workflow", "expected a workflow name, name@version or a relative "
                                     "file path such as ./review.yaml"))
        elif "@" in ref and not is_path(ref) and _NAME_VERSION.match(ref) is None:
            out.append((".workflow", f"{ref!r}: expected name@VERSION with a whole number "
                                     f"version, such as review@3"))
        elif is_path(ref) and "definition" not in config:
            out.append((".workflow", f"{ref!r} is a file path, read relative to the "
                                     f"parent's file, and this definition was given as "
                                     f"data, without a file: load it from its file "
                                     f"(plait run FILE, Workflow.load(FILE)), or give the "
                                     f"child inline as `definition:`, or name a stored "
                                     f"workflow"))
    given = config.get("input")
    if given is not None and not isinstance(given, dict) and not (
            isinstance(given, str) and "{{" in given):
        out.append((".input", "expected a mapping (the child run's input)"))
    if definition is not None and not isinstance(definition, dict) and not (
            isinstance(definition, str) and "{{" in definition):
        out.append((".definition", "expected a workflow definition (a mapping), or a "
                                   "template yielding one at run time such as "
                                   "\"{{ steps.plan.output.json }}\""))
    return out + _check_planned(config)


def _check_planned(config: Mapping[str, JSON]) -> list[tuple[str, str]]:
    """The fields of a definition written at run time (``steps.planned``)."""
    out: list[tuple[str, str]] = []
    target = config.get("call")
    if "call" in config and "definition" in config:
        out.append((".call", "give either `call` (a function returning the definition) "
                             "or `definition`, not both"))
    elif target is not None and (not isinstance(target, str) or ":" not in target
                                 or target.startswith(":") or target.endswith(":")):
        out.append((".call", f"expected 'module:function', got {target!r}"))
    allowed = config.get("allowed_modules")
    if allowed is not None and (not isinstance(allowed, list) or not all(
            isinstance(m, str) and m.strip() for m in allowed)):
        out.append((".allowed_modules", "expected a list of module names (prefixes such "
                                        "as tools or tools.search)"))
    elif allowed and not is_planned(config):
        out.append((".allowed_modules", "applies only to a definition written at run "
                                        "time (a `definition:` template or a `call`)"))
    return out


def _check_loop(config: Mapping[str, JSON]) -> list[tuple[str, str]]:
    out = _check_ref(config)
    # a missing `until` or `max_iterations` is reported once, as a missing field
    until = config.get("until")
    if "until" in config and not isinstance(until, str | bool):
        out.append((".until", "expected a template such as \"{{ loop.output.approved }}\""))
    most = config.get("max_iterations")
    if "max_iterations" in config and (not isinstance(most, int) or isinstance(most, bool)
                                       or not 1 <= most <= MAX_ITERATIONS_CAP):
        out.append((".max_iterations", f"expected a whole number from 1 to "
                                       f"{MAX_ITERATIONS_CAP}, got {most!r}"))
    choice = config.get("on_max_iterations")
    if choice is not None and choice not in ON_MAX_ITERATIONS:
        out.append((".on_max_iterations", f"expected 'fail' or 'complete', got {choice!r}"))
    return out


# ---------------------------------------------------------------- running


def _children(call: StepCall) -> ChildRuns:
    children = call.services.children
    if children is None:
        raise FatalError(f"step {call.step.id!r}: child runs need an engine (this "
                         f"runtime has none)", step=call.step.id)
    return cast(ChildRuns, children)


async def _child(call: StepCall,
                 children: ChildRuns) -> tuple[CheckedWorkflow, int | None]:
    """The child's checked definition, and its stored version when named by name."""
    config = call.step.config
    definition = config.get("definition")
    if is_planned(config):
        return await planned_child(call, children)
    if isinstance(definition, dict):
        source = f"{config.get('workflow')}"
        item = split_item_id(call.step.id)  # a map's items share their map's child
        owner = call.step.id if item is None else item[0]
        return call.run.checked.derive(
            f"child:{owner}", lambda: children.checked(call, definition, source)), None
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
    common = frozenset({"workflow", "input", "definition", "call", "allowed_modules"})
    literal = frozenset({"workflow", "definition", "call", "allowed_modules"})
    strings = frozenset({"definition"})  # a template yielding the child at run time
    register_step_type(StepType(name="workflow", run=run_workflow, fields=common,
                                check=_check_ref, literal_fields=literal,
                                template_strings=strings, imports_call=True,
                                child_runs=lambda config: 1,
                                only_waits=True))
    register_step_type(StepType(
        name="loop", run=run_loop,
        fields=common | {"until", "max_iterations", "on_max_iterations"},
        required=frozenset({"until", "max_iterations"}), check=_check_loop,
        literal_fields=literal | {"max_iterations", "on_max_iterations"},
        template_strings=strings, imports_call=True,
        child_runs=loop_iterations, only_waits=True))


def loop_iterations(config: Mapping[str, JSON]) -> int:
    """At most how many child runs a loop starts: its ``max_iterations`` (1 when that is
    not a whole number above zero)."""
    most = config.get("max_iterations")
    return most if isinstance(most, int) and not isinstance(most, bool) and most > 0 else 1
