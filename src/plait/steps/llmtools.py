"""Tools for model calls: the ``tools`` an ``llm`` step (or ``ctx.llm``) offers the
model, and the ``tool_calls`` the model answers with.

``tools`` has OpenAI's shape, sent as written::

    [{"type": "function",
      "function": {"name": "search", "description": "...",
                   "parameters": {"type": "object", "properties": {...}}}}, ...]

Each tool is a function with a name (letters, digits, ``_`` and ``-``, at most 64) that no
other tool has; ``description`` is optional text and ``parameters`` an optional JSON
Schema object.  A problem is reported with its path (``tools[1].function.name``).

A completion's ``message.tool_calls`` become the output's ``tool_calls``: a list of
``{"id", "name", "arguments"}``, ``arguments`` parsed from the JSON text the model wrote.
Arguments that are not JSON fail the attempt naming the call and the tool (and are
retried, as a malformed JSON answer is: a new sample usually fixes it).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..core import expressions
from ..core.model import JSON, JSONDict
from ..errors import StepError

TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_TOOLS = 128  # as the OpenAI API allows
_TOOL_KEYS = frozenset({"type", "function"})
_FUNCTION_KEYS = frozenset({"name", "description", "parameters", "strict"})


def _templated(value: JSON) -> bool:
    return isinstance(value, str) and expressions.is_template(value)


def tools_problem(value: JSON, *, templates: bool = False) -> tuple[str, str] | None:
    """The first problem of a ``tools`` list as (path under ``tools``, message), or
    None; ``templates``: a template stands for any tool or value (the definition check)."""
    if not isinstance(value, list) or not value:
        return "", ("expected a non-empty list of tools like {type: function, function: "
                    "{name, description, parameters}}")
    if len(value) > MAX_TOOLS:
        return "", f"at most {MAX_TOOLS} tools, got {len(value):,}"
    names: dict[str, int] = {}
    for i, tool in enumerate(value):
        if templates and _templated(tool):
            continue
        problem = _tool_problem(tool, templates)
        if problem is not None:
            return f"[{i}]{problem[0]}", problem[1]
        assert isinstance(tool, dict) and isinstance(tool["function"], dict)
        name = tool["function"]["name"]
        if isinstance(name, str) and not _templated(name):
            if name in names:
                return f"[{i}].function.name", (f"the tool name {name!r} is used twice "
                                                f"(also by tools[{names[name]}])")
            names[name] = i
    return None


def _tool_problem(tool: JSON, templates: bool) -> tuple[str, str] | None:
    if not isinstance(tool, dict):
        return "", f"expected a mapping {{type: function, function: {{...}}}}, got {_kind(tool)}"
    unknown = sorted(set(tool) - _TOOL_KEYS)
    if unknown:
        return f".{unknown[0]}", "unknown key; a tool has `type` and `function`"
    if tool.get("type") != "function" and not (templates and _templated(tool.get("type"))):
        return ".type", f"expected 'function' (the only kind of tool), got {tool.get('type')!r}"
    function = tool.get("function")
    if templates and _templated(function):
        return None
    if not isinstance(function, dict):
        return ".function", (f"expected a mapping {{name, description, parameters}}, "
                             f"got {_kind(function)}")
    unknown = sorted(set(function) - _FUNCTION_KEYS)
    if unknown:
        return f".function.{unknown[0]}", ("unknown key; a function has `name`, "
                                           "`description`, `parameters` and `strict`")
    return _function_problem(function, templates)


def _function_problem(function: JSONDict, templates: bool) -> tuple[str, str] | None:
    name = function.get("name")
    if not (templates and _templated(name)):
        if not isinstance(name, str):
            return ".function.name", f"expected the tool's name as text, got {_kind(name)}"
        if not TOOL_NAME.fullmatch(name):
            return ".function.name", (f"expected 1 to 64 letters, digits, '_' or '-', "
                                      f"got {name[:80]!r}")
    description = function.get("description")
    if "description" in function and not isinstance(description, str):
        return ".function.description", f"expected text, got {_kind(description)}"
    parameters = function.get("parameters")
    if "parameters" in function and not (templates and _templated(parameters)):
        if not isinstance(parameters, dict):
            return ".function.parameters", (f"expected a JSON Schema object like "
                                            f"{{type: object, properties: {{...}}}}, "
                                            f"got {_kind(parameters)}")
        if not has_template(parameters):
            problem = _schema_problem(parameters)
            if problem is not None:
                return ".function.parameters", problem
    strict = function.get("strict")
    if "strict" in function and not isinstance(strict, bool):
        return ".function.strict", f"expected true or false, got {_kind(strict)}"
    return None


def _schema_problem(schema: JSONDict) -> str | None:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return f"not a valid JSON Schema: {exc.message}"
    return None


def has_template(value: JSON) -> bool:
    """Whether a template appears anywhere in ``value`` (checked when it renders)."""
    if isinstance(value, str):
        return expressions.is_template(value)
    if isinstance(value, list):
        return any(has_template(v) for v in value)
    if isinstance(value, dict):
        return any(has_template(v) for v in value.values())
    return False


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


# ------------------------------------------------------------------ the answer


def tool_calls(message: dict[str, Any], step: str, who: str) -> list[JSON]:
    """The ``tool_calls`` of a completion's message as ``[{"id", "name", "arguments"}]``.

    ``who`` names the call in errors (``step 'agent'`` or ``ctx.llm 'turn-2'``).  A
    call that is not a function call with a name fails the attempt as a response that
    is not a chat completion does; arguments that are not JSON fail it naming the call
    and the tool.  Both are retried."""
    found = message.get("tool_calls")
    if found is None:
        return []
    if not isinstance(found, list):
        raise _bad(step, who, f"message.tool_calls is {_kind(found)}, not a list")
    out: list[JSON] = []
    for i, call in enumerate(found):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise _bad(step, who, f"message.tool_calls[{i}] is not a function call "
                                  f"with a name")
        call_id = call.get("id")
        ident = call_id if isinstance(call_id, str) else f"#{i}"
        out.append({"id": ident, "name": function["name"],
                    "arguments": _arguments(function, ident, step, who)})
    return out


def _arguments(function: dict[str, Any], ident: str, step: str, who: str) -> JSON:
    text = function.get("arguments")
    if text is None or text == "":
        return {}
    if not isinstance(text, str):
        if isinstance(text, dict):  # some servers send the object itself
            return text
        raise StepError(f"{who}: the model's tool call {ident!r} of tool "
                        f"{function['name']!r} has arguments of type {_kind(text)}, "
                        f"not JSON text", step=step)
    try:
        parsed: JSON = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise StepError(f"{who}: the model's tool call {ident!r} of tool "
                        f"{function['name']!r} has arguments that are not JSON ({exc}); "
                        f"they begin {text[:80]!r}", step=step) from None
    return parsed


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _bad(step: str, who: str, message: str) -> StepError:
    return StepError(f"{who}: the response is not a chat completion ({message})", step=step)
