"""Definitions written at run time: a ``workflow`` (or ``loop``) step whose
``definition`` is a template string, or whose ``call`` names a function returning the
definition (docs/subworkflows.md, "Definitions written at run time").

When the step runs, the definition is produced (rendered, or the function called with
its parameters bound as a python step's are), then checked with everything loading
checks plus the rules of the step (``planned_problems``): the parent's ``limits``, the
modules its ``allowed_modules`` lists, and on an engine with rules for untrusted
definitions those rules too.  Every problem is listed in one ``DefinitionRejected``, a
failed attempt like any other (retries and fallbacks apply).

Whatever name the definition gives, it is stored as ``PARENT.STEP`` (a map's items as
their map's step), a new version whenever its fingerprint changes.  A step whose child
run exists already (a resumed parent, an attempt after a wait) takes the child's
stored definition instead of producing one again, so it re-attaches to that child
even when the producer would now give another graph.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol, cast

from ..core.child_ids import child_run_id
from ..core.mapping import split_item_id
from ..core.model import JSON, JSONDict, Limits
from ..core.sizes import parse_size
from ..core.trust import (
    DEFINITION,
    MODULES_SETTING,
    TrustPolicy,
    module_allowed,
    sites,
    untrusted_problems,
)
from ..errors import DefinitionError, DefinitionRejected, FatalError, Problem, RunNotFound
from .binding import compile_plan, declared_keys, import_call, import_untrusted_call, invoke

if TYPE_CHECKING:
    from ..core.validate import CheckedWorkflow
    from .registry import StepCall

# a definition checked as loading checks it (``plait.definitions.check_definition``,
# lent by the engine: steps do not import what loads definitions): DefinitionError
Check = Callable[[JSONDict], "CheckedWorkflow"]


class Children(Protocol):
    """What these steps use of the engine's child runs (``runtime.children``)."""

    def check(self, data: JSONDict) -> CheckedWorkflow: ...

    async def stored(self, call: StepCall, name: str,
                     version: int | None) -> tuple[CheckedWorkflow, int]: ...

    async def depth(self, run_id: str) -> int: ...

MAX_DEFINITION_BYTES = 1 << 20  # a definition written at run time: at most 1 MiB of JSON
# a definition with more steps is checked in a worker thread (about 10 ms per 500
# steps): the run loop goes on committing and heartbeating meanwhile
OFF_LOOP_STEPS = 500
_LIMIT_KEYS = ("max_steps", "max_depth", "max_map_items", "max_subworkflow_depth",
               "max_output_bytes")


def is_planned(config: Mapping[str, JSON]) -> bool:
    """Whether a ``workflow``/``loop`` step's child is written at run time."""
    return isinstance(config.get("definition"), str) or (
        "call" in config and "definition" not in config)


def planned_name(call: StepCall) -> str:
    """``PARENT.STEP``: the name the step's definition is stored under."""
    item = split_item_id(call.step.id)
    owner = call.step.id if item is None else item[0]
    return f"{call.run.checked.spec.name}.{owner}"


async def planned_child(call: StepCall,
                        children: Children) -> tuple[CheckedWorkflow, int | None]:
    """The child the step runs (and its stored version when known): the stored
    definition of the child run it started already, else the definition it writes
    now, checked."""
    store = call.services.store
    if store is not None:
        try:  # a loop's iterations all run its first child's definition
            run = await store.get_run(child_run_id(call.run_id, call.step.id, "0"))
        except RunNotFound:
            pass
        else:
            return await children.stored(call, run.workflow, run.version)
    value = await _produce(call)
    services = call.services
    check = functools.partial(
        written_definition, value, name=planned_name(call), step=call.step.id,
        limits=services.limits(call.run.checked.spec.limits),
        allowed_modules=_allowed_modules(call.step.config.get("allowed_modules")),
        trust=services.trust, depth=await children.depth(call.run_id),
        check=children.check)
    steps = value.get("steps") if isinstance(value, dict) else None
    if isinstance(steps, list) and len(steps) > OFF_LOOP_STEPS:
        return await asyncio.to_thread(check), None  # the run loop goes on meanwhile
    return check(), None


def written_definition(value: object, *, name: str, step: str, limits: Limits,
                       check: Check, allowed_modules: tuple[str, ...] = (),
                       trust: TrustPolicy | None = None,
                       depth: int = 0) -> CheckedWorkflow:
    """``value`` checked as the definition step ``step`` wrote, named ``name``: every
    check loading does (``check``) and the step's rules (``planned_problems``);
    DefinitionRejected listing every problem.  ``depth``: how many parents the step's
    run has."""
    problems = shape_problems(value)
    if problems:
        raise DefinitionRejected(problems, step=step)
    data = {key: item for key, item in cast(JSONDict, value).items() if key != "version"}
    data["name"] = name
    problems = planned_problems(data, limits=limits, allowed_modules=allowed_modules,
                                trust=trust, depth=depth)
    try:
        checked = check(data)
    except DefinitionError as exc:
        raise DefinitionRejected([*exc.problems, *problems], step=step) from exc
    if problems:
        raise DefinitionRejected(problems, step=step)
    return checked


async def _produce(call: StepCall) -> JSON:
    """The definition's value: the ``definition`` template rendered, or what the
    ``call`` function returns."""
    config = call.step.config
    template = config.get("definition")
    if isinstance(template, str):
        return await call.rendered(lambda c: c.render(template, "definition"),
                                   fields=template)
    fn = call.step.func
    if fn is None:
        name = cast(str, config["call"])
        try:
            fn = import_untrusted_call(name) if call.services.trust is not None \
                else import_call(name)
        except ImportError as exc:
            raise FatalError(f"step {call.step.id!r}: {exc}", step=call.step.id) from exc
    checked = call.run.checked
    plan = compile_plan(fn, step_id=call.step.id, steps=checked.graph.index,
                        declared=declared_keys(checked))
    kwargs = plan.arguments(call.run, call.context)
    return cast(JSON, await invoke(fn, kwargs, call.services.executor, plan.is_async))


def shape_problems(value: object) -> list[Problem]:
    """A value that cannot be a definition at all: not a mapping, or past 1 MiB."""
    if not isinstance(value, dict):
        hint = ("an llm step's parsed answer is steps.ID.output.json"
                if isinstance(value, str) else None)
        return [Problem(location="definition", hint=hint, message=(
            f"expected a workflow definition (a mapping), got "
            f"{'null' if value is None else type(value).__name__}"))]
    try:
        size = len(json.dumps(value, ensure_ascii=False).encode())
    except (TypeError, ValueError) as exc:
        return [Problem(location="definition", message=f"not JSON: {exc}")]
    if size > MAX_DEFINITION_BYTES:
        return [Problem(location="definition", message=(
            f"{size:,} bytes of JSON, over the 1 MiB a definition written at run time "
            f"may have"))]
    return []


# ---------------------------------------------------------------- the step's rules


def planned_problems(data: JSONDict, *, limits: Limits, allowed_modules: tuple[str, ...],
                     trust: TrustPolicy | None, depth: int) -> list[Problem]:
    """What the step's rules refuse in ``data`` (the raw definition): the parent's
    ``limits``, the modules it may call, schedules, and an untrusted engine's rules
    (``trust``)."""
    problems = _limit_problems(data, limits, depth)
    if data.get("schedules"):
        problems.append(Problem(location="schedules", message=(
            "a definition written at run time cannot have schedules")))
    problems += _module_problems(data, allowed_modules, trust is not None)
    if trust is not None:
        problems += untrusted_problems(data, trust)
    return problems


def _allowed_modules(value: JSON) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def _limit_problems(data: JSONDict, limits: Limits, depth: int) -> list[Problem]:
    problems: list[Problem] = []
    steps, deepest = 0, 0
    for site in sites(data):
        if site.kind != DEFINITION:
            continue
        found = site.body.get("steps")
        steps += len(found) if isinstance(found, list) else 0
        deepest = max(deepest, site.where.count("definition") + 1)
        problems += _raised(site.body.get("limits"), f"{site.where}.limits".lstrip("."),
                            limits)
    if steps > limits.max_steps:
        problems.append(Problem(location="steps", message=(
            f"{steps:,} steps, over the parent's limits.max_steps ({limits.max_steps:,})")))
    nested = depth + deepest
    if nested > limits.max_subworkflow_depth:
        problems.append(Problem(location="steps", message=(
            f"child workflows would be nested {nested} deep, past the parent's "
            f"limits.max_subworkflow_depth ({limits.max_subworkflow_depth})")))
    return problems


def _raised(value: JSON, where: str, limits: Limits) -> list[Problem]:
    """Each limit a definition asks for above the parent's."""
    if not isinstance(value, dict):
        return []
    problems = []
    for key in _LIMIT_KEYS:
        asked = value.get(key)
        try:
            number = parse_size(asked) if key == "max_output_bytes" and asked is not None \
                else asked
        except ValueError:
            continue  # validation names it
        if isinstance(number, int) and not isinstance(number, bool) \
                and number > getattr(limits, key):
            problems.append(Problem(location=f"{where}.{key}", message=(
                f"asks for {number}, over the parent's limits.{key} "
                f"({getattr(limits, key)}): a definition written at run time may not "
                f"raise it")))
    return problems


def _module_problems(data: JSONDict, allowed: tuple[str, ...],
                     untrusted: bool) -> list[Problem]:
    """Each ``call`` (at any depth) of a module ``allowed`` does not list, and each
    ``allowed_modules`` entry of a step inside that would widen the list."""
    listed = ", ".join(allowed) or "none"
    extra = f" (and {MODULES_SETTING} must allow it too)" if untrusted else ""
    problems = []
    for site in sites(data):
        where = site.where or "definition"
        call = site.body.get("call")
        if isinstance(call, str) and ":" in call:
            module = call.partition(":")[0].strip()
            if not module_allowed(module, allowed):
                problems.append(Problem(location=f"{where}.call", message=(
                    f"module {module!r} may not be called by a definition written at run "
                    f"time (the step's allowed_modules: {listed})"),
                    hint=f"list it in the step's `allowed_modules`{extra}"))
        inner = site.body.get("allowed_modules")
        for i, name in enumerate(inner if isinstance(inner, list) else []):
            if isinstance(name, str) and not module_allowed(name, allowed):
                problems.append(Problem(location=f"{where}.allowed_modules[{i}]", message=(
                    f"{name!r} is not within the step's allowed_modules ({listed}): a "
                    f"definition written at run time may only narrow them")))
    return problems
