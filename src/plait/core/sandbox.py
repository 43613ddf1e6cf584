"""The Jinja2 sandbox templates render in, and its bounds (docs/expressions.md).

Every render has a ``Budget``: a deadline (``MAX_SECONDS``) and a stop flag that the
runtime sets when the step is cancelled.  The sandbox checks it on every call, attribute
and item access, operator, filter and loop iteration, so a render running in a worker
thread ends soon after its deadline or its cancellation.

Checks run *before* the one C call that would build a big value: ``**`` and ``*`` on
numbers (result bits), ``*`` and ``+`` on sequences (result size), string methods and
filters that widen text (``center``, ``indent``, ``replace``, ``join``, ``format``, ``%``
with widths, ``batch``/``slice`` with padding), and anything that turns a value into text
(its size counted through shared references, so ``[x, x]`` built in a loop is caught).
A value past ``MAX_SIZE`` characters (or bytes of integer) is refused wherever it would
appear.  ``lipsum`` is not available; ``range`` is capped at ``MAX_RANGE`` items.
"""

from __future__ import annotations

import contextvars
import inspect
import math
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import update_wrapper
from typing import Any

from jinja2 import StrictUndefined, nodes
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import missing

from .bounds import MAX_SECONDS, MAX_SIZE, OUTPUT_OWNERS, Stop

MAX_RANGE = 100_000
MAX_INT_BITS = 8 * MAX_SIZE


class BoundExceeded(SecurityError):
    """A render passed its time or size bound; ``bound`` says which."""

    def __init__(self, message: str, *, bound: str) -> None:
        self.bound = bound
        super().__init__(message)


@dataclass(slots=True)
class Budget:
    deadline: float
    stop: Stop = field(default_factory=Stop)

    def check(self) -> None:
        if self.stop.requested:
            raise BoundExceeded("the step was cancelled while the template rendered",
                                bound="cancelled")
        if time.monotonic() > self.deadline:
            raise BoundExceeded(f"time bound: the template took longer than "
                                f"{MAX_SECONDS:g} s", bound="time")


_UNBOUNDED = Budget(math.inf)  # outside a render (never stopped)
_budget: contextvars.ContextVar[Budget] = contextvars.ContextVar("plait_render_budget")
# the names of the render in progress, for messages about what is missing
_names: contextvars.ContextVar[Mapping[str, object]] = contextvars.ContextVar(
    "plait_render_names")


def begin(names: Mapping[str, object], stop: Stop | None) -> tuple[object, object]:
    """Start a render's budget (deadline from now); pass the result to ``end``."""
    budget = Budget(time.monotonic() + MAX_SECONDS, stop or Stop())
    return _budget.set(budget), _names.set(names)


def end(tokens: tuple[object, object]) -> None:
    budget_token, names_token = tokens
    _budget.reset(budget_token)  # type: ignore[arg-type]
    _names.reset(names_token)  # type: ignore[arg-type]


def check_deadline() -> None:
    _budget.get(_UNBOUNDED).check()


# ------------------------------------------------------------------ sizes


def _too_big(what: str, size: int | float) -> BoundExceeded:
    return BoundExceeded(f"size bound: {what} would be {size:,.0f} characters or items "
                         f"(at most {MAX_SIZE:,}, 1 MiB)", bound="size")


def size_of(value: object, limit: int = MAX_SIZE) -> int:
    """Characters/items ``value`` stands for, shared references counted each time they
    appear (what turning it into text would build); stops counting past ``limit``."""
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str | bytes):
            total += len(item)
        elif isinstance(item, bool) or item is None or isinstance(item, float):
            total += 1
        elif isinstance(item, int):
            total += item.bit_length() // 8 + 1
        elif isinstance(item, list | tuple | set | frozenset):
            total += len(item) + 1
            if total <= limit:
                stack.extend(item)
        elif isinstance(item, dict):
            total += 2 * len(item) + 1
            if total <= limit:
                stack.extend(item.keys())
                stack.extend(item.values())
        elif isinstance(item, range):
            total += len(item)
        else:
            total += 1
        if total > limit:
            return total
    return total


def check_size(value: object, what: str = "the value") -> object:
    size = size_of(value)
    if size > MAX_SIZE:
        raise _too_big(what, size)
    return value


def _int_bits(value: object) -> int:
    return value.bit_length() if isinstance(value, int) and not isinstance(value, bool) \
        else 0


def _check_power(base: object, exponent: object) -> None:
    if isinstance(exponent, int) and not isinstance(exponent, bool) and exponent > 0:
        bits = exponent * max(_int_bits(base) - 1, 0) if isinstance(base, int) else 0
        if bits > MAX_INT_BITS:
            raise BoundExceeded(f"size bound: '**' would build an integer of about "
                                f"{bits // 8:,} bytes (at most {MAX_SIZE:,}, 1 MiB)",
                                bound="size")


def _check_times(left: object, right: object) -> None:
    if _int_bits(left) + _int_bits(right) > MAX_INT_BITS:
        raise _too_big("the product", (_int_bits(left) + _int_bits(right)) // 8)
    for seq, times in ((left, right), (right, left)):
        if isinstance(seq, str | list | tuple) and isinstance(times, int) and times > 1:
            size = size_of(seq) * times
            if size > MAX_SIZE:
                raise _too_big("'*'", size)


def _check_plus(left: object, right: object) -> None:
    if isinstance(left, str | list | tuple) and isinstance(right, str | list | tuple):
        size = size_of(left) + size_of(right)
        if size > MAX_SIZE:
            raise _too_big("'+'", size)


_WIDTHS = re.compile(r"\d+")


def _check_format(fmt: str, args: Iterable[object], star: str) -> None:
    """``fmt % args`` or ``fmt.format(*args)``: no width or precision past the bound,
    also when it comes from an argument (``%*d``, ``{:{}}``)."""
    args = list(args)
    for digits in _WIDTHS.findall(fmt):
        if len(digits) > 7 or int(digits) > MAX_SIZE:
            raise _too_big("a formatted field", int(digits[:16]))
    if star in fmt:
        for arg in args:
            if isinstance(arg, int) and abs(arg) > MAX_SIZE:
                raise _too_big("a formatted field", abs(arg))
    for arg in args:
        check_size(arg, "a formatted argument")


def _check_width(width: object, what: str) -> None:
    if isinstance(width, int) and width > MAX_SIZE:
        raise _too_big(what, width)


def _check_replace(text: str, old: object, new: object, count: object = -1) -> None:
    if not isinstance(old, str) or not isinstance(new, str):
        return
    found = text.count(old) if old else len(text) + 1
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    size = len(text) + found * (len(new) - len(old))
    if size > MAX_SIZE:
        raise _too_big("'replace'", size)


def _check_join(sep: str, items: list[object]) -> None:
    size = size_of(items) + len(items) * len(sep)
    if size > MAX_SIZE:
        raise _too_big("'join'", size)


def _bounded_list(iterable: object) -> object:
    """A one-shot iterable (a generator from ``map``) as a list, refused past the bound."""
    if isinstance(iterable, list | tuple | str | dict):
        return iterable
    if not isinstance(iterable, Iterable):
        return iterable
    items: list[object] = []
    for item in iterable:
        items.append(item)
        if len(items) > MAX_SIZE:
            raise _too_big("the sequence", len(items))
    return items


# ------------------------------------------------------------------ str methods

def _check_str_method(name: str, text: str, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """Refuse a str method call that would widen ``text`` past the bound; returns the
    arguments to call it with (an iterable to ``join`` made a list)."""
    if name in ("center", "ljust", "rjust", "zfill") and args:
        _check_width(args[0], f"'{name}'")
    elif name == "expandtabs":
        tab = args[0] if args else kwargs.get("tabsize", 8)
        if isinstance(tab, int):
            size = len(text) + text.count("\t") * tab
            if size > MAX_SIZE:
                raise _too_big("'expandtabs'", size)
    elif name == "replace" and len(args) >= 2:
        _check_replace(text, *args[:3])
    elif name == "join" and args:
        items = _bounded_list(args[0])
        if isinstance(items, list | tuple):
            _check_join(text, list(items))
        return (items, *args[1:])
    return args


# ------------------------------------------------------------------ filters


def _filter_check(name: str, fn: Callable[..., Any]) -> Callable[..., None] | None:
    """The pre-check for a filter that can widen its input, given the call's arguments
    bound to the filter's signature."""
    checks: dict[str, Callable[[Mapping[str, Any]], None]] = {
        "center": lambda a: _check_width(a.get("width"), "'center'"),
        "indent": _check_indent,
        "batch": lambda a: _check_width(a.get("linecount") if a.get("fill_with")
                                        is not None else 0, "'batch' padding"),
        "slice": lambda a: _check_width(a.get("slices"), "'slice'"),
        "wordwrap": _check_wordwrap,
        "replace": lambda a: _check_replace(str(a.get("s", "")), a.get("old"), a.get("new"),
                                            a.get("count") if a.get("count") is not None
                                            else -1),
        "format": lambda a: _check_format(str(a.get("value", "")),
                                          [*a.get("args", ()), *a.get("kwargs", {}).values()],
                                          "*"),
        "sum": _check_sum,
        "join": lambda a: _check_join(str(a.get("d", "")), list(a["value"]))
        if isinstance(a.get("value"), list | tuple | range) else None,
    }
    check = checks.get(name)
    if check is None:
        return None
    signature = inspect.signature(fn)
    # async-capable filters take the eval context first although their (sync)
    # signature does not show it
    first = next(iter(signature.parameters), "")
    skip = 1 if getattr(fn, "jinja_pass_arg", None) is not None \
        and first not in ("environment", "env", "eval_ctx", "context") else 0

    def bound_check(*args: Any, **kwargs: Any) -> None:
        try:
            arguments = signature.bind(*args[skip:], **kwargs).arguments
        except TypeError:
            return  # the filter itself reports the bad call
        check(arguments)

    return bound_check


def _check_indent(a: Mapping[str, Any]) -> None:
    text, width = str(a.get("s", "")), a.get("width", 4)
    per_line = width if isinstance(width, int) else len(str(width))
    size = len(text) + (text.count("\n") + 1) * per_line
    if size > MAX_SIZE:
        raise _too_big("'indent'", size)


def _check_wordwrap(a: Mapping[str, Any]) -> None:
    text, width = str(a.get("s", "")), a.get("width", 79)
    wrap = a.get("wrapstring") or "\n"
    lines = len(text) // max(width, 1) + 1 if isinstance(width, int) else len(text)
    size = len(text) + lines * len(str(wrap))
    if size > MAX_SIZE:
        raise _too_big("'wordwrap'", size)


def _check_sum(a: Mapping[str, Any]) -> None:
    start = a.get("start", 0)
    if not isinstance(start, int | float):
        raise SecurityError("'sum' adds numbers only (use 'join' for text)")


def _bounded_filter(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` checked: the deadline and the size of its input before, its result after."""
    pre = _filter_check(name, fn)
    # filters marked pass_context/pass_environment/pass_eval_context get that first
    skip = 1 if getattr(fn, "jinja_pass_arg", None) is not None else 0

    def bounded(*args: Any, **kwargs: Any) -> Any:
        _budget.get(_UNBOUNDED).check()
        if len(args) > skip:
            check_size(args[skip], f"the input of '{name}'")
        if pre is not None:
            pre(*args, **kwargs)
        result = fn(*args, **kwargs)
        if isinstance(result, str | list | tuple) and len(result) > MAX_SIZE:
            raise _too_big(f"the result of '{name}'", len(result))
        return result

    return update_wrapper(bounded, fn)


def _safe_range(*args: int) -> range:
    r = range(*args)
    if len(r) > MAX_RANGE:
        raise BoundExceeded(f"size bound: range of {len(r):,} items (at most "
                            f"{MAX_RANGE:,})", bound="size")
    return r


def _iterate(iterable: Iterable[object]) -> Iterator[object]:
    """A ``{% for %}`` loop's items, with the budget checked before each."""
    budget = _budget.get(_UNBOUNDED)
    for item in iterable:
        budget.check()
        yield item


# ------------------------------------------------------------------ messages


class MissingName(StrictUndefined):
    """StrictUndefined whose message says what is missing in plait's terms."""

    __slots__ = ()

    @property
    def _undefined_message(self) -> str:
        obj, name = self._undefined_obj, self._undefined_name
        described = describe_missing(obj, name, _names.get({})) \
            if obj is not missing and not self._undefined_hint else None
        return described or str(StrictUndefined._undefined_message.fget(self))  # type: ignore[attr-defined]


def describe_missing(obj: object, name: object, names: Mapping[str, object]) -> str | None:
    """What ``obj.name`` means when it is missing, or None when it is nothing of plait's."""
    if obj is names.get("secrets") and obj is not None:
        return (f"secret {name} is not set (set the environment variable "
                f"PLAIT_SECRET_{name})")
    if obj is names.get("state") and obj is not None:
        return _missing_state(str(name), names.get(OUTPUT_OWNERS))
    if obj is names.get("input") and obj is not None:
        return f"input has no key {name!r}"
    steps = names.get("steps")
    if obj is steps and steps is not None:
        return f"no step {name!r} in this workflow"
    if isinstance(steps, Mapping) and isinstance(obj, dict | list):
        for step_id in steps:
            if steps[step_id].get("output") is obj:
                return f"the output of step {step_id!r} has no key {name!r}"
    if obj is None:
        return (f"cannot read {name!r} of null (a step that did not complete has "
                f"output null)")
    return None


def _missing_state(key: str, owners: object) -> str:
    declared = owners.get(key, ()) if isinstance(owners, Mapping) else ()
    if not declared:
        return (f"state.{key} is not set: no step declares {key!r} in `outputs` (declare "
                f"it on the step that produces it)")
    names = ", ".join(repr(s) for s in declared)
    return (f"state.{key} is not set: step {names} declares it in `outputs` but has not "
            f"written it (it did not complete or has not run yet)")


# ------------------------------------------------------------------ the environment


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox plus the bounds above."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def call(__self, __context, __obj, *args, **kwargs):  # type: ignore[no-untyped-def]  # noqa: N805
        _budget.get(_UNBOUNDED).check()
        target = getattr(__obj, "__wrapped__", __obj)  # str.format, as the sandbox wraps it
        owner = getattr(target, "__self__", None)
        if isinstance(owner, str):
            name = getattr(target, "__name__", "")
            if name in ("format", "format_map"):
                values = list(args) + list(kwargs.values())
                if name == "format_map" and args and isinstance(args[0], Mapping):
                    values = list(args[0].values())
                _check_format(owner, values, "{")
            else:
                args = _check_str_method(name, owner, args, kwargs)
        result = super().call(__context, __obj, *args, **kwargs)
        if isinstance(result, str | list | tuple) and len(result) > MAX_SIZE:
            raise _too_big("the call's result", len(result))
        return result

    def getattr(self, obj, attribute):  # type: ignore[no-untyped-def]
        _budget.get(_UNBOUNDED).check()
        return super().getattr(obj, attribute)

    def getitem(self, obj, argument):  # type: ignore[no-untyped-def]
        _budget.get(_UNBOUNDED).check()
        return super().getitem(obj, argument)

    def call_binop(self, context, operator, left, right):  # type: ignore[no-untyped-def]
        _budget.get(_UNBOUNDED).check()
        if operator == "**":
            _check_power(left, right)
        elif operator == "*":
            _check_times(left, right)
        elif operator == "+":
            _check_plus(left, right)
        elif operator == "%" and isinstance(left, str):
            _check_format(left, right if isinstance(right, tuple) else (right,), "*")
        return super().call_binop(context, operator, left, right)


def _finalize(value: object) -> object:
    """Every ``{{ }}`` of a text template passes here before it becomes text."""
    return check_size(value, "an interpolated value")


def bound_loops(ast: nodes.Template) -> nodes.Template:
    """Make every ``{% for %}`` iterate through ``_iterate`` (the budget per item)."""
    for loop in ast.find_all(nodes.For):
        loop.iter = nodes.Call(nodes.EnvironmentAttribute("plait_iterate"), [loop.iter],
                               [], None, None, lineno=loop.lineno)
    for concat in ast.find_all(nodes.Concat):
        concat.nodes = [nodes.Call(nodes.EnvironmentAttribute("plait_sized"), [n], [],
                                   None, None, lineno=concat.lineno) for n in concat.nodes]
    ast.set_environment(ENV)
    return ast


def _make_env() -> BoundedSandbox:
    env = BoundedSandbox(undefined=MissingName, autoescape=False,
                         keep_trailing_newline=True, finalize=_finalize)
    env.globals["range"] = _safe_range
    del env.globals["lipsum"]
    env.filters = {name: _bounded_filter(name, fn) for name, fn in env.filters.items()}
    env.plait_iterate = _iterate  # type: ignore[attr-defined]
    env.plait_sized = lambda value: check_size(value, "a '~' operand")  # type: ignore[attr-defined]
    return env


ENV = _make_env()
