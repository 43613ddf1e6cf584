"""Notification targets: the ``notify:`` list of a definition and ``PLAIT_NOTIFY``,
parsed and validated (docs/notifications.md).  Pure: what validating a definition
needs, apart from delivery (``plait.observe.notify``)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..core.model import JSON
from ..core.suggest import did_you_mean
from ..errors import DefinitionError, Problem

__all__ = ["ENV", "EVENTS", "Target", "call_modules", "check_targets", "parse_targets",
           "targets_from_environment"]

ENV = "PLAIT_NOTIFY"
EVENTS = ("run_failed", "sla_breached", "approval_waiting", "alert")
_FIELDS = ("on", "url", "call")


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    events: frozenset[str]
    url: str | None = None
    call: str | None = None

    @property
    def name(self) -> str:
        return self.url if self.url is not None else str(self.call)

    @property
    def shown(self) -> str:
        """What history shows: a URL cut to scheme and host (its path may be a secret)."""
        if self.url is None:
            return str(self.call)
        parts = urlsplit(self.url)
        rest = "/..." if parts.path not in ("", "/") or parts.query else ""
        return f"{parts.scheme}://{parts.hostname or ''}{rest}"

    @property
    def key(self) -> str:
        return "sha256:" + hashlib.sha256(self.name.encode()).hexdigest()[:32]


# ------------------------------------------------------------------------ config


def parse_targets(value: JSON, where: str = "notify") -> tuple[list[Target], list[Problem]]:
    """The targets of a ``notify`` list and every problem found (each naming its place,
    e.g. ``notify[1].on[0]``)."""
    problems: list[Problem] = []
    if value is None:
        return [], problems
    if not isinstance(value, list):
        return [], [Problem(location=where, message="expected a list of targets",
                            hint="notify: [{on: [run_failed], url: https://...}]")]
    found: list[Target] = []
    for i, raw in enumerate(value):
        here = f"{where}[{i}]"
        if not isinstance(raw, dict):
            problems.append(Problem(location=here, message="expected a mapping with 'on' "
                                    "and 'url' or 'call'"))
            continue
        for name in raw:
            if name not in _FIELDS:
                hint = did_you_mean(str(name), _FIELDS)
                problems.append(Problem(location=f"{here}.{name}",
                                        message=f"unknown field {name!r} of a notify target",
                                        hint=hint or f"known: {', '.join(_FIELDS)}"))
        events = _events(raw.get("on"), f"{here}.on", problems)
        url, call = raw.get("url"), raw.get("call")
        if (url is None) == (call is None):
            problems.append(Problem(location=here, message="a notify target needs exactly "
                                    "one of 'url' and 'call'" + (
                                        ", not both" if url is not None else ""),
                                    hint="url: https://hooks.example/... or call: "
                                         "package.module:function"))
            continue
        if url is not None and not _good_url(url):
            problems.append(Problem(location=f"{here}.url",
                                    message=f"expected an http(s) URL, got {url!r}"))
            continue
        if call is not None and not _good_call(call):
            problems.append(Problem(location=f"{here}.call",
                                    message=f"expected 'module:function', got {call!r}",
                                    hint="e.g. call: mypkg.oncall:page"))
            continue
        if events:
            found.append(Target(events=frozenset(events),
                                url=url if isinstance(url, str) else None,
                                call=call if isinstance(call, str) else None))
    return found, problems


def _events(value: JSON, where: str, problems: list[Problem]) -> list[str]:
    if not isinstance(value, list) or not value:
        problems.append(Problem(location=where, message="expected a non-empty list of "
                                "events", hint=f"events: {', '.join(EVENTS)}"))
        return []
    found = []
    for j, event in enumerate(value):
        if event in EVENTS:
            found.append(str(event))
            continue
        hint = did_you_mean(str(event), EVENTS) if isinstance(event, str) else None
        problems.append(Problem(location=f"{where}[{j}]",
                                message=f"unknown event {event!r}",
                                hint=hint or f"events: {', '.join(EVENTS)}"))
    return found


def _good_url(url: JSON) -> bool:
    if not isinstance(url, str):
        return False
    try:
        parts = urlsplit(url)
        port = parts.port  # ValueError past 65535
    except ValueError:  # an IPv6 bracket left open, a port that is not a number
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname) and port != 0


def _good_call(call: JSON) -> bool:
    if not isinstance(call, str):
        return False
    module, sep, func = call.partition(":")
    return bool(sep and module and func and all(p.isidentifier() for p in module.split("."))
                and all(p.isidentifier() for p in func.split(".")))


def check_targets(value: JSON) -> list[Problem]:
    """The problems of a definition's ``notify:`` list (for validation)."""
    return parse_targets(value)[1]


def targets_from_environment(environ: Mapping[str, str] | None = None) -> list[Target]:
    """The process-wide targets of ``PLAIT_NOTIFY``; DefinitionError when it is not a
    JSON list of valid targets."""
    text = (os.environ if environ is None else environ).get(ENV, "").strip()
    if not text:
        return []
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DefinitionError([Problem(location=ENV, message=f"not JSON: {exc}")],
                              source=ENV) from exc
    found, problems = parse_targets(value, ENV)
    if problems:
        raise DefinitionError(problems, source=ENV)
    return found


def call_modules(value: JSON) -> list[tuple[str, str]]:
    """``(location, module)`` of each ``call:`` target of a ``notify:`` list: what an
    untrusted definition (registered over the API: docs/security.md) must have allowed by
    ``PLAIT_ALLOWED_MODULES`` as for its ``python`` steps, since a notification calls
    the function in the server's process."""
    found: list[tuple[str, str]] = []
    targets, _ = parse_targets(value)
    for i, target in enumerate(targets):
        if target.call is not None:
            found.append((f"notify[{i}].call", target.call.partition(":")[0]))
    return found
