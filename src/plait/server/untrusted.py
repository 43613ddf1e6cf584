"""The rules for definitions registered over the API (SPEC 9): they are untrusted.

- ``python`` steps (and ``fallback: {call: ...}`` of any step) may only call modules
  that match a prefix of ``PLAIT_ALLOWED_MODULES`` (``pkg`` allows ``pkg`` and
  ``pkg.sub``; unset: none), checked before anything is imported;
- ``http`` and ``llm`` steps whose URL is written out (no template) may not name a
  loopback, private, link-local or metadata address (every spelling: decimal, hex,
  octal, IPv4-mapped IPv6...) unless ``PLAIT_ALLOWED_HOSTS`` lists it.  A URL built by a
  template, a host name and every redirect are judged when the run connects: the runs
  the server executes use the same strict policy (``ServerSettings.http_policy``).

Each refusal is a ``Problem`` with its location, listed with the validator's.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from ..errors import NetworkRefused, Problem
from ..runtime.netpolicy import NetworkPolicy

NETWORK_STEP_TYPES = frozenset({"http", "llm"})
URL_FIELDS = ("url", "base_url")


def module_allowed(module: str, prefixes: Sequence[str]) -> bool:
    for prefix in prefixes:
        stem = prefix.rstrip(".")
        if stem and (module == stem or module.startswith(stem + ".")):
            return True
    return False


def untrusted_problems(data: object, *, allowed_modules: Sequence[str],
                       policy: NetworkPolicy) -> list[Problem]:
    """What the untrusted rules refuse in a raw definition (a dict from JSON or YAML)."""
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        return []
    problems: list[Problem] = []
    defaults = data.get("defaults")
    if isinstance(defaults, dict):
        problems += _fallback_problem(defaults.get("fallback"), "defaults.fallback.call",
                                      allowed_modules)
    from ..observe.notify_targets import call_modules

    for where, module in call_modules(data.get("notify")):  # called in this process
        problems += _call_problem(f"{module}:_", where, allowed_modules)
    for i, step in enumerate(data["steps"]):
        if not isinstance(step, dict):
            continue
        where = f"steps[{i}]"
        if step.get("type") == "python":
            problems += _call_problem(step.get("call"), f"{where}.call", allowed_modules)
        problems += _fallback_problem(step.get("fallback"), f"{where}.fallback.call",
                                      allowed_modules)
        if step.get("type") in NETWORK_STEP_TYPES:
            for field in URL_FIELDS:
                url = step.get(field)
                if isinstance(url, str):
                    problem = url_problem(url, f"{where}.{field}", policy)
                    if problem is not None:
                        problems.append(problem)
    return problems


def _fallback_problem(fallback: Any, where: str, allowed: Sequence[str]) -> list[Problem]:
    if isinstance(fallback, dict) and "call" in fallback:
        return _call_problem(fallback["call"], where, allowed)
    return []


def _call_problem(call: Any, where: str, allowed: Sequence[str]) -> list[Problem]:
    if not isinstance(call, str) or ":" not in call:
        return []  # the validator names the malformed call
    module = call.split(":", 1)[0].strip()
    if module_allowed(module, allowed):
        return []
    listed = ", ".join(allowed) if allowed else "none: PLAIT_ALLOWED_MODULES is not set"
    return [Problem(location=where, message=(
        f"module {module!r} may not be called by a definition registered over the API "
        f"(allowed module prefixes: {listed}); add it to PLAIT_ALLOWED_MODULES to allow "
        f"it"))]


def url_problem(url: str, where: str, policy: NetworkPolicy) -> Problem | None:
    """The refusal of a literal URL's host, or None (templates are judged at run time)."""
    if "{{" in url or "{%" in url:
        return None
    try:
        host = urlsplit(url.strip()).hostname
    except ValueError as exc:
        return Problem(location=where, message=f"invalid URL {url!r}: {exc}")
    if not host:
        return None
    try:
        if policy.check_host(host):
            return None
        for address in numeric_addresses(host):
            policy.check_address(host, address)
    except NetworkRefused as exc:
        return Problem(location=where, message=str(exc))
    return None


def numeric_addresses(host: str) -> list[str]:
    """The addresses a host that is an address literal stands for, in any spelling the
    resolver accepts (``2130706433``, ``0x7f.1``, ``[::ffff:7f00:1]``), without DNS;
    empty for a host name."""
    try:
        found = socket.getaddrinfo(host.strip("[]"), None, flags=socket.AI_NUMERICHOST)
    except (socket.gaierror, UnicodeError, ValueError):
        return []
    return sorted({str(info[4][0]) for info in found})
