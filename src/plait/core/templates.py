"""Compiling and rendering templates with Jinja2, in the sandbox (docs/expressions.md).

``expressions`` is the face the rest of plait uses; it imports this module (and with it
Jinja2, about 30 ms) with the first template it compiles, so a definition without
templates never loads Jinja2.  Templates compile once per distinct source.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import cast

from jinja2 import Template, TemplateSyntaxError, Undefined, meta, nodes
from jinja2.environment import TemplateExpression
from jinja2.exceptions import SecurityError
from jinja2.exceptions import TemplateError as JinjaTemplateError
from jinja2.lexer import Token, TokenStream
from jinja2.parser import Parser

from . import sandbox
from .bounds import MAX_SIZE, Stop
from .expressions import RenderError, SyntaxProblem
from .model import JSON
from .sandbox import ENV, BoundExceeded
from .template_depth import TooDeep, check_tree, depth_guarded

__all__ = ["Compiled", "SecretReads", "TemplateSyntaxError", "compile_template",
           "names_read", "render", "secrets_read", "syntax_problem"]

_LONE = re.compile(r"^\s*\{\{(?P<expr>.*)\}\}\s*$", re.DOTALL)


@dataclass(frozen=True, slots=True)
class Compiled:
    source: str
    lone: bool
    fn: Callable[..., object]
    steps_read: frozenset[str]
    cheap: bool  # renders in time proportional to the data it reads (see is_cheap)
    # a lone template that is one bare name (``{{ item }}``): its value is the context's
    # entry, looked up without building a Jinja context (see ``render``)
    name: str | None = None
    # ``steps`` read some other way than ``steps.X`` / ``steps['X']`` (a computed key, a
    # loop over it, passed whole): which steps it reads cannot be known before it renders
    steps_dynamic: bool = False


@lru_cache(maxsize=8192)
def compile_template(source: str) -> Compiled:
    """Compile once per distinct source; raise TemplateSyntaxError on bad syntax, and
    its subclass TooDeep past ``MAX_NESTING`` levels (``template_depth``)."""
    try:
        return _compile(source)
    except RecursionError:  # a caller deep in its own stack: refused all the same
        raise TooDeep("template nested too deeply to compile", 1) from None


def _compile(source: str) -> Compiled:
    match = _LONE.match(source)
    inner = match.group("expr") if match else None
    if inner is not None and "{{" not in inner and "}}" not in inner and "{%" not in inner:
        ast = parse("{{" + inner + "}}")
        output = ast.body[0] if len(ast.body) == 1 else None
        expr = output.nodes[0] if isinstance(output, nodes.Output) \
            and len(output.nodes) == 1 else None
        name = expr.name if isinstance(expr, nodes.Name) else None
        steps, dynamic = _steps_read(ast)
        return Compiled(source, True, _compile_expression(inner), steps,
                        _cheap(ast), name, dynamic)
    ast = parse(source)
    (steps, dynamic), cheap = _steps_read(ast), _cheap(ast)
    template = _from_tree(sandbox.bound_loops(ast))
    return Compiled(source, False, template.generate, steps, cheap, steps_dynamic=dynamic)


def parse(source: str, state: str | None = None) -> nodes.Template:
    """``ENV.parse(source)``, refusing a template nested deeper than ``MAX_NESTING``
    levels (TooDeep) before the parser or the compiler recurses that deep."""
    parser = _parser(source, state)
    tree = parser.parse()
    check_tree(tree)
    return tree


def _parser(source: str, state: str | None = None) -> Parser:
    parser = Parser(ENV, source, state=state)
    stream = parser.stream
    parser.stream = TokenStream(depth_guarded(iter(stream)), stream.name, stream.filename)
    return parser


def _from_tree(tree: nodes.Template) -> Template:
    try:
        return ENV.from_string(tree)
    except SyntaxError as exc:  # Python's limits on the code Jinja2 generates
        raise TooDeep(f"template nested too deeply to compile ({exc.msg})", 1) from None


def _compile_expression(inner: str) -> Callable[..., object]:
    """``ENV.compile_expression`` with the sandbox's loop and ``~`` checks."""
    parser = _parser(inner, state="variable")
    expr = parser.parse_expression()
    if not parser.stream.eos:
        raise TemplateSyntaxError("chunk after expression", parser.stream.current.lineno,
                                  None, None)
    check_tree(expr)
    body = [nodes.Assign(nodes.Name("result", "store"), expr, lineno=1)]
    template = _from_tree(sandbox.bound_loops(nodes.Template(body, lineno=1)))
    return TemplateExpression(template, False)


# What a cheap template may contain: data lookups, comparisons, logic, literals, and
# filters that take time proportional to their input.  Anything else (calls, `*`, `**`,
# `%`, loops, macros, assignments) may take long and is rendered off the event loop.
_CHEAP_NODES = (nodes.Template, nodes.Output, nodes.TemplateData, nodes.Name, nodes.Const,
                nodes.Getattr, nodes.Getitem, nodes.Compare, nodes.Operand, nodes.And,
                nodes.Or, nodes.Not, nodes.Neg, nodes.Pos, nodes.CondExpr, nodes.If,
                nodes.List, nodes.Tuple, nodes.Dict, nodes.Pair, nodes.Concat, nodes.Add,
                nodes.Sub, nodes.Div, nodes.FloorDiv, nodes.Test, nodes.Filter,
                nodes.Slice, nodes.Keyword)
_CHEAP_FILTERS = frozenset({"default", "d", "lower", "upper", "trim", "length", "count",
                            "first", "last", "string", "int", "float", "bool", "tojson",
                            "capitalize", "title", "e", "escape", "abs", "round", "list",
                            "items", "reverse", "min", "max", "urlencode", "wordcount"})


def _cheap(ast: nodes.Template) -> bool:
    for node in ast.find_all(nodes.Node):
        if (isinstance(node, nodes.Mul | nodes.Mod) and _small_number(node.right)) or \
                (isinstance(node, nodes.Mul) and _small_number(node.left)):
            continue  # `x * 2`, `n % 7`: time linear in the (bounded) value
        if not isinstance(node, _CHEAP_NODES):
            return False
        if isinstance(node, nodes.Filter) and node.name not in _CHEAP_FILTERS:
            return False
    return True


def _small_number(node: nodes.Node) -> bool:
    return isinstance(node, nodes.Const) and isinstance(node.value, int | float) \
        and abs(node.value) <= 1000


def _steps_read(ast: nodes.Template) -> tuple[frozenset[str], bool]:
    """Step ids read as ``steps.X`` or ``steps['X']`` anywhere in the template, and
    whether ``steps`` is also read any other way (dynamic: any step may be read)."""
    found: set[str] = set()
    named = 0  # reads of ``steps`` that name their step
    for node in ast.find_all((nodes.Getattr, nodes.Getitem)):
        if isinstance(node, nodes.Getattr):
            if _is_steps(node.node):
                found.add(node.attr)
                named += 1
        elif isinstance(node, nodes.Getitem) and _is_steps(node.node):
            arg = node.arg
            if isinstance(arg, nodes.Const) and isinstance(arg.value, str):
                found.add(arg.value)
                named += 1
    uses = sum(1 for node in ast.find_all(nodes.Name)
               if node.name == "steps" and node.ctx == "load")
    return frozenset(found), uses > named


def names_read(source: str) -> frozenset[str]:
    """The context names ``source`` reads (``input``, ``state``, ``steps``...), not
    counting names it assigns itself; TemplateSyntaxError on bad syntax."""
    return frozenset(meta.find_undeclared_variables(parse(source)))


@dataclass(frozen=True, slots=True)
class SecretReads:
    """How a template reads ``secrets``: ``names`` read as ``secrets.NAME`` or
    ``secrets['NAME']``; ``dynamic``: read any other way (a computed key, ``secrets``
    passed whole to a filter, a loop or a variable, a method such as ``.values()``),
    so which secrets it reads cannot be known before it renders."""

    names: frozenset[str]
    dynamic: bool


def secrets_read(source: str) -> SecretReads:
    """What ``source`` reads of ``secrets``, from its syntax tree (never rendered);
    TemplateSyntaxError on bad syntax."""
    names: set[str] = set()
    dynamic = False
    for node, parent in _with_parents(ENV.parse(source)):
        if isinstance(node, nodes.Call) and isinstance(node.node, nodes.Getattr) \
                and _is_secrets(node.node.node):
            dynamic = True  # a method of the mapping: secrets.values(), secrets.get(x)
        if not _is_secrets(node):
            continue
        name = _static_secret(node, parent)
        if name is None:
            dynamic = True
        else:
            names.add(name)
    return SecretReads(frozenset(names), dynamic)


def _is_secrets(node: nodes.Node) -> bool:
    return isinstance(node, nodes.Name) and node.name == "secrets"


def _with_parents(root: nodes.Node) -> Iterator[tuple[nodes.Node, nodes.Node | None]]:
    stack: list[tuple[nodes.Node, nodes.Node | None]] = [(root, None)]
    while stack:
        node, parent = stack.pop()
        yield node, parent
        stack.extend((child, node) for child in node.iter_child_nodes())


def _static_secret(name: nodes.Node, parent: nodes.Node | None) -> str | None:
    """The secret's name when ``secrets`` is read as ``secrets.NAME`` or
    ``secrets['NAME']`` (the name read, not stored or assigned), else None."""
    if not isinstance(name, nodes.Name) or name.ctx != "load":
        return None
    if isinstance(parent, nodes.Getattr) and parent.node is name:
        return parent.attr
    if isinstance(parent, nodes.Getitem) and parent.node is name \
            and isinstance(parent.arg, nodes.Const) and isinstance(parent.arg.value, str):
        return parent.arg.value
    return None


def _is_steps(node: nodes.Node) -> bool:
    return isinstance(node, nodes.Name) and node.name == "steps"


def syntax_problem(source: str) -> SyntaxProblem | None:
    """The first syntax error of ``source`` with its line and column, or None."""
    try:
        compile_template(source)
    except TooDeep as exc:  # the parser is not run again to find a column
        return SyntaxProblem(message=exc.message or str(exc), line=exc.lineno or 1,
                             column=1, nesting=True)
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
    parser.stream = TokenStream(depth_guarded(counted(iter(ENV.lexer.tokenize(source)))), None,
                                None)
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


def render(source: str, context: Mapping[str, object], *,
           stop: Stop | None = None) -> JSON:
    """Render one string within the bounds.  Raise RenderError naming what went wrong.

    ``stop``, when set by another thread, ends the render at its next check."""
    try:
        compiled = compile_template(source)
    except TemplateSyntaxError as exc:
        raise RenderError(f"syntax error on line {exc.lineno}: {exc.message}") from exc
    if compiled.name is not None:  # `{{ name }}`: what Jinja would return, found directly
        value = context.get(compiled.name, _ABSENT)
        if value is not _ABSENT and not isinstance(value, Undefined):
            try:
                return cast(JSON, sandbox.check_size(value, "the template's value"))
            except BoundExceeded as exc:
                raise RenderError(str(exc), sandbox=True, bound=exc.bound) from exc
        # absent: Jinja names the missing variable (or finds one of its globals)
    tokens = sandbox.begin(context, stop)
    try:
        if compiled.lone:
            return _native(compiled.fn(**context))
        return _join_bounded(cast("Iterator[str]", compiled.fn(context)))
    except BoundExceeded as exc:
        raise RenderError(str(exc), sandbox=True, bound=exc.bound) from exc
    except SecurityError as exc:
        raise RenderError(f"refused by the sandbox: {exc}", sandbox=True) from exc
    except JinjaTemplateError as exc:
        raise RenderError(str(exc)) from exc
    except RenderError:
        raise
    except RecursionError as exc:
        raise RenderError("the template nests too deeply (RecursionError)") from exc
    except MemoryError as exc:
        raise RenderError("size bound: the template ran out of memory", sandbox=True,
                          bound="size") from exc
    except Exception as exc:
        raise RenderError(f"{type(exc).__name__}: {exc}") from exc
    finally:
        sandbox.end(tokens)


_ABSENT = object()


def _join_bounded(chunks: Iterator[str]) -> str:
    out: list[str] = []
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > MAX_SIZE:
            raise RenderError(f"size bound: the rendered text exceeds {MAX_SIZE:,} "
                              f"characters (1 MiB)", sandbox=True, bound="size")
        sandbox.check_deadline()
        out.append(chunk)
    return "".join(out)


def _native(value: object) -> JSON:
    if isinstance(value, Undefined):
        # StrictUndefined raises with the name that was missing.
        value._fail_with_undefined_error()
    sandbox.check_size(value, "the template's value")
    return cast(JSON, value)
