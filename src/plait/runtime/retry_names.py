"""Which exception names a step's ``retry_on`` / ``no_retry_on`` may give (docs/semantics.md).

A name is matched against the class names along the raised exception's MRO, so a name
no exception can have never matches and silently changes nothing.  Here the names are
checked where the step modules are imported (the Python API, ``plait validate``,
``plait run``); the pure core checks only that each entry is a name.

A name is accepted when it is:
- a built-in exception (``ValueError``, ``ConnectionError``, ``Exception``...);
- one of plait's errors (``FatalError``, ``StepTimeout``, ``HTTPStatusError``...);
- an exception class defined in, or imported into, a module of the workflow's python
  steps or fallbacks (the module of ``call: module:function``, or of the function given
  in Python);
- a dotted path ``package.module.ClassName`` that imports and is an exception class
  (matched by its class name).
"""

from __future__ import annotations

import builtins
import importlib
import sys
from collections.abc import Iterable, Iterator
from types import ModuleType

from .. import errors
from ..core.model import StepSpec, WorkflowSpec
from ..core.retry import is_exception_name, policies_naming_exceptions
from ..core.steptypes import traits_of
from ..core.suggest import did_you_mean
from ..errors import Problem


def retry_name_problems(spec: WorkflowSpec) -> list[Problem]:
    """A problem for each exception name of a retry policy that names no exception
    (imports the modules of the python steps that are not imported yet)."""
    named = policies_naming_exceptions(spec.steps)
    if not named:  # the common case: one look at each step
        return []
    known = _exception_names(_step_modules(spec.steps))
    problems: list[Problem] = []
    for i, step in enumerate(spec.steps):
        if id(step.retry) not in named:
            continue
        for field in ("retry_on", "no_retry_on"):
            for j, name in enumerate(getattr(step.retry, field)):
                # (what is not a name at all is reported by the core's validation)
                if is_exception_name(name) and not _names_exception(name, known):
                    problems.append(Problem(
                        location=f"steps[{i}].retry.{field}[{j}]",
                        message=f"{name!r} is not an exception plait or the step modules "
                        f"know (step {step.id!r}); it would never match",
                        hint=did_you_mean(name, known) or "for an exception of your own, "
                        "give its dotted path (package.module.ClassName)"))
    return problems


def _names_exception(name: str, known: set[str]) -> bool:
    if "." not in name:
        return name in known
    module_name, _, attribute = name.rpartition(".")
    try:
        found = getattr(importlib.import_module(module_name), attribute, None)
    except ImportError:
        return False
    return isinstance(found, type) and issubclass(found, BaseException)


def _step_modules(steps: Iterable[StepSpec]) -> Iterator[ModuleType]:
    """The modules of the python steps' and fallbacks' functions (those that import)."""
    seen: set[str] = set()
    for step in steps:
        targets = [step.func, step.fallback.func if step.fallback else None]
        calls = [step.config.get("call") if traits_of(step.type).imports_call else None,
                 step.fallback.call if step.fallback else None]
        names = [getattr(f, "__module__", None) for f in targets if f is not None]
        names += [c.partition(":")[0] for c in calls if isinstance(c, str)]
        for name in names:
            if not isinstance(name, str) or name in seen:
                continue
            seen.add(name)
            module = sys.modules.get(name) or _imported(name)
            if module is not None:
                yield module


def _imported(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:  # reported where the step's call is checked
        return None


def _exception_names(modules: Iterable[ModuleType]) -> set[str]:
    names = {n for n, v in vars(builtins).items() if _is_exception(v)}
    names.update(n for n, v in vars(errors).items() if _is_exception(v))
    todo = [errors.StepError]  # and subclasses defined elsewhere (by plugins)
    while todo:
        for sub in todo.pop().__subclasses__():
            names.add(sub.__name__)
            todo.append(sub)
    for module in modules:
        names.update(v.__name__ for v in vars(module).values() if _is_exception(v))
    return names


def _is_exception(value: object) -> bool:
    return isinstance(value, type) and issubclass(value, BaseException)
