"""Sandboxed Jinja2 expressions (SPEC 4).

A string that is exactly one ``{{ expr }}`` yields the expression's native value; any
other string containing ``{{`` or ``{%`` renders to text; other strings are literals.
Undefined names are errors.  Rendering is bounded: output size, sequence sizes built by
``*``, ``range`` and a deadline checked on every call and attribute access.  Values taken
from the context (step outputs, input) are data: they are never rendered again.
"""

from __future__ import annotations

import contextvars
import math
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import cast

from jinja2 import StrictUndefined, TemplateSyntaxError, Undefined, nodes
from jinja2.exceptions import SecurityError
from jinja2.exceptions import TemplateError as JinjaTemplateError
from jinja2.lexer import Token, TokenStream
from jinja2.parser import Parser
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .model import JSON

MAX_OUTPUT_CHARS = 1_000_000
MAX_SECONDS = 2.0
MAX_RANGE = 100_000

_LONE = re.compile(r"^\s*\{\{(?P<expr>.*)\}\}\s*$", re.DOTALL)
_deadline: contextvars.ContextVar[float] = contextvars.ContextVar("plait_render_deadline",
                                                                 default=math.inf)


class RenderError(Exception):
    """A template failed to render; ``sandbox`` is True when the sandbox refused it."""

    def __init__(self, message: str, *, sandbox: bool = False) -> None:
        self.sandbox = sandbox
        super().__init__(message)


@dataclass(frozen=True, slots=True, kw_only=True)
class SyntaxProblem:
    message: str
    line: int
    column: int


class _BoundedSandbox(ImmutableSandboxedEnvironment):
    """The sandbox plus bounds: a render cannot build huge values or run forever."""

    intercepted_binops = frozenset({"*", "**"})

    def call(__self, __context, __obj, *args, **kwargs):  # type: ignore[no-untyped-def]  # noqa: N805
        _check_deadline()
        return super().call(__context, __obj, *args, **kwargs)

    def getattr(self, obj, attribute):  # type: ignore[no-untyped-def]
        _check_deadline()
        return super().getattr(obj, attribute)

    def call_binop(self, context, operator, left, right):  # type: ignore[no-untyped-def]
        if operator == "**":
            if isinstance(right, int | float) and abs(right) > 1000:
                raise SecurityError(f"exponent {right} is too large")
            return left**right
        result_size = _repeat_size(left, right)
        if result_size > MAX_OUTPUT_CHARS:
            raise SecurityError(f"'*' would build a value of {result_size} items")
        return left * right


def _repeat_size(left: object, right: object) -> int:
    for seq, times in ((left, right), (right, left)):
        if isinstance(seq, str | list | tuple) and isinstance(times, int):
            return len(seq) * max(times, 0)
    return 0


def _check_deadline() -> None:
    if time.monotonic() > _deadline.get():
        raise SecurityError(f"template took longer than {MAX_SECONDS:g}s")


def _safe_range(*args: int) -> range:
    r = range(*args)
    if len(r) > MAX_RANGE:
        raise SecurityError(f"range of {len(r)} items exceeds {MAX_RANGE}")
    return r


def _make_env() -> _BoundedSandbox:
    env = _BoundedSandbox(undefined=StrictUndefined, autoescape=False,
                          keep_trailing_newline=True)
    env.globals["range"] = _safe_range
    return env


ENV = _make_env()


def is_template(text: str) -> bool:
    return "{{" in text or "{%" in text


@dataclass(frozen=True, slots=True)
class Compiled:
    source: str
    lone: bool
    fn: Callable[..., object]
    steps_read: frozenset[str]


@lru_cache(maxsize=8192)
def compile_template(source: str) -> Compiled:
    """Compile once per distinct source; raise TemplateSyntaxError on bad syntax."""
    match = _LONE.match(source)
    inner = match.group("expr") if match else None
    if inner is not None and "{{" not in inner and "}}" not in inner and "{%" not in inner:
        ast = ENV.parse("{{" + inner + "}}")
        expr_fn = ENV.compile_expression(inner, undefined_to_none=False)
        return Compiled(source, True, expr_fn, _steps_read(ast))
    ast = ENV.parse(source)
    template = ENV.from_string(source)
    return Compiled(source, False, template.generate, _steps_read(ast))


def _steps_read(ast: nodes.Template) -> frozenset[str]:
    """Step ids read as ``steps.X`` or ``steps['X']`` anywhere in the template."""
    found: set[str] = set()
    for node in ast.find_all((nodes.Getattr, nodes.Getitem)):
        if isinstance(node, nodes.Getattr):
            if _is_steps(node.node):
                found.add(node.attr)
        elif isinstance(node, nodes.Getitem) and _is_steps(node.node):
            arg = node.arg
            if isinstance(arg, nodes.Const) and isinstance(arg.value, str):
                found.add(arg.value)
    return frozenset(found)


def _is_steps(node: nodes.Node) -> bool:
    return isinstance(node, nodes.Name) and node.name == "steps"


def syntax_problem(source: str) -> SyntaxProblem | None:
    """The first syntax error of ``source`` with its line and column, or None."""
    try:
        compile_template(source)
    except TemplateSyntaxError as exc:
        line = exc.lineno or 1
        return SyntaxProblem(message=exc.message or str(exc), line=line,
                             column=_error_column(source, line))
    return None


def _error_column(source: str, line: int) -> int:
    """Best-effort column (Jinja reports lines, not columns): where the lexer stopped on
    the failing line; else the token the parser stopped at; else the last tag opened."""
    lexed = _lexer_column(source, line)
    if lexed is not None:
        return lexed
    parsed = _parser_column(source, line)
    if parsed is not None:
        return parsed
    text = source.split("\n")[line - 1] if line - 1 < len(source.split("\n")) else ""
    opened = max(text.rfind("{{"), text.rfind("{%"))
    return opened + 1 if opened >= 0 else 1


def _parser_column(source: str, line: int) -> int | None:
    """Column of the token the parser failed on.  The parser reads a filtered token
    stream (no whitespace or comments); counting the tokens it pulled tells which raw
    token, with its position, it stopped at."""
    positions: list[tuple[int, int]] = []  # (line, column) of each token the parser sees
    col_of_line: dict[int, int] = {}
    try:
        for lineno, kind, value in ENV.lexer.tokeniter(source, None):
            col = col_of_line.get(lineno, 0)
            if kind not in _SKIPPED_TOKENS:
                positions.append((lineno, col + len(value) - len(value.lstrip())))
            if "\n" in value:
                col_of_line[lineno + value.count("\n")] = len(value.rsplit("\n", 1)[1])
            else:
                col_of_line[lineno] = col + len(value)
    except TemplateSyntaxError:
        return None
    pulled = 0

    def counted(tokens: Iterator[Token]) -> Iterator[Token]:
        nonlocal pulled
        for token in tokens:
            pulled += 1
            yield token

    parser = Parser(ENV, source)
    parser.stream = TokenStream(counted(iter(ENV.lexer.tokenize(source))), None, None)
    try:
        parser.parse()
    except TemplateSyntaxError:
        index = pulled - 1  # the token pulled last is `current`, where it stopped
    else:
        return None
    if 0 <= index < len(positions) and positions[index][0] == line:
        return positions[index][1] + 1
    return None


_SKIPPED_TOKENS = frozenset({"whitespace", "comment_begin", "comment", "comment_end",
                             "raw_begin", "raw_end", "linecomment_begin", "linecomment",
                             "linecomment_end"})


def _lexer_column(source: str, line: int) -> int | None:
    consumed_line, col = 1, 0
    try:
        for lineno, _kind, value in ENV.lexer.tokeniter(source, None):
            if lineno != consumed_line:
                consumed_line, col = lineno, 0
            if lineno == line:
                col += len(value.split("\n")[-1]) if "\n" in value else len(value)
    except TemplateSyntaxError:
        if consumed_line == line:
            return col + 1
    return None


def render(source: str, context: Mapping[str, object]) -> JSON:
    """Render one string.  Raise RenderError naming what went wrong."""
    try:
        compiled = compile_template(source)
    except TemplateSyntaxError as exc:
        raise RenderError(f"syntax error on line {exc.lineno}: {exc.message}") from exc
    token = _deadline.set(time.monotonic() + MAX_SECONDS)
    try:
        if compiled.lone:
            return _native(compiled.fn(**context))
        return _join_bounded(cast("Iterator[str]", compiled.fn(context)))
    except SecurityError as exc:
        raise RenderError(f"refused by the sandbox: {exc}", sandbox=True) from exc
    except JinjaTemplateError as exc:
        raise RenderError(str(exc)) from exc
    except RenderError:
        raise
    except Exception as exc:
        raise RenderError(f"{type(exc).__name__}: {exc}") from exc
    finally:
        _deadline.reset(token)


def _join_bounded(chunks: Iterator[str]) -> str:
    out: list[str] = []
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > MAX_OUTPUT_CHARS:
            raise RenderError(f"rendered text exceeds {MAX_OUTPUT_CHARS} characters",
                              sandbox=True)
        _check_deadline()
        out.append(chunk)
    return "".join(out)


def _native(value: object) -> JSON:
    if isinstance(value, Undefined):
        # StrictUndefined raises with the name that was missing.
        value._fail_with_undefined_error()
    if isinstance(value, str) and len(value) > MAX_OUTPUT_CHARS:
        raise RenderError(f"value exceeds {MAX_OUTPUT_CHARS} characters", sandbox=True)
    return cast(JSON, value)


def render_value(value: JSON, context: Mapping[str, object]) -> JSON:
    """Render every template string inside a JSON value; other values pass through.

    Raises RenderError whose message starts with the key path inside ``value``."""
    if isinstance(value, str):
        return render(value, context) if is_template(value) else value
    if isinstance(value, dict):
        out: dict[str, JSON] = {}
        for key, item in value.items():
            try:
                out[key] = render_value(item, context)
            except RenderError as exc:
                raise _nest(exc, f".{key}") from exc.__cause__
        return out
    if isinstance(value, list):
        items: list[JSON] = []
        for i, item in enumerate(value):
            try:
                items.append(render_value(item, context))
            except RenderError as exc:
                raise _nest(exc, f"[{i}]") from exc.__cause__
        return items
    return value


def _nest(exc: RenderError, where: str) -> RenderError:
    path = getattr(exc, "path", "")
    nested = RenderError(str(exc).split(": ", 1)[-1] if path else str(exc),
                         sandbox=exc.sandbox)
    nested.path = where + path  # type: ignore[attr-defined]
    return nested


def templates_in(value: JSON) -> Iterator[tuple[str, str]]:
    """Every template string inside ``value`` with its key path (for validation)."""
    if isinstance(value, str):
        if is_template(value):
            yield "", value
    elif isinstance(value, dict):
        for key, item in value.items():
            for path, text in templates_in(item):
                yield f".{key}{path}", text
    elif isinstance(value, list):
        for i, item in enumerate(value):
            for path, text in templates_in(item):
                yield f"[{i}]{path}", text


def truthy(value: JSON) -> bool:
    """Truthiness of a rendered guard: native values as Python, text as written."""
    if isinstance(value, str):
        return value.strip().lower() not in ("", "false", "0", "no", "none", "null")
    return bool(value)
