"""The rules for untrusted definitions: those registered over the server's API (and
any definition the server executes, however it was stored).

One walker (``sites``) visits every step-like mapping of a definition at any depth:
its steps, ``defaults``, each step's ``fallback``, a map's inline ``step``, the inline
``definition`` of a ``workflow`` or ``loop`` step and everything in it, and its
``notify`` targets.  The rules judge each place (``untrusted_problems``):

- a ``call`` (python step, fallback, notify target) is ``module:function``: the module
  matches a prefix of ``TrustPolicy.allowed_modules``, and after the colon comes one
  public name (no dots, no leading underscore).  That the function is defined in that
  very module (not re-exported) needs an import: the runtime checks it
  (``steps.binding.import_untrusted_call``);
- an ``llm`` step's ``api_key_env`` is listed in ``allowed_key_envs`` and never names
  a ``PLAIT_*`` variable;
- ``secrets.NAME`` is read only in fields that leave the process (``http`` headers,
  params, json, body; ``llm`` messages, prompt), only for names listed in
  ``allowed_secrets``, and only by name (never ``secrets[expr]`` nor ``secrets``
  passed whole);
- ``limits`` (of the definition and of every inline child) ask for no more than
  ``caps``;
- a URL written out is judged by the ``url_check`` the caller passes (the network
  policy lives outside the core).

Pure: no import, no environment, no network.  Each refusal is a ``Problem`` naming
its location (``steps[0].step.definition.steps[1].call``) and the rule.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any, cast

from ..errors import Problem
from . import expressions
from .model import JSON, Limits
from .sizes import parse_size

__all__ = ["CAP_SETTINGS", "ENGINE_LIMITS", "KEY_ENVS_SETTING", "MODULES_SETTING",
           "OUTGOING_FIELDS", "SECRETS_SETTING", "Site", "TrustPolicy", "capped",
           "call_problem", "key_env_problem", "module_allowed", "name_problem", "sites",
           "untrusted_problems"]

MODULES_SETTING = "PLAIT_ALLOWED_MODULES"
KEY_ENVS_SETTING = "PLAIT_ALLOWED_KEY_ENVS"
SECRETS_SETTING = "PLAIT_ALLOWED_SECRETS"
# the server setting that caps each limit
CAP_SETTINGS: Mapping[str, str] = {
    "max_steps": "PLAIT_MAX_STEPS", "max_depth": "PLAIT_MAX_DEPTH",
    "max_map_items": "PLAIT_MAX_MAP_ITEMS",
    "max_subworkflow_depth": "PLAIT_MAX_SUBWORKFLOW_DEPTH",
    "max_output_bytes": "PLAIT_MAX_OUTPUT_BYTES"}
# per step type, the fields whose rendered value leaves the process (sent to a host
# the network policy allows): the only places a secret may be read
OUTGOING_FIELDS: Mapping[str, frozenset[str]] = {
    "http": frozenset({"headers", "params", "json", "body"}),
    "llm": frozenset({"messages", "prompt"})}
URL_FIELDS = ("url", "base_url")
NETWORK_TYPES = frozenset({"http", "llm"})

# what a place is
DEFINITION, STEP, DEFAULTS, FALLBACK, NOTIFY = ("definition", "step", "defaults",
                                                "fallback", "notify")
# keys of a step that are places of their own (not scanned as the step's fields)
_NESTED = frozenset({"step", "definition", "fallback"})
_DEFINITION_NESTED = frozenset({"steps", "defaults", "notify"})
# mappings under `defaults` that are fields of every step (any other mapping there is
# the defaults of one step type: a place of its own)
_DEFAULT_MAPPINGS = frozenset({"retry", "circuit_breaker", *_NESTED})

ENGINE_LIMITS = Limits()  # the engine's default limits: the default caps
UrlCheck = Callable[[str, str], Problem | None]  # (url, location) -> its refusal


@dataclass(frozen=True, slots=True, kw_only=True)
class TrustPolicy:
    """What an untrusted definition may use (see the module docstring).  Every
    default allows nothing but the engine's default limits."""

    allowed_modules: tuple[str, ...] = ()
    allowed_key_envs: tuple[str, ...] = ()
    allowed_secrets: tuple[str, ...] = ()
    caps: Limits = ENGINE_LIMITS


@dataclass(frozen=True, slots=True)
class Site:
    """One step-like mapping of a definition: where it is, what it is, its body."""

    where: str
    kind: str
    body: Mapping[str, JSON]


def _at(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def sites(data: object) -> Iterator[Site]:
    """Every step-like mapping of ``data`` at any depth, outermost first (iterative:
    a deeply nested definition cannot exhaust the stack)."""
    todo: list[tuple[str, str, object]] = [("", DEFINITION, data)]
    while todo:
        where, kind, body = todo.pop()
        if not isinstance(body, dict):
            continue
        yield Site(where, kind, cast("dict[str, JSON]", body))
        found = _definition_parts(where, body) if kind == DEFINITION \
            else _step_parts(where, body) if kind in (STEP, DEFAULTS) else []
        todo.extend(reversed(found))


def _definition_parts(where: str, body: dict[str, object]) -> list[tuple[str, str, object]]:
    defaults = body.get("defaults")
    found: list[tuple[str, str, object]] = [(_at(where, "defaults"), DEFAULTS, defaults)]
    if isinstance(defaults, dict):  # `defaults.llm`: judged as a step of that type
        found += [(_at(where, f"defaults.{key}"), DEFAULTS, {**value, "type": key})
                  for key, value in defaults.items() if _typed_defaults(key, value)]
    for key, kind in (("steps", STEP), ("notify", NOTIFY)):
        items = body.get(key)
        if isinstance(items, list):
            found += [(f"{_at(where, key)}[{i}]", kind, item) for i, item in enumerate(items)]
    return found


def _typed_defaults(key: str, value: object) -> bool:
    """Whether ``defaults.KEY`` holds the defaults of the steps of type KEY."""
    return isinstance(value, dict) and key not in _DEFAULT_MAPPINGS \
        and not key.startswith("x-")


def _step_parts(where: str, body: dict[str, object]) -> list[tuple[str, str, object]]:
    return [(_at(where, "fallback"), FALLBACK, body.get("fallback")),
            (_at(where, "step"), STEP, body.get("step")),
            (_at(where, "definition"), DEFINITION, body.get("definition"))]


def untrusted_problems(data: object, policy: TrustPolicy, *,
                       url_check: UrlCheck | None = None) -> list[Problem]:
    """Every place of ``data`` (a raw definition) that breaks a rule of ``policy``."""
    problems: list[Problem] = []
    for site in sites(data):
        problems += _site_problems(site, policy, url_check)
    return problems


def _site_problems(site: Site, policy: TrustPolicy,
                   url_check: UrlCheck | None) -> list[Problem]:
    body, where = site.body, site.where
    if site.kind == DEFINITION:
        return _limit_problems(body.get("limits"), _at(where, "limits"), policy.caps) \
            + _secret_problems(body, where, policy, skip=_DEFINITION_NESTED)
    skip = _NESTED if site.kind != DEFAULTS or "type" in body else \
        _NESTED | {k for k, v in body.items() if _typed_defaults(k, v)}
    problems = _secret_problems(body, where, policy, skip=skip)
    kind = body.get("type") if site.kind in (STEP, DEFAULTS) else None
    if "call" in body:  # a python step's, a fallback's, a notify target's (any type's)
        problems += call_problem(body.get("call"), _at(where, "call"), policy)
    if "api_key_env" in body:  # an llm step's (any type's that reads a key)
        problems += key_env_problem(body.get("api_key_env"), _at(where, "api_key_env"),
                                    policy)
    urls = URL_FIELDS if kind in NETWORK_TYPES else ("url",) if site.kind == NOTIFY else ()
    for field in urls:
        url = body.get(field)
        if url_check is not None and isinstance(url, str):
            problem = url_check(url, _at(where, field))
            problems += [problem] if problem is not None else []
    return problems


# ---------------------------------------------------------------- calls


def module_allowed(module: str, prefixes: tuple[str, ...]) -> bool:
    """Whether ``module`` is one of ``prefixes`` or inside one (``pkg`` allows
    ``pkg`` and ``pkg.sub``, not ``pkgx``)."""
    for prefix in prefixes:
        stem = prefix.strip().rstrip(".")
        if stem and (module == stem or module.startswith(stem + ".")):
            return True
    return False


def call_problem(call: JSON, where: str, policy: TrustPolicy) -> list[Problem]:
    """The refusals of one ``call`` (none for a value that is not 'module:function'
    at all: validation names it)."""
    if not isinstance(call, str) or ":" not in call:
        return []
    module, _, name = call.partition(":")
    problems = []
    if not module_allowed(module.strip(), policy.allowed_modules):
        listed = ", ".join(policy.allowed_modules) or f"none: {MODULES_SETTING} is not set"
        problems.append(Problem(location=where, message=(
            f"module {module.strip()!r} may not be called by a definition registered over "
            f"the API (allowed module prefixes: {listed}); add it to {MODULES_SETTING} to "
            f"allow it")))
    shape = name_problem(name)
    if shape is not None:
        problems.append(Problem(location=where, message=f"{call!r}: {shape}"))
    return problems


def name_problem(name: str) -> str | None:
    """Why the part of an untrusted ``call`` after the colon is refused, or None."""
    if "." in name:
        return ("a definition registered over the API calls 'module:function' with one "
                "name after the colon: attribute paths (dots) are refused")
    if name.startswith("_"):
        return ("a definition registered over the API may not call a private name "
                "(one starting with '_')")
    if not name.isidentifier():
        return f"{name!r} is not a function name"
    return None


# ---------------------------------------------------------------- keys and secrets


def key_env_problem(name: JSON, where: str, policy: TrustPolicy) -> list[Problem]:
    """The refusal of an ``llm`` step's ``api_key_env``."""
    if not isinstance(name, str):
        return []  # validation names it
    if name.upper().startswith("PLAIT_"):
        return [Problem(location=where, message=(
            f"api_key_env {name!r}: a definition registered over the API may never send "
            f"a PLAIT_* variable (the server's own settings and secrets) as a key, even "
            f"when {KEY_ENVS_SETTING} lists it"))]
    if name not in policy.allowed_key_envs:
        listed = ", ".join(policy.allowed_key_envs) or f"none: {KEY_ENVS_SETTING} is not set"
        return [Problem(location=where, message=(
            f"api_key_env {name!r} is not a key variable a definition registered over "
            f"the API may use (allowed: {listed}); add it to {KEY_ENVS_SETTING} to allow "
            f"it"))]
    return []


def _secret_problems(body: Mapping[str, JSON], where: str, policy: TrustPolicy, *,
                     skip: frozenset[str]) -> list[Problem]:
    kind = body.get("type")
    outgoing = OUTGOING_FIELDS.get(kind, frozenset()) if isinstance(kind, str) else \
        frozenset()
    problems: list[Problem] = []
    for key, value in body.items():
        # an `x-` key is ignored (not used); a nested place is judged as a place of its
        # own, unless it is a template (a `definition` written at run time)
        if (key in skip and not isinstance(value, str)) or key.startswith("x-"):
            continue
        for path, text in expressions.templates_in(value):
            problems += _template_problems(text, f"{_at(where, key)}{path}",
                                           key in outgoing, policy)
    return problems


def _template_problems(text: str, where: str, outgoing: bool,
                       policy: TrustPolicy) -> list[Problem]:
    from . import templates  # Jinja2: loaded with the first template met

    try:
        reads = templates.secrets_read(text)
    except templates.TemplateSyntaxError:
        return []  # validation names it with its line and column
    problems = []
    if reads.dynamic:
        problems.append(Problem(location=where, message=(
            "reads `secrets` other than as secrets.NAME (a computed key, `secrets` passed "
            "whole, a method): a definition registered over the API must name each "
            "secret it reads")))
    for name in sorted(reads.names):
        if not outgoing:
            problems.append(Problem(location=where, message=(
                f"secrets.{name}: a definition registered over the API may read secrets "
                f"only in fields that leave the process (http headers, params, json, "
                f"body; llm messages, prompt), never in outputs, conditions or any other "
                f"field")))
        elif name not in policy.allowed_secrets:
            listed = ", ".join(policy.allowed_secrets) or f"none: {SECRETS_SETTING} is not set"
            problems.append(Problem(location=where, message=(
                f"secrets.{name} is not a secret a definition registered over the API may "
                f"read (allowed: {listed}); add it to {SECRETS_SETTING} to allow it")))
    return problems


# ---------------------------------------------------------------- limits


def _limit_problems(limits: JSON, where: str, caps: Limits) -> list[Problem]:
    if not isinstance(limits, dict):
        return []
    problems = []
    for key, setting in CAP_SETTINGS.items():
        asked = _asked(key, limits.get(key))
        cap = getattr(caps, key)
        if asked is not None and asked > cap:
            problems.append(Problem(location=f"{where}.{key}", message=(
                f"asks for {asked}, over the cap of {cap} this server allows ({setting}): "
                f"a definition registered over the API may not raise it")))
    return problems


def _asked(key: str, value: JSON) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return parse_size(value) if key == "max_output_bytes" else \
            value if isinstance(value, int) else None
    except ValueError:
        return None  # validation names it


def capped(limits: Limits, caps: Limits | None) -> Limits:
    """``limits`` with each value at most its cap (``caps`` None: as they are)."""
    if caps is None:
        return limits
    values: dict[str, Any] = {f.name: _least(getattr(limits, f.name), getattr(caps, f.name))
                              for f in fields(Limits)}
    return limits if values == {f.name: getattr(limits, f.name) for f in fields(Limits)} \
        else Limits(**values)


def _least(value: int | None, cap: int | None) -> int | None:
    """The smaller of a limit and its cap, None standing for no bound."""
    if value is None or cap is None:
        return cap if value is None else value
    return min(value, cap)
