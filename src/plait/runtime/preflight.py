"""What is checked before a run is stored (docs/binding.md, docs/definitions.md):
every python step's function imports, its retry exception names exist, and parameters
that only the run input can supply are in it.  Kept apart from the engine so
``plait validate`` checks imports without loading the run loop and the stores."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from ..core.model import JSON, StepSpec, WorkflowSpec
from ..core.steptypes import traits_of
from ..core.validate import CheckedWorkflow
from ..errors import DefinitionError, InputError, Problem
from ..steps.binding import import_call, signature_of
from ..steps.procexec import process_problem
from ..steps.registry import get_step_type
from .retry_names import retry_name_problems


def check_input_params(checked: CheckedWorkflow, value: JSON) -> None:
    """Before anything runs: Python-built steps whose parameters can only come from the
    input must find them there (docs/binding.md), naming the function and the parameter."""
    for step, name in _input_params(checked):
        if not (isinstance(value, dict) and name in value):
            assert step.func is not None
            raise InputError(f"step {step.id!r}: parameter {name!r} of "
                             f"{getattr(step.func, '__qualname__', step.func)} is not "
                             f"'input', 'ctx', a step id, a declared output key or a "
                             f"key of the run input")


def _input_params(checked: CheckedWorkflow) -> list[tuple[StepSpec, str]]:
    """The (step, parameter) pairs only the run input can supply (computed once)."""
    return checked.derive("input_params", lambda: _find_input_params(checked))


def _find_input_params(checked: CheckedWorkflow) -> list[tuple[StepSpec, str]]:
    declared = {k for s in checked.spec.steps for k in s.outputs}
    ids = checked.graph.index
    found: list[tuple[StepSpec, str]] = []
    for step in checked.spec.steps:
        if step.func is None or step.config.get("with"):
            continue
        sig = signature_of(step.func)
        for name, has_default in sig.params:
            if has_default or name in ("input", "ctx") or name in sig.wants_ctx \
                    or (name in ids and name != step.id) or name in declared:
                continue
            found.append((step, name))
    return found


def preflight(checked: CheckedWorkflow) -> None:
    """Before anything is stored: every python step's function must import (checked
    once per checked workflow: a failure is not remembered, imports are cached)."""
    checked.derive("preflight", lambda: _check_imports(checked))


def _check_imports(checked: CheckedWorkflow) -> bool:
    problems = import_problems(checked.spec) + retry_name_problems(checked.spec)
    for step in checked.spec.steps:
        get_step_type(step.type)
    if problems:
        raise DefinitionError(problems)
    return True


def import_problems(spec: WorkflowSpec) -> list[Problem]:
    """A problem for each python step's (or fallback's) ``module:function`` that does not
    import from here (the definition need not be valid otherwise: validation lists every
    problem at once)."""
    problems = []
    for i, step in enumerate(spec.steps):
        targets = []
        if traits_of(step.type).imports_call and step.func is None:
            targets.append(("call", step.config.get("call")))
        if step.fallback is not None and step.fallback.call and step.fallback.func is None:
            targets.append(("fallback.call", step.fallback.call))
        inline = step.item  # a map's inline step: the same, at `step.`
        if inline is not None and traits_of(inline.type).imports_call and inline.func is None:
            targets.append(("step.call", inline.config.get("call")))
        if inline is not None and inline.fallback is not None and inline.fallback.call \
                and inline.fallback.func is None:
            targets.append(("step.fallback.call", inline.fallback.call))
        for field, target in targets:
            if not isinstance(target, str) or ":" not in target.strip(":"):
                continue  # not 'module:function': validation says so
            try:
                fn = import_call(target)
            except ImportError as exc:
                problems.append(Problem(location=f"steps[{i}].{field}",
                                        message=f"step {step.id!r}: {exc}"))
                continue
            owner = {"call": step, "step.call": inline}.get(field)  # (not a fallback)
            problems += _executor_problems(owner, f"steps[{i}].{field[:-4]}executor", fn)
        problems += _built_executor_problems(step, f"steps[{i}].executor")
    return problems


def _executor_problems(step: StepSpec | None, where: str, fn: Callable[..., object],
                       ) -> list[Problem]:
    """A python step with ``executor: process`` whose function cannot run in a
    process (async, takes ``ctx``, not importable by its reference)."""
    if step is None or step.config.get("executor") != "process":
        return []
    problem = process_problem(fn, cast(str, step.config.get("call")))
    return [] if problem is None else [Problem(location=where,
                                               message=f"step {step.id!r}: {problem}")]


def _built_executor_problems(step: StepSpec, where: str) -> list[Problem]:
    """The same for a step built in Python (its function given, not imported)."""
    if step.func is None or not traits_of(step.type).imports_call:
        return []
    return _executor_problems(step, where, step.func)
