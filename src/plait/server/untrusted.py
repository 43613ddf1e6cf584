"""The rules for definitions registered over the API: they are untrusted.

The rules themselves are the core's (``plait.core.trust``: one walker over every
step-like mapping at any depth, and the rules it applies).  This module gives them
what lives at the edge:

- the network check of URLs written out: an ``http`` or ``llm`` step's URL, a
  ``notify`` target's URL, may not name a loopback, private, link-local or metadata
  address (every spelling: decimal, hex, octal, IPv4-mapped IPv6...) unless
  ``PLAIT_ALLOWED_HOSTS`` lists it.  A URL built by a template, a host name and every
  redirect are judged when the run connects: the runs the server executes use the
  same strict policy (``ServerSettings.http_policy``);
- the import check of every ``call`` once the rules allow its module: the function
  must be defined in the module it is named by (``import_untrusted_call``).

Each refusal is a ``Problem`` with its location, listed with the validator's.
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from ..core import trust
from ..errors import NetworkRefused, Problem
from ..steps.binding import import_untrusted_call
from ..steps.netpolicy import NetworkPolicy
from .settings import ServerSettings


def untrusted_problems(data: object, settings: ServerSettings) -> list[Problem]:
    """What the rules refuse in a raw definition (a dict from JSON or YAML)."""
    policy = settings.http_policy
    return trust.untrusted_problems(
        data, settings.trust, url_check=lambda url, where: url_problem(url, where, policy))


def call_problems(data: object) -> list[Problem]:
    """For a definition the rules allow: each ``call`` (at any depth) whose function
    does not import, or is defined in another module than the one it is named by."""
    problems = []
    for site in trust.sites(data):
        call = site.body.get("call")
        if not isinstance(call, str) or ":" not in call:
            continue
        try:
            import_untrusted_call(call)
        except ImportError as exc:
            where = f"{site.where}.call" if site.where else "call"
            problems.append(Problem(location=where, message=str(exc)))
    return problems


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
