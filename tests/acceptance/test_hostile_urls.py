"""Hostile URLs in ``http`` and ``llm`` steps: hosts IDNA cannot decode
(``http://xn--localhost-/``), ports out of range, brackets left open, host names DNS
cannot carry.  Written in the definition they are located problems; built by a template
they fail the step at once (no retry), naming the URL; never a traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpcore
import pytest
from hostile import located, validate_and_run, write_json

from plait import Workflow
from plait.steps.netclient import resolve
from plait.steps.netpolicy import host_problem

BAD = [
    ("http://xn--localhost-/", "not a valid URL"),
    ("http://xn--/", "not a valid URL"),
    ("http://xn--ls8h/", "not a valid URL"),
    ("http://h:99999/", "port 99999"),
    ("http://h:0/", "port 0"),
    ("http://[::1]:65536/", "port 65536"),
    ("http://[::1/", "not a valid URL"),
    ("http://[::g]/", "not a valid URL"),
    ("http://a..b/", "empty label"),
    ("http://" + "a" * 64 + ".com/", "over 63 characters"),
    ("http://" + "a." * 130 + "com/", "over 253"),
]


def http_step(url: str, **fields: Any) -> dict[str, Any]:
    return {"id": "h", "type": "http", "url": url, **fields}


def llm_step(url: str, **fields: Any) -> dict[str, Any]:
    return {"id": "h", "type": "llm", "base_url": url, "model": "m", "prompt": "hi",
            "api_key_env": "PLAIT_TEST_KEY", **fields}


@pytest.mark.parametrize("url, needle", BAD)
def test_a_literal_bad_url_is_a_located_problem(url: str, needle: str) -> None:
    located({"name": "u", "steps": [http_step(url)]}, "steps[0].url", needle)
    located({"name": "u", "steps": [llm_step(url)]}, "steps[0].base_url", needle)


def test_good_urls_stay_valid() -> None:
    for url in ("https://example.com/x?q=1", "http://[::1]:8080/", "http://127.0.0.1:1/",
                "https://xn--bcher-kva.example/", "http://b\u00fccher.example/",
                "http://example.com./", "https://a-b.c-d.example:65535/"):
        Workflow.from_dict({"name": "u", "steps": [http_step(url)]}).validate()


@pytest.mark.parametrize("make, field", [(http_step, "url"), (llm_step, "base_url")])
async def test_a_bad_url_built_by_a_template_fails_without_retry(
        make: Any, field: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLAIT_TEST_KEY", "k")
    step = make("{{ input.u }}", retry={"max_retries": 3, "initial_delay": 0})
    wf = Workflow.from_dict({"name": "u", "steps": [step]})
    for url, needle in BAD[:4] + BAD[6:9]:
        result = await wf.run_async({"u": url}, db="memory://")
        outcome = result.steps["h"]
        assert (outcome.status, outcome.attempts) == ("failed", 1), outcome
        # the URL as rendered (an llm step's base_url without its trailing slash)
        assert f"`{field}` '{url.rstrip('/')}" in (outcome.error or "")
        assert needle in (outcome.error or "")


async def test_a_name_the_resolver_cannot_encode_is_a_connect_error() -> None:
    for host in ("a..b", "a" * 64 + ".com"):
        with pytest.raises(httpcore.ConnectError, match="cannot resolve"):
            await resolve(host, 80, 1.0)


def test_host_problem() -> None:
    assert host_problem("example.com") is None
    assert host_problem("example.com.") is None
    assert host_problem("[::1]") is None
    assert host_problem("10.0.0.1") is None
    assert host_problem(".example") is not None
    assert host_problem("x" * 254) is not None


def test_validate_and_run_name_the_field(tmp_path: Path) -> None:
    file = write_json(tmp_path, "flow.json",
                      {"name": "u", "steps": [http_step("http://xn--localhost-/")]})
    validate_and_run(file, "steps[0].url: not a valid URL")
    file = write_json(tmp_path, "flow.json",
                      {"name": "u", "steps": [llm_step("http://h:99999")]})
    validate_and_run(file, "steps[0].base_url: port 99999")


def test_no_traceback_from_the_real_command(plait: Any, tmp_path: Path) -> None:
    file = write_json(tmp_path, "flow.json",
                      {"name": "u", "steps": [http_step("http://xn--localhost-/")]})
    done = plait("run", str(file))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "steps[0].url: not a valid URL" in done.stderr


@pytest.mark.parametrize("url", ["http://[::1/", "http://h:99999/", "http://h:0/",
                                 "http://h:x/"])
def test_a_bad_notification_url_is_a_located_problem(url: str) -> None:
    located({"name": "u", "notify": [{"on": ["run_failed"], "url": url}],
             "steps": [{"id": "a", "type": "transform", "value": 1}]}, "notify[0].url")
