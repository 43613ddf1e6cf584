"""The network policy's decisions, host by host and address by address (no network)."""

from __future__ import annotations

import pytest

from plait.errors import NetworkRefused
from plait.steps.netpolicy import DEFAULT, UNTRUSTED, NetworkPolicy


def refusal(policy: NetworkPolicy, host: str, address: str | None = None) -> NetworkRefused:
    """The refusal of connecting to ``host`` (resolved to ``address``, default itself)."""
    with pytest.raises(NetworkRefused) as excinfo:
        if not policy.check_host(host, step="call"):
            policy.check_address(host, address or host, step="call")
    return excinfo.value


def allowed(policy: NetworkPolicy, host: str, address: str | None = None) -> bool:
    try:
        if not policy.check_host(host):
            policy.check_address(host, address or host)
    except NetworkRefused:
        return False
    return True


@pytest.mark.parametrize(("address", "carried"), [
    ("169.254.169.254", None),
    ("169.254.0.1", None),
    ("fe80::1", None),
    ("fe80::1%eth0", None),
    ("0.0.0.0", None),
    ("::", None),
    ("fd00:ec2::254", None),
    ("100.100.100.200", None),
    ("::ffff:169.254.169.254", "169.254.169.254"),     # IPv4-mapped
    ("::169.254.169.254", "169.254.169.254"),          # IPv4-compatible
    ("::ffff:0:a9fe:a9fe", "169.254.169.254"),         # SIIT
    ("64:ff9b::a9fe:a9fe", "169.254.169.254"),         # NAT64
    ("2002:a9fe:a9fe::1", "169.254.169.254"),          # 6to4
])
def test_the_default_refuses_link_local_metadata_and_unspecified(
        address: str, carried: str | None) -> None:
    error = refusal(DEFAULT, address)
    shown = address.split("%")[0]
    assert error.address == shown
    assert f"refused to connect to {shown}" in str(error)
    assert str(error).startswith("step 'call': ")
    assert "PLAIT_ALLOWED_HOSTS" in str(error)  # the fix
    if carried is not None:
        assert f"it carries {carried}" in str(error)


@pytest.mark.parametrize("host", ["metadata.google.internal", "METADATA.Google.Internal.",
                                  "metadata", "metadata.goog", "instance-data"])
def test_the_default_refuses_metadata_names_before_resolving(host: str) -> None:
    error = refusal(DEFAULT, host, "203.0.113.7")
    assert error.address is None
    assert error.host == host.lower().rstrip(".")
    assert "metadata" in str(error)


@pytest.mark.parametrize("address", ["127.0.0.1", "::1", "10.1.2.3", "192.168.1.1",
                                     "172.16.0.1", "fc00::1", "100.64.0.1", "8.8.8.8",
                                     "2001:db8::1", "::ffff:127.0.0.1"])
def test_the_default_allows_loopback_private_and_public(address: str) -> None:
    assert allowed(DEFAULT, address)


@pytest.mark.parametrize("address", ["127.0.0.1", "::1", "10.1.2.3", "192.168.1.1",
                                     "172.31.255.255", "fc00::1", "fd12::1", "100.64.0.1",
                                     "224.0.0.1", "255.255.255.255", "::ffff:10.0.0.1",
                                     "::ffff:127.0.0.1", "169.254.169.254"])
def test_the_untrusted_profile_also_refuses_the_local_networks(address: str) -> None:
    assert refusal(UNTRUSTED, address).address == address


def test_the_untrusted_profile_refuses_localhost_by_name_and_allows_public() -> None:
    assert refusal(UNTRUSTED, "localhost", "127.0.0.1").address is None
    assert refusal(UNTRUSTED, "app.localhost", "127.0.0.1").rule == "*.localhost"
    assert allowed(UNTRUSTED, "example.com", "93.184.216.34")
    assert allowed(UNTRUSTED, "2606:2800:220:1::1")


def test_a_name_resolving_to_a_denied_address_is_refused_naming_both() -> None:
    error = refusal(DEFAULT, "innocent.example", "169.254.169.254")
    assert (error.host, error.address, error.rule) == ("innocent.example", "169.254.169.254",
                                                      "169.254.0.0/16")
    assert "'innocent.example'" in str(error) and "169.254.169.254" in str(error)


def test_allowed_hosts_from_the_environment_exempt_names_wildcards_addresses_and_cidrs() -> None:
    policy = NetworkPolicy.from_environment(
        {"PLAIT_ALLOWED_HOSTS": " metadata.google.internal, *.corp.test,169.254.169.254,"
                                "fe80::/64 "})
    assert allowed(policy, "metadata.google.internal", "169.254.169.254")
    assert allowed(policy, "a.b.corp.test", "169.254.1.1")  # the name is exempt
    assert allowed(policy, "169.254.169.254")
    assert allowed(policy, "anything.test", "169.254.169.254")  # the address is exempt
    assert allowed(policy, "::ffff:169.254.169.254")  # the same address, IPv4-mapped
    assert not allowed(policy, "2002:a9fe:a9fe::1")  # another address that carries it
    assert allowed(policy, "fe80::1")
    assert not allowed(policy, "corp.test", "169.254.1.1")  # *.x does not name x
    assert not allowed(policy, "169.254.169.253")
    assert not allowed(policy, "fe80:1::1")


def test_denied_networks_from_the_environment_add_to_the_default() -> None:
    policy = NetworkPolicy.from_environment({"PLAIT_DENIED_NETWORKS": "127.0.0.0/8, 10.0.0.0/8"})
    error = refusal(policy, "localhost", "127.0.0.1")
    assert error.rule == "127.0.0.0/8"
    assert "(from PLAIT_DENIED_NETWORKS)" in str(error)
    assert refusal(policy, "::ffff:10.9.9.9").rule == "10.0.0.0/8"
    assert refusal(policy, "169.254.169.254").rule == "169.254.0.0/16"  # still denied
    assert allowed(policy, "192.168.0.1")


def test_no_environment_gives_the_default_profile() -> None:
    assert NetworkPolicy.from_environment({}) == DEFAULT
    assert NetworkPolicy.from_environment({}, base=UNTRUSTED) == UNTRUSTED


def test_a_malformed_rule_refuses_every_connection_naming_the_variable() -> None:
    policy = NetworkPolicy.from_environment({"PLAIT_DENIED_NETWORKS": "10.0.0.0/33"})
    error = refusal(policy, "8.8.8.8")
    assert "PLAIT_DENIED_NETWORKS has a bad entry '10.0.0.0/33'" in str(error)


def test_only_hosts_is_an_allow_list() -> None:
    policy = NetworkPolicy(only_hosts=("api.example.com", "*.example.org", "10.0.0.0/8"))
    assert allowed(policy, "API.example.com.", "93.184.216.34")
    assert allowed(policy, "a.b.example.org", "93.184.216.34")
    assert allowed(policy, "10.2.3.4")
    for host in ("example.org", "badexample.org", "api.example.com.evil.test", "11.0.0.1"):
        error = refusal(policy, host, "93.184.216.34")
        assert error.rule == "only_hosts" and repr(host) in str(error)
    # the allow-list does not lift the default denials
    assert refusal(NetworkPolicy(only_hosts=("meta.test",)), "meta.test",
                   "169.254.169.254").rule == "169.254.0.0/16"
