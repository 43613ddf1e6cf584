"""Where steps that talk HTTP may connect: one policy for every such step type.

A ``NetworkPolicy`` is a value; the engine builds one from the environment when it is
given none (``NetworkPolicy.from_environment()``), so ``plait run`` and ``wf.run`` are
protected by default (docs/security.md).  The step types that talk HTTP (``http``,
``llm``) and notifications connect only through ``plait.steps.netclient``, which asks this
module about every TCP connection, each redirect hop included, *before* connecting:

1. ``check_host`` judges the host name as the URL gives it (``only_hosts``, metadata
   names such as ``metadata.google.internal``);
2. the name is resolved once, and ``check_address`` judges every address it resolves to
   (the client then connects to exactly those addresses, so a DNS answer cannot change
   between the check and the connection).

Checking the *resolved* addresses is what makes every spelling of an address equal:
``2852039166``, ``0xa9fea9fe``, ``169.254.43518`` and ``169.254.169.254`` all resolve to
the same address.  IPv6 addresses that carry an IPv4 address (IPv4-mapped
``::ffff:a.b.c.d``, IPv4-compatible ``::a.b.c.d``, SIIT ``::ffff:0:a.b.c.d``, NAT64
``64:ff9b::/96`` and ``64:ff9b:1::/48``, 6to4 ``2002::/16``, Teredo) are judged as that
IPv4 address too.

Profiles: ``NetworkPolicy()`` is the default (link-local, cloud metadata and the
unspecified address are refused; loopback and private ranges are allowed, so local
services and tests work); ``UNTRUSTED`` also refuses loopback, private, CGNAT, multicast
and reserved ranges, for definitions registered by people who must not reach the host's
own network (the server's API-registered definitions).

Environment (read by ``from_environment``): ``PLAIT_ALLOWED_HOSTS`` (comma-separated
host names, ``*.suffix`` wildcards, IP addresses, CIDRs) are exempt from every denial;
``PLAIT_DENIED_NETWORKS`` (comma-separated CIDRs) are refused in addition.

A refusal is a ``NetworkRefused`` (never retried) naming the host, the address and the
rule, and how to allow it.
"""

from __future__ import annotations

import functools
import ipaddress
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from ..errors import NetworkRefused

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

ALLOWED_HOSTS_ENV = "PLAIT_ALLOWED_HOSTS"
DENIED_NETWORKS_ENV = "PLAIT_DENIED_NETWORKS"

# Link-local (where every cloud's metadata service lives), the unspecified addresses
# (connecting to 0.0.0.0 reaches the local host on Linux), and metadata services that
# are not link-local (AWS over IPv6, Alibaba Cloud).
DEFAULT_DENIED_NETWORKS: tuple[str, ...] = (
    "169.254.0.0/16", "fe80::/10", "0.0.0.0/8", "::/128",
    "fd00:ec2::254/128", "100.100.100.200/32",
)
# Names of metadata services, refused before they are resolved (a resolver or a hosts
# file may map them anywhere).
METADATA_HOSTS: tuple[str, ...] = (
    "metadata.google.internal", "metadata.goog", "metadata", "instance-data",
    "instance-data.ec2.internal",
)
UNTRUSTED_DENIED_NETWORKS: tuple[str, ...] = (
    *DEFAULT_DENIED_NETWORKS,
    "127.0.0.0/8", "::1/128",                                   # loopback
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7",  # private
    "100.64.0.0/10",                                            # carrier-grade NAT
    "198.18.0.0/15", "192.0.0.0/24", "240.0.0.0/4",             # benchmark, reserved
    "224.0.0.0/4", "ff00::/8",                                  # multicast
)
UNTRUSTED_DENIED_HOSTS: tuple[str, ...] = (*METADATA_HOSTS, "localhost", "*.localhost")

_NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))
_SIIT = ipaddress.IPv6Network("::ffff:0:0:0/96")
_COMPATIBLE = ipaddress.IPv6Network("::/96")


@dataclass(frozen=True, slots=True, kw_only=True)
class NetworkPolicy:
    """Where HTTP-talking steps may connect (see the module docstring).

    ``denied_networks``: CIDRs no connection may reach.  ``denied_hosts``: host names
    (``*.suffix`` wildcards too) refused before resolution.  ``allowed_hosts``: names,
    wildcards, addresses and CIDRs exempt from both.  ``only_hosts``: when not empty,
    every host it does not name is refused (an allow-list; exemptions do not widen it).
    Rules are checked when first used: a malformed one refuses every connection."""

    denied_networks: tuple[str, ...] = DEFAULT_DENIED_NETWORKS
    denied_hosts: tuple[str, ...] = METADATA_HOSTS
    allowed_hosts: tuple[str, ...] = ()
    only_hosts: tuple[str, ...] = ()
    # where the rules came from, for messages ("PLAIT_DENIED_NETWORKS", ...)
    sources: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None, *,
                         base: NetworkPolicy | None = None) -> NetworkPolicy:
        """``base`` (default: the default profile) with ``PLAIT_ALLOWED_HOSTS`` exempted
        and ``PLAIT_DENIED_NETWORKS`` denied."""
        env = os.environ if environ is None else environ
        policy = base if base is not None else cls()
        allowed = _listed(env.get(ALLOWED_HOSTS_ENV, ""))
        denied = _listed(env.get(DENIED_NETWORKS_ENV, ""))
        if not allowed and not denied:
            return policy
        return replace(policy, allowed_hosts=policy.allowed_hosts + allowed,
                       denied_networks=policy.denied_networks + denied,
                       sources=policy.sources
                       + tuple((rule, ALLOWED_HOSTS_ENV) for rule in allowed)
                       + tuple((rule, DENIED_NETWORKS_ENV) for rule in denied))

    def check_host(self, host: str, *, step: str | None = None) -> bool:
        """Judge a host name before it is resolved.  True: the host is exempt (its
        addresses need no check); False: check every address it resolves to.  Raises
        NetworkRefused when the name itself is refused."""
        rules = _rules(self)
        name = normal_host(host)
        if rules.only_hosts and not _name_matches(name, rules.only_hosts) \
                and not _address_in(name, rules.only_networks):
            raise NetworkRefused(
                _where(step) + f"host {name!r} is not one of the only hosts allowed "
                f"({', '.join(self.only_hosts)})", step=step, host=name, address=None,
                rule="only_hosts")
        if _name_matches(name, rules.allowed_names) or _address_in(name, rules.allowed):
            return True
        denied = _first_match(name, rules.denied_names)
        if denied is not None:
            raise NetworkRefused(
                _where(step) + f"host {name!r} is a cloud metadata or denied host name "
                f"(rule {denied!r}); {_fix(name)}", step=step, host=name, address=None,
                rule=denied)
        return False

    def check_address(self, host: str, address: str, *, step: str | None = None) -> None:
        """Raise NetworkRefused when ``address`` (resolved from ``host``) is inside a
        denied network and not exempt."""
        rules = _rules(self)
        shown = address.split("%", 1)[0]  # no IPv6 zone id
        ip = ipaddress.ip_address(shown)
        same = (ip, ip.ipv4_mapped) if isinstance(ip, ipaddress.IPv6Address) \
            and ip.ipv4_mapped is not None else (ip,)  # a mapped address is its IPv4 one
        if any(c in net for c in same for net in rules.allowed if net.version == c.version):
            return
        for candidate in (ip, *embedded_ipv4(ip)):
            for net in rules.denied:
                if net.version == candidate.version and candidate in net:
                    via = "" if candidate == ip else f" (it carries {candidate})"
                    raise NetworkRefused(
                        _where(step) + f"refused to connect to {shown} for host "
                        f"{normal_host(host)!r}{via}: inside denied network {net}"
                        f"{self._source(str(net))}; {_fix(shown)}",
                        step=step, host=normal_host(host), address=shown, rule=str(net))

    def _source(self, rule: str) -> str:
        for given, source in self.sources:
            if _same_network(given, rule):
                return f" (from {source})"
        return ""


DEFAULT = NetworkPolicy()
UNTRUSTED = NetworkPolicy(denied_networks=UNTRUSTED_DENIED_NETWORKS,
                          denied_hosts=UNTRUSTED_DENIED_HOSTS)


def normal_host(host: str) -> str:
    """Lower case, no trailing dot, no IPv6 brackets."""
    return host.strip().strip("[]").lower().rstrip(".")


def host_problem(host: str) -> str | None:
    """Why ``host`` (as sent: ASCII, IDNA-encoded) can name no address, or None: a DNS
    name has labels of 1 to 63 characters, 253 characters in all (Python's resolver
    refuses others with a UnicodeError).  Address literals pass."""
    name = host.strip("[]").removesuffix(".")
    if ":" in name or not name:  # an IPv6 address (or the root, reported elsewhere)
        return None
    if len(name) > 253:
        return f"the host name has {len(name)} characters, over 253"
    if any(not 1 <= len(label) <= 63 for label in name.split(".")):
        return "the host name has an empty label or one over 63 characters"
    return None


def embedded_ipv4(ip: IPAddress) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries (see the module docstring)."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return []
    out: list[ipaddress.IPv4Address] = []
    low = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.ipv4_mapped is not None:
        out.append(ip.ipv4_mapped)
    if ip in _SIIT or any(ip in net for net in _NAT64):
        out.append(low)
    if ip in _NAT64[1]:  # a /48 prefix (RFC 6052): bits 48-63 and 72-87, around the u-octet
        n = int(ip)
        out.append(ipaddress.IPv4Address(((n >> 64) & 0xFFFF) << 16 | (n >> 40) & 0xFFFF))
    if ip in _COMPATIBLE and int(ip) > 1:  # ::a.b.c.d; :: and ::1 are themselves
        out.append(low)
    if ip.sixtofour is not None:
        out.append(ip.sixtofour)
    if ip.teredo is not None:
        out.append(ip.teredo[1])
    return out


# ------------------------------------------------------------------ compiled rules


@dataclass(frozen=True, slots=True)
class _Rules:
    denied: tuple[IPNetwork, ...]
    denied_names: tuple[str, ...]
    allowed: tuple[IPNetwork, ...]
    allowed_names: tuple[str, ...]
    only_hosts: tuple[str, ...]
    only_networks: tuple[IPNetwork, ...]


@functools.lru_cache(maxsize=32)
def _rules(policy: NetworkPolicy) -> _Rules:
    """The policy's rules parsed once; NetworkRefused names a malformed one."""
    allowed_nets, allowed_names = _split(policy.allowed_hosts, policy, "allowed_hosts")
    only_nets, only_names = _split(policy.only_hosts, policy, "only_hosts")
    return _Rules(denied=tuple(_network(c, policy, "denied_networks")
                               for c in policy.denied_networks),
                  denied_names=tuple(normal_host(h) for h in policy.denied_hosts),
                  allowed=allowed_nets, allowed_names=allowed_names,
                  only_hosts=only_names + tuple(str(n) for n in only_nets),
                  only_networks=only_nets)


def _split(entries: Iterable[str], policy: NetworkPolicy,
           what: str) -> tuple[tuple[IPNetwork, ...], tuple[str, ...]]:
    """Host rules split into networks (addresses, CIDRs) and names."""
    nets: list[IPNetwork] = []
    names: list[str] = []
    for entry in entries:
        text = normal_host(entry)
        if _looks_like_network(text):
            nets.append(_network(text, policy, what))
        else:
            names.append(text)
    return tuple(nets), tuple(names)


def _looks_like_network(text: str) -> bool:
    head = text.split("/", 1)[0]
    return ":" in head or head.replace(".", "").isdigit()


def _network(cidr: str, policy: NetworkPolicy, what: str) -> IPNetwork:
    try:
        return ipaddress.ip_network(normal_host(cidr), strict=False)
    except ValueError as exc:
        source = next((s for rule, s in policy.sources if rule == cidr), what)
        raise NetworkRefused(f"network policy: {source} has a bad entry {cidr!r} "
                             f"({exc}); every connection is refused until it is fixed",
                             host=None, address=None, rule=cidr) from None


def _name_matches(name: str, rules: Iterable[str]) -> bool:
    return _first_match(name, rules) is not None


def _first_match(name: str, rules: Iterable[str]) -> str | None:
    """The first rule naming ``name`` exactly or by a ``*.domain`` wildcard (any depth;
    the wildcard does not match the domain itself)."""
    for rule in rules:
        if name == rule or (rule.startswith("*.") and name.endswith(rule[1:])):
            return rule
    return None


def _address_in(host: str, networks: Iterable[IPNetwork]) -> bool:
    """True when ``host`` is an address literal inside one of ``networks``."""
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return any(ip.version == net.version and ip in net for net in networks)


def _same_network(given: str, rule: str) -> bool:
    try:
        return str(ipaddress.ip_network(normal_host(given), strict=False)) == rule
    except ValueError:
        return False


def _listed(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _where(step: str | None) -> str:
    return f"step {step!r}: " if step else ""


def _fix(what: str) -> str:
    return f"add {what} to {ALLOWED_HOSTS_ENV} to allow it"
