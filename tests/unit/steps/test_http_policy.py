"""The network policy as ``http`` steps meet it: every connection, each redirect hop
included, is judged before it is made, and a refusal fails the step at once.

A spy on httpcore's network backend records every connection really attempted, so
"nothing connected" is observed, not assumed; a tiny HTTP server on 127.0.0.1 plays the
outside world.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import httpcore
import pytest

from plait import RunResult, Workflow
from plait.runtime.engine import Engine
from plait.steps.netpolicy import UNTRUSTED, NetworkPolicy
from plait.store.memory import MemoryStore

RETRIES = {"max_retries": 2, "initial_delay": 0.01, "jitter": 0}


def http_step(url: str, step_id: str = "call") -> dict[str, object]:
    return {"id": step_id, "type": "http", "url": url, "retry": RETRIES}


async def run(*steps: dict[str, object], policy: NetworkPolicy | None = None) -> RunResult:
    """Run the steps on an engine built like the CLI's: without a policy it reads the
    default one from the environment."""
    store = MemoryStore()
    await store.open()
    engine = Engine(store, http_policy=policy)
    try:
        wf = Workflow.from_dict({"name": "policy-test", "steps": list(steps)})
        return await engine.run(wf.validate(), {})
    finally:
        engine.close()
        await store.close()


@dataclass
class LocalServer:
    """An HTTP/1.1 server on 127.0.0.1 that answers every request with a canned reply."""

    port: int = 0
    requests: list[str] = field(default_factory=list)
    replies: dict[str, bytes] = field(default_factory=dict)

    def url(self, path: str = "/ok", host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        self.requests.append(head)
        path = head.split(" ", 2)[1]
        default = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" \
                  b"Content-Length: 11\r\nConnection: close\r\n\r\n{\"ok\":true}"
        writer.write(self.replies.get(path, default))
        await writer.drain()
        writer.close()
        await writer.wait_closed()


@pytest.fixture
async def local_server() -> AsyncIterator[LocalServer]:
    state = LocalServer()
    server = await asyncio.start_server(state.handle, "127.0.0.1", 0)
    state.port = server.sockets[0].getsockname()[1]
    async with server:
        yield state


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PLAIT_ALLOWED_HOSTS", raising=False)
    monkeypatch.delenv("PLAIT_DENIED_NETWORKS", raising=False)


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every address a connection is really attempted to.  Connections to 127.0.0.1 go
    through; any other is refused here, so no test ever reaches the outside."""
    seen: list[str] = []
    real = httpcore.AnyIOBackend.connect_tcp

    async def spy(self: httpcore.AnyIOBackend, host: str, port: int,
                  **kwargs: object) -> httpcore.AsyncNetworkStream:
        seen.append(host)
        if host != "127.0.0.1":
            raise httpcore.ConnectError(f"test spy: not connecting to {host}")
        return await real(self, host, port, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(httpcore.AnyIOBackend, "connect_tcp", spy)
    return seen


@pytest.fixture
def hosts(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A hosts file for the resolver the policy uses: name -> address."""
    mapping: dict[str, str] = {}
    real = socket.getaddrinfo

    def resolve(host: object, *args: object, **kwargs: object) -> object:
        return real(mapping.get(str(host), host), *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    return mapping


def assert_refused(result: RunResult, address: str, step_id: str = "call") -> None:
    step = result.steps[step_id]
    assert (step.status, step.attempts) == ("failed", 1), step.error
    assert step.error is not None and address in step.error
    assert step.error.startswith("NetworkRefused: "), step.error
    assert result.status == "failed"


# ------------------------------------------------------------------ the default


async def test_a_redirect_to_the_metadata_address_fails_before_connecting(
        local_server: LocalServer, connections: list[str]) -> None:
    local_server.replies["/jump"] = (b"HTTP/1.1 302 Found\r\nLocation: http://169.254.169.254"
                                     b"/latest/meta-data\r\nContent-Length: 0\r\n"
                                     b"Connection: close\r\n\r\n")

    result = await run(http_step(local_server.url("/jump")))

    assert_refused(result, "169.254.169.254")
    assert "inside denied network 169.254.0.0/16" in (result.steps["call"].error or "")
    assert connections == ["127.0.0.1"]  # the first hop only
    assert len(local_server.requests) == 1


@pytest.mark.parametrize(("url", "named"), [
    ("http://169.254.169.254/latest/meta-data", "169.254.169.254"),
    ("http://2852039166/", "169.254.169.254"),                  # decimal
    ("http://0xa9fea9fe/", "169.254.169.254"),                  # hex
    ("http://169.254.43518/", "169.254.169.254"),               # short form
    ("http://0251.0376.43518/", "169.254.169.254"),             # octal, short
    ("http://0xa9.0xfe.0xa9.0xfe/", "169.254.169.254"),         # hex, dotted
    ("http://[::ffff:a9fe:a9fe]/", "::ffff:169.254.169.254"),   # IPv4-mapped IPv6
    ("http://[::ffff:169.254.169.254]/", "::ffff:169.254.169.254"),
    ("http://[::169.254.169.254]/", "::169.254.169.254"),       # IPv4-compatible
    ("http://[64:ff9b::a9fe:a9fe]/", "64:ff9b::a9fe:a9fe"),     # NAT64
    ("http://[2002:a9fe:a9fe::1]/", "2002:a9fe:a9fe::1"),       # 6to4
    ("http://[fe80::1]/", "fe80::1"),
    ("http://0.0.0.0:8080/", "0.0.0.0"),
    ("http://0/", "0.0.0.0"),
    ("http://[::]/", "::"),
    ("http://metadata.google.internal/computeMetadata/v1/", "metadata.google.internal"),
    ("http://METADATA.goog./", "metadata.goog"),
])
async def test_every_spelling_of_a_denied_address_is_refused(
        url: str, named: str, connections: list[str]) -> None:
    result = await run(http_step(url))

    assert_refused(result, named)
    assert "PLAIT_ALLOWED_HOSTS" in (result.steps["call"].error or "")  # the fix
    assert connections == []


async def test_a_spelling_the_url_parser_rejects_never_connects(
        connections: list[str]) -> None:
    # (a literal URL is refused by validation already; a rendered one at run time)
    result = await run(http_step("{{ 'http://0251.0376.0251.0376/' }}"))

    step = result.steps["call"]
    assert (step.status, step.attempts) == ("failed", 1)
    assert "not a valid URL" in (step.error or "")
    assert connections == []


async def test_a_name_resolving_to_a_denied_address_is_refused(
        connections: list[str], hosts: dict[str, str]) -> None:
    hosts["innocent.test"] = "169.254.169.254"

    result = await run(http_step("http://innocent.test/"))

    assert_refused(result, "169.254.169.254")
    assert "'innocent.test'" in (result.steps["call"].error or "")
    assert connections == []


async def test_loopback_is_reached_by_default(local_server: LocalServer,
                                              connections: list[str]) -> None:
    result = await run(http_step(local_server.url()))

    assert result.steps["call"].status == "completed", result.steps["call"].error
    assert result.steps["call"].output["json"] == {"ok": True}
    assert connections == ["127.0.0.1"]


# ------------------------------------------------------------------ the environment


async def test_allowed_hosts_lets_a_denied_address_through(
        monkeypatch: pytest.MonkeyPatch, connections: list[str]) -> None:
    monkeypatch.setenv("PLAIT_ALLOWED_HOSTS", "169.254.169.254")

    result = await run(http_step("http://169.254.169.254/"),
                       http_step("http://2852039166/", step_id="decimal"),
                       http_step("http://169.254.169.253/", step_id="neighbour"))

    # the policy let both spellings through to the connection (the spy refuses it)
    assert connections.count("169.254.169.254") == 2 * 3  # each attempt of two steps
    assert "test spy" in (result.steps["call"].error or "")
    assert_refused(result, "169.254.169.253", "neighbour")


async def test_denied_networks_blocks_the_local_server(
        monkeypatch: pytest.MonkeyPatch, local_server: LocalServer,
        connections: list[str]) -> None:
    monkeypatch.setenv("PLAIT_DENIED_NETWORKS", "127.0.0.0/8")

    result = await run(http_step(local_server.url()),
                       http_step(local_server.url(host="localhost"), step_id="by_name"))

    assert_refused(result, "127.0.0.1")
    assert "(from PLAIT_DENIED_NETWORKS)" in (result.steps["call"].error or "")
    assert result.steps["by_name"].status == "failed"
    assert result.steps["by_name"].attempts == 1
    assert connections == [] and local_server.requests == []


async def test_allowed_hosts_exempts_a_name_from_denied_networks(
        monkeypatch: pytest.MonkeyPatch, local_server: LocalServer) -> None:
    monkeypatch.setenv("PLAIT_DENIED_NETWORKS", "127.0.0.0/8,::1/128")
    monkeypatch.setenv("PLAIT_ALLOWED_HOSTS", "localhost")

    result = await run(http_step(local_server.url(host="localhost")),
                       http_step(local_server.url(), step_id="by_address"))

    assert result.steps["call"].status == "completed", result.steps["call"].error
    assert_refused(result, "127.0.0.1", "by_address")


async def test_a_malformed_environment_rule_fails_without_retry(
        monkeypatch: pytest.MonkeyPatch, connections: list[str]) -> None:
    monkeypatch.setenv("PLAIT_DENIED_NETWORKS", "10.0.0.0/33")

    result = await run(http_step("http://127.0.0.1:9/"))

    step = result.steps["call"]
    assert (step.status, step.attempts) == ("failed", 1)
    assert "PLAIT_DENIED_NETWORKS has a bad entry '10.0.0.0/33'" in (step.error or "")
    assert connections == []


# ------------------------------------------------------------------ other policies


async def test_the_untrusted_profile_refuses_the_local_server(
        local_server: LocalServer, connections: list[str]) -> None:
    result = await run(http_step(local_server.url()),
                       http_step(local_server.url(host="localhost"), step_id="by_name"),
                       policy=UNTRUSTED)

    assert_refused(result, "127.0.0.1")
    assert_refused(result, "'localhost'", "by_name")
    assert connections == []


async def test_only_hosts_refuses_every_other_host(connections: list[str]) -> None:
    policy = NetworkPolicy(only_hosts=("api.example.com", "*.example.org"))

    result = await run(http_step("https://evil.test/steal"), policy=policy)

    assert_refused(result, "'evil.test'")
    assert "not one of the only hosts allowed" in (result.steps["call"].error or "")
    assert connections == []


async def test_the_checked_address_is_the_one_connected_to(
        local_server: LocalServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """DNS rebinding: a name that resolves to a permitted address when checked and to a
    denied one afterwards must not reach the denied one."""
    real = socket.getaddrinfo
    lookups: list[str] = []

    def rebinding(host: object, *args: object, **kwargs: object) -> object:
        if host == "rebind.test":
            lookups.append(host)
            host = "127.0.0.1" if len(lookups) == 1 else "169.254.169.254"
        return real(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)

    result = await run(http_step(local_server.url(host="rebind.test")))

    assert result.steps["call"].status == "completed", result.steps["call"].error
    assert lookups == ["rebind.test"]  # resolved once, connected to what was checked
