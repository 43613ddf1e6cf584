"""Sandboxed Jinja2 expressions (docs/expressions.md).

A string that is exactly one ``{{ expr }}`` yields the expression's native value; any
other string containing ``{{`` or ``{%`` renders to text; other strings are literals.
Undefined names are errors whose message says, in plait's terms, what is missing.
Rendering is bounded (``sandbox``: 2 s and 1 MiB, for the result and every value built
on the way); a template that is not ``is_cheap`` may take up to that long, so the
runtime renders it off the event loop.  Values taken from the context (step outputs,
input) are data: they are never rendered again.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .bounds import MAX_SECONDS, MAX_SIZE, OUTPUT_OWNERS, Stop
from .model import JSON

if TYPE_CHECKING:
    from .templates import (
        Compiled,
        TemplateSyntaxError,
        compile_template,
        names_read,
        render,
        syntax_problem,
    )

__all__ = ["MAX_SECONDS", "MAX_SIZE", "OUTPUT_OWNERS", "Compiled", "RenderError", "Stop",
           "SyntaxProblem", "compile_template", "is_cheap", "is_template", "names_read",
           "render",
           "render_value", "syntax_problem", "templates_in", "truthy"]

# What compiles and renders templates lives in ``templates`` with Jinja2 (about 30 ms to
# import).  Its names are bound here with the first template met (``_load_jinja``), so a
# definition without templates never imports Jinja2.
_FROM_TEMPLATES = ("Compiled", "TemplateSyntaxError", "compile_template", "names_read",
                   "render", "syntax_problem")
_jinja_loaded = False


def _load_jinja() -> None:
    global _jinja_loaded
    if not _jinja_loaded:
        from . import templates

        globals().update({name: getattr(templates, name) for name in _FROM_TEMPLATES})
        _jinja_loaded = True


def __getattr__(name: str) -> object:
    """``expressions.render`` and the other names of ``templates``, on first use."""
    if name not in _FROM_TEMPLATES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    _load_jinja()
    return globals()[name]


class RenderError(Exception):
    """A template failed to render; ``sandbox`` is True when the sandbox refused it,
    ``bound`` names the bound it passed ("time", "size", "cancelled") if any."""

    def __init__(self, message: str, *, sandbox: bool = False,
                 bound: str | None = None) -> None:
        self.sandbox = sandbox
        self.bound = bound
        super().__init__(message)


@dataclass(frozen=True, slots=True, kw_only=True)
class SyntaxProblem:
    message: str
    line: int
    column: int
    nesting: bool = False  # nested too deeply (``template_depth``), not misspelt

    def describe(self) -> str:
        """The problem as validation reports it."""
        if self.nesting:
            return self.message
        return (f"template syntax error at line {self.line}, column {self.column}: "
                f"{self.message}")


def is_template(text: str) -> bool:
    return "{{" in text or "{%" in text


def is_cheap(value: JSON | Mapping[str, JSON]) -> bool:
    """True when every template in ``value`` is cheap: rendering it on the event loop
    cannot stall it (no calls, loops or operators that build values).  A template with
    a syntax error counts as cheap: it fails at once."""
    fields = value.values() if isinstance(value, Mapping) else (value,)
    for _, text in (found for field in fields for found in templates_in(field)):
        _load_jinja()
        try:
            if not compile_template(text).cheap:
                return False
        except TemplateSyntaxError:
            continue
    return True


def render_value(value: JSON, context: Mapping[str, object], *,
                 stop: Stop | None = None) -> JSON:
    """Render every template string inside a JSON value; other values pass through.

    Raises RenderError whose ``path`` is the key path inside ``value``."""
    if isinstance(value, str):
        if not is_template(value):
            return value
        _load_jinja()
        return render(value, context, stop=stop)
    if isinstance(value, dict):
        out: dict[str, JSON] = {}
        for key, item in value.items():
            try:
                out[key] = render_value(item, context, stop=stop)
            except RenderError as exc:
                raise _nest(exc, f".{key}") from exc.__cause__
        return out
    if isinstance(value, list):
        items: list[JSON] = []
        for i, item in enumerate(value):
            try:
                items.append(render_value(item, context, stop=stop))
            except RenderError as exc:
                raise _nest(exc, f"[{i}]") from exc.__cause__
        return items
    return value


def _nest(exc: RenderError, where: str) -> RenderError:
    path = getattr(exc, "path", "")
    nested = RenderError(str(exc), sandbox=exc.sandbox, bound=exc.bound)
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
    """Truthiness of a rendered guard: Python's (docs/expressions.md), so any non-empty string,
    "false" and "no" included, is true; a guard that must be false renders a native
    value (``{{ x == 'no' }}``)."""
    return bool(value)
