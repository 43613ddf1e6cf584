"""Calling user functions: importing ``module:function`` and binding parameters by name.

A parameter resolves, in order, to: ``input``, ``ctx``, a step id (its output), a
declared output key (the shared state), a key of the run input; else its default; else
the call fails naming the function and the parameter (SPEC 1.2).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..core.model import JSON
from ..errors import FatalError

Resolver = Callable[[str], tuple[bool, object]]
_MISSING = object()


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


def bind(fn: Callable[..., object], given: Mapping[str, JSON], resolve: Resolver,
         step_id: str) -> dict[str, object]:
    """Keyword arguments for ``fn``: ``given`` (rendered ``with``) first, then names."""
    sig = signature_of(fn)
    if not sig.params and not given:
        return {}
    kwargs: dict[str, object] = dict(given)
    for name, has_default in sig.params:
        if name in kwargs:
            continue
        name_for_lookup = "ctx" if name in sig.wants_ctx else name
        found, value = resolve(name_for_lookup)
        if found:
            kwargs[name] = value
        elif not has_default:
            raise FatalError(f"step {step_id!r}: parameter {name!r} of {_name(fn)} is not "
                             f"'input', 'ctx', a step id, a declared output key or a key "
                             f"of the run input", step=step_id)
    if not sig.var_keyword:
        known = {n for n, _ in sig.params}
        extra = [k for k in given if k not in known]
        if extra:
            raise FatalError(f"step {step_id!r}: {_name(fn)} takes no parameter "
                             f"{extra[0]!r} (given in `with`)", step=step_id)
    return kwargs


async def invoke(fn: Callable[..., object], kwargs: dict[str, object],
                 executor: object) -> object:
    """Await an async function; run a sync one in the executor's threads."""
    if signature_of(fn).is_async:
        return await fn(**kwargs)  # type: ignore[misc]
    loop = asyncio.get_running_loop()
    ctx = contextvars.copy_context()
    result = await loop.run_in_executor(executor,  # type: ignore[arg-type]
                                        functools.partial(ctx.run, fn, **kwargs))
    if inspect.isawaitable(result):
        return await result
    return result
