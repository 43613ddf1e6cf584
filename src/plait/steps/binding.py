"""Calling user functions: importing ``module:function`` and binding parameters by name.

A parameter resolves, in order, to: a ``with`` argument, ``input``, ``ctx`` (or any
parameter annotated ``StepContext``), a step id (its output), a declared output key (the
shared state), a key of the run input; else its default; else the call fails naming the
function and the parameter (docs/binding.md).

Everything but the run input is known from the definition, so it is worked out once per
checked workflow: a ``ParamPlan`` lists, per parameter, where its value comes from, and
an attempt only moves the values (``ParamPlan.arguments``).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import importlib
import inspect
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ..core.model import JSON, StepSpec
from ..core.trust import name_problem
from ..errors import FatalError

if TYPE_CHECKING:
    from ..core.validate import CheckedWorkflow

_MISSING = object()

# Where a parameter's value comes from (ParamPlan.params); the argument of each kind:
FROM_INPUT = 0  # the run's input (no argument)
FROM_CTX = 1  # the attempt's StepContext (no argument)
FROM_STEP = 2  # a step's output (its index)
FROM_STATE = 3  # a declared output key (the key)
FROM_INPUT_KEY = 4  # a key of the run input, else the default (whether there is one)
FROM_ERROR = 5  # a fallback's ``error`` (no argument)


@dataclass(frozen=True, slots=True)
class Signature:
    params: tuple[tuple[str, bool], ...]  # (name, has default)
    var_keyword: bool
    is_async: bool
    wants_ctx: tuple[str, ...]  # parameters annotated StepContext under another name


@functools.lru_cache(maxsize=4096)
def import_call(call: str) -> Callable[..., object]:
    """The function named ``module:qualname``; ImportError says which part is missing."""
    module_name, _, qualname = call.partition(":")
    if not module_name or not qualname:
        raise ImportError(f"{call!r} is not 'module:function'")
    try:
        obj: object = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportError(f"cannot import module {module_name!r} for {call!r}: {exc}") from exc
    for part in qualname.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ImportError(f"module {module_name!r} has no {qualname!r} "
                              f"(looking up {part!r})") from None
    if not callable(obj):
        raise ImportError(f"{call!r} is not callable")
    return obj


def import_untrusted_call(call: str) -> Callable[..., object]:
    """The function an untrusted definition names (``plait.core.trust``): one public
    name after the colon, defined in that very module (a function it re-exports from
    elsewhere, or an object reached through an attribute path, is refused).
    ImportError naming the rule."""
    module_name, _, name = call.partition(":")
    shape = name_problem(name)
    if shape is not None:
        raise ImportError(f"{call!r}: {shape}")
    fn = import_call(call)
    owner = getattr(fn, "__module__", None)
    if owner != module_name:
        raise ImportError(f"{call!r} is defined in module {owner!r}, not in "
                          f"{module_name!r}: a definition registered over the API may "
                          f"call only functions defined in an allowed module, not ones "
                          f"it imports from elsewhere")
    return fn


def import_step_call(step: StepSpec) -> None:
    """Import the function a python step names with ``call: module:function`` (none
    to import for other steps, or one given as a function): ImportError naming the
    module or the name when this process cannot load it."""
    call = step.config.get("call") if step.type == "python" else None
    if isinstance(call, str) and step.func is None:
        import_call(call)


def step_function(step: StepSpec) -> Callable[..., object] | None:
    """The function a python step calls (given, or imported from ``call``: ImportError
    as ``import_call``); None for a step of another type."""
    if step.type != "python":
        return None
    if step.func is not None:
        return step.func
    call = step.config.get("call")
    return import_call(call) if isinstance(call, str) else None


def signature_of(fn: Callable[..., object]) -> Signature:
    cached = getattr(fn, "__plait_signature__", None)
    if isinstance(cached, Signature):
        return cached
    sig = inspect.signature(fn)
    params: list[tuple[str, bool]] = []
    var_kw = False
    ctx_names: list[str] = []
    for p in sig.parameters.values():
        if p.kind is p.VAR_KEYWORD:
            var_kw = True
        elif p.kind is p.VAR_POSITIONAL:
            continue
        elif p.kind is p.POSITIONAL_ONLY:
            raise TypeError(f"{_name(fn)}: positional-only parameter {p.name!r} cannot be "
                            f"bound by name")
        else:
            params.append((p.name, p.default is not p.empty))
            ann = p.annotation
            if p.name != "ctx" and (ann == "StepContext" or getattr(ann, "__name__", "")
                                    == "StepContext"):
                ctx_names.append(p.name)
    # an object whose __call__ is async counts as an async function
    is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        type(fn).__call__)
    result = Signature(tuple(params), var_kw, is_async, tuple(ctx_names))
    try:
        fn.__plait_signature__ = result  # type: ignore[attr-defined]
    except (AttributeError, TypeError):
        pass
    return result


def _name(fn: Callable[..., object]) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


class RunValues(Protocol):
    """What a plan reads of the run an attempt belongs to (the run loop)."""

    input: JSON
    shared_state: Mapping[str, JSON]

    def step_output(self, index: int) -> JSON: ...


@dataclass(frozen=True, slots=True)
class ParamPlan:
    """How one function's parameters are filled for one step (compiled once per checked
    workflow by ``compile_plan``): per parameter not given in ``with``, its name, where
    its value comes from and that source's argument, in signature order."""

    fn: Callable[..., object]
    step_id: str
    is_async: bool
    params: tuple[tuple[str, int, object], ...]
    # the first ``with`` key the function does not take (it has no **kwargs)
    not_taken: str | None = None

    def arguments(self, run: RunValues, context: Callable[[], object],
                  given: Mapping[str, JSON] | None = None,
                  error: object = None) -> dict[str, object]:
        """The keyword arguments of one attempt: ``given`` (the rendered ``with``), then
        each parameter's value; ``context()`` builds the StepContext when one is asked
        for.  FatalError names a parameter nothing supplies."""
        kwargs: dict[str, object] = dict(given) if given else {}
        for name, source, arg in self.params:
            if source == FROM_STEP:
                kwargs[name] = run.step_output(arg)  # type: ignore[arg-type]
            elif source == FROM_CTX:
                kwargs[name] = context()
            elif source == FROM_INPUT:
                kwargs[name] = run.input
            elif source == FROM_STATE:
                kwargs[name] = run.shared_state.get(arg)  # type: ignore[call-overload]
            elif source == FROM_ERROR:
                kwargs[name] = error
            else:  # FROM_INPUT_KEY: the only source that depends on the run
                run_input = run.input
                if isinstance(run_input, dict) and name in run_input:
                    kwargs[name] = run_input[name]
                elif not arg:
                    raise FatalError(
                        f"step {self.step_id!r}: parameter {name!r} of {_name(self.fn)} is "
                        f"not 'input', 'ctx', a step id, a declared output key or a key of "
                        f"the run input", step=self.step_id)
        if self.not_taken is not None:
            raise FatalError(f"step {self.step_id!r}: {_name(self.fn)} takes no parameter "
                             f"{self.not_taken!r} (given in `with`)", step=self.step_id)
        return kwargs


def compile_plan(fn: Callable[..., object], *, step_id: str, steps: Mapping[str, int],
                 declared: Collection[str], given: Collection[str] = (),
                 error: bool = False) -> ParamPlan:
    """The plan of ``fn`` as step ``step_id``'s function: ``steps`` maps every step id
    of the workflow to its index, ``declared`` holds the declared output keys, ``given``
    the keys of the step's ``with``; ``error``: a fallback, whose ``error`` parameter
    is the step's error.  TypeError when ``fn`` cannot be bound by name."""
    sig = signature_of(fn)
    params: list[tuple[str, int, object]] = []
    for name, has_default in sig.params:
        if name in given:
            continue
        if error and name == "error":
            params.append((name, FROM_ERROR, None))
        elif name == "input":
            params.append((name, FROM_INPUT, None))
        elif name == "ctx" or name in sig.wants_ctx:
            params.append((name, FROM_CTX, None))
        elif name in steps and name != step_id:
            params.append((name, FROM_STEP, steps[name]))
        elif name in declared:
            params.append((name, FROM_STATE, name))
        else:
            params.append((name, FROM_INPUT_KEY, has_default))
    taken = {name for name, _ in sig.params}
    not_taken = None if sig.var_keyword else next(
        (key for key in given if key not in taken), None)
    return ParamPlan(fn=fn, step_id=step_id, is_async=sig.is_async, params=tuple(params),
                     not_taken=not_taken)


def declared_keys(checked: CheckedWorkflow) -> frozenset[str]:
    """Every declared output key of the workflow (computed once per checked workflow)."""
    return checked.derive("declared_keys", lambda: frozenset(
        key for step in checked.spec.steps for key in step.outputs))


def run_in_thread(fn: Callable[..., object], kwargs: dict[str, object],
                  executor: object) -> asyncio.Future[object]:
    """A sync function's call in the executor's threads, with the caller's context
    variables (an awaitable result is awaited by ``invoke``)."""
    loop = asyncio.get_running_loop()
    ctx = contextvars.copy_context()
    return loop.run_in_executor(executor,  # type: ignore[arg-type]
                                functools.partial(ctx.run, fn, **kwargs))


async def invoke(fn: Callable[..., object], kwargs: dict[str, object],
                 executor: object, is_async: bool | None = None) -> object:
    """Await an async function; run a sync one in the executor's threads."""
    if is_async if is_async is not None else signature_of(fn).is_async:
        return await fn(**kwargs)  # type: ignore[misc]
    result = await run_in_thread(fn, kwargs, executor)
    if inspect.isawaitable(result):
        return await result
    return result
