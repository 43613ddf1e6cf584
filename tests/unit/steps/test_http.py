"""The ``http`` step type through the public API.

respx stands in for the network (it answers before any connection, so the network
policy is not involved); the policy is tested in test_http_policy.py.
"""

from __future__ import annotations

import asyncio
import json
from email.utils import formatdate

import httpx
import pytest
import respx

from plait import DefinitionError, RunResult, Workflow
from plait.steps.http import MAX_BODY_BYTES, retry_after_seconds

FAST = {"max_retries": 3, "initial_delay": 0.01, "jitter": 0}


def http_step(step_id: str = "call", **fields: object) -> dict[str, object]:
    return {"id": step_id, "type": "http", "retry": FAST, **fields}


def workflow(*steps: dict[str, object]) -> Workflow:
    return Workflow.from_dict({"name": "http-test", "steps": list(steps)})


async def run(*steps: dict[str, object], input: object = None) -> RunResult:
    return await workflow(*steps).run_async(input or {})


def problems_of(excinfo: pytest.ExceptionInfo[DefinitionError]) -> dict[str, str]:
    return {p.location: p.message for p in excinfo.value.problems}


# ------------------------------------------------------------------ requests and output


async def test_get_with_params_and_headers(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.get("https://api.test/items", params={"q": "shoes", "n": "2"})
    route.respond(200, json={"items": [1, 2]}, headers={"X-Total": "2"})

    result = await run(http_step(url="https://api.test/items", params={"q": "shoes", "n": 2},
                                 headers={"X-Trace": "abc", "Accept": "application/json"}))

    step = result.steps["call"]
    assert (step.status, step.attempts) == ("completed", 1)
    assert step.output == {
        "status": 200,
        "headers": {"x-total": "2", "content-length": "15", "content-type": "application/json"},
        "json": {"items": [1, 2]},
        "text": None,
        "url": "https://api.test/items?q=shoes&n=2",
        "truncated": False,
    }
    sent = route.calls.last.request
    assert sent.method == "GET"
    assert sent.headers["x-trace"] == "abc"
    assert sent.headers["accept"] == "application/json"


async def test_post_json_returns_text_body(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post("https://api.test/orders").respond(201, text="created")

    result = await run(http_step(method="post", url="https://api.test/orders",
                                 json={"sku": "A1", "qty": 3}))

    step = result.steps["call"]
    assert step.status == "completed"
    assert step.output["status"] == 201
    assert (step.output["json"], step.output["text"]) == (None, "created")
    sent = route.calls.last.request
    assert sent.headers["content-type"] == "application/json"
    assert json.loads(sent.content) == {"sku": "A1", "qty": 3}


async def test_body_is_sent_as_text(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.put("https://api.test/doc").respond(204)

    result = await run(http_step(method="PUT", url="https://api.test/doc",
                                 body="hello {{ input.name }}",
                                 headers={"Content-Type": "text/plain"}),
                       input={"name": "world"})

    assert result.steps["call"].output["status"] == 204
    assert route.calls.last.request.content == b"hello world"


async def test_templates_from_input_and_a_previous_step(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.get("https://api.test/users/7/orders").respond(200, json=[])

    result = await run(
        {"id": "make", "type": "transform", "value": {"id": 7, "token": "{{ input.token }}"}},
        http_step(url="https://{{ input.host }}/users/{{ steps.make.output.id }}/orders",
                  headers={"Authorization": "Bearer {{ steps.make.output.token }}"},
                  params={"status": "{{ input.status }}"}, depends_on=["make"]),
        input={"host": "api.test", "token": "t0k", "status": "open"},
    )

    assert result.steps["call"].status == "completed"
    sent = route.calls.last.request
    assert sent.headers["authorization"] == "Bearer t0k"
    assert sent.url.params["status"] == "open"


async def test_templated_method_and_expect(respx_mock: respx.MockRouter) -> None:
    respx_mock.delete("https://api.test/x").respond(404)

    result = await run(http_step(method="{{ input.method }}", url="https://api.test/x",
                                 expect=["{{ input.ok }}", 200]),
                       input={"method": "DELETE", "ok": 404})

    assert result.steps["call"].status == "completed"


async def test_large_body_is_truncated(respx_mock: respx.MockRouter) -> None:
    respx_mock.get("https://api.test/big").respond(
        200, content=b"x" * (MAX_BODY_BYTES + 10), headers={"Content-Type": "application/json"})

    result = await run(http_step(url="https://api.test/big"))

    output = result.steps["call"].output
    assert output["truncated"] is True
    assert output["json"] is None
    assert len(output["text"]) == MAX_BODY_BYTES


async def test_redirects_are_followed_and_the_final_url_reported(
        respx_mock: respx.MockRouter) -> None:
    respx_mock.get("https://api.test/old").respond(301, headers={"Location": "/new"})
    respx_mock.get("https://api.test/new").respond(200, text="here")

    followed = await run(http_step(url="https://api.test/old"))
    kept = await run(http_step(url="https://api.test/old", follow_redirects=False,
                               expect=[301]))

    assert followed.steps["call"].output["url"] == "https://api.test/new"
    assert followed.steps["call"].output["text"] == "here"
    assert kept.steps["call"].output["status"] == 301


# ------------------------------------------------------------------ statuses and retries


async def test_500_then_200_completes_on_the_second_attempt(
        respx_mock: respx.MockRouter) -> None:
    respx_mock.get("https://api.test/flaky").mock(side_effect=[
        httpx.Response(500, text="oops"), httpx.Response(200, json={"ok": True})])

    result = await run(http_step(url="https://api.test/flaky"))

    step = result.steps["call"]
    assert (step.status, step.attempts) == ("completed", 2)
    assert step.output["json"] == {"ok": True}


async def test_429_waits_for_retry_after_seconds(respx_mock: respx.MockRouter) -> None:
    loop = asyncio.get_running_loop()
    seen: list[float] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(loop.time())
        if len(seen) == 1:
            return httpx.Response(429, headers={"Retry-After": "0.3"})
        return httpx.Response(200, json={})

    respx_mock.get("https://api.test/limited").mock(side_effect=answer)

    result = await run(http_step(url="https://api.test/limited"))

    assert (result.steps["call"].status, result.steps["call"].attempts) == ("completed", 2)
    assert seen[1] - seen[0] >= 0.3  # initial_delay alone would be 0.01


async def test_404_fails_without_retry(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.get("https://api.test/missing").respond(404, text="no such thing")

    result = await run(http_step(url="https://api.test/missing?key=hidden"))

    step = result.steps["call"]
    assert (step.status, step.attempts) == ("failed", 1)
    assert route.call_count == 1
    assert "HTTP 404 from https://api.test/missing" in step.error
    assert "no such thing" in step.error
    assert "hidden" not in step.error  # no query string in messages
    assert result.status == "failed"


async def test_retries_spent_on_5xx_fail_the_step(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.get("https://api.test/down").respond(503)

    result = await run(http_step(url="https://api.test/down"))

    assert (result.steps["call"].status, result.steps["call"].attempts) == ("failed", 4)
    assert route.call_count == 4


async def test_connect_error_is_retried(respx_mock: respx.MockRouter) -> None:
    respx_mock.get("https://api.test/net").mock(side_effect=[
        httpx.ConnectError("connection refused"), httpx.ConnectTimeout("slow"),
        httpx.Response(200, text="up")])

    result = await run(http_step(url="https://api.test/net"))

    step = result.steps["call"]
    assert (step.status, step.attempts) == ("completed", 3)


async def test_connect_errors_until_retries_are_spent(respx_mock: respx.MockRouter) -> None:
    respx_mock.get("https://api.test/net").mock(side_effect=httpx.ConnectError("refused"))

    result = await run(http_step(url="https://api.test/net"))

    step = result.steps["call"]
    assert (step.status, step.attempts) == ("failed", 4)
    assert "ConnectError" in step.error and "GET https://api.test/net" in step.error


async def test_expect_makes_a_404_a_success(respx_mock: respx.MockRouter) -> None:
    respx_mock.get("https://api.test/maybe").respond(404, json={"found": False})

    result = await run(http_step(url="https://api.test/maybe", expect=[200, 404]))

    step = result.steps["call"]
    assert step.status == "completed"
    assert step.output["status"] == 404
    assert step.output["json"] == {"found": False}


async def test_a_2xx_outside_expect_fails_without_retry(respx_mock: respx.MockRouter) -> None:
    respx_mock.post("https://api.test/create").respond(200)

    result = await run(http_step(method="POST", url="https://api.test/create", expect=[201]))

    assert (result.steps["call"].status, result.steps["call"].attempts) == ("failed", 1)


async def test_header_values_stay_out_of_errors(respx_mock: respx.MockRouter) -> None:
    respx_mock.get("https://api.test/private").respond(401, text="unauthorized")

    denied = await run(http_step(url="https://api.test/private",
                                 headers={"Authorization": "Bearer {{ input.key }}"}),
                       input={"key": "s3cr3t-value"})
    broken = await run(http_step(url="https://api.test/private",
                                 headers={"X-Key": "{{ input.key }}"}),
                       input={"key": "s3cr3t\r\nX-Injected: 1"})

    assert (denied.steps["call"].status, denied.steps["call"].attempts) == ("failed", 1)
    assert "s3cr3t" not in denied.steps["call"].error
    assert (broken.steps["call"].status, broken.steps["call"].attempts) == ("failed", 1)
    assert "headers.X-Key" in broken.steps["call"].error
    assert "s3cr3t" not in broken.steps["call"].error


# ------------------------------------------------------------------ idempotency key


async def test_idempotency_key_is_run_and_step(respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post("https://api.test/pay").mock(side_effect=[
        httpx.Response(502), httpx.Response(200)])

    result = await run(http_step("pay", method="POST", url="https://api.test/pay"))

    keys = [call.request.headers["idempotency-key"] for call in route.calls]
    assert keys == [f"{result.run_id}:pay"] * 2  # the same key on every attempt


async def test_idempotency_key_set_by_the_definition_wins(
        respx_mock: respx.MockRouter) -> None:
    route = respx_mock.post("https://api.test/pay").respond(200)

    await run(http_step(method="POST", url="https://api.test/pay",
                        headers={"idempotency-key": "order-{{ input.order }}"}),
              input={"order": 42})
    await run(http_step(method="POST", url="https://api.test/pay",
                        headers={"Idempotency-Key": None}))

    first, second = route.calls
    assert first.request.headers.get_list("idempotency-key") == ["order-42"]
    assert "idempotency-key" not in second.request.headers


# ------------------------------------------------------------------ URL schemes


def test_a_literal_bad_scheme_is_a_definition_error() -> None:
    with pytest.raises(DefinitionError) as excinfo:
        workflow(http_step(url="ftp://files.test/a"),
                 http_step("b", url="file://{{ input.path }}"))

    problems = problems_of(excinfo)
    assert "scheme 'ftp'" in problems["steps[0].url"]
    assert "scheme 'file'" in problems["steps[1].url"]


async def test_a_rendered_bad_scheme_fails_without_retry() -> None:
    result = await run(http_step(url="{{ input.url }}"), input={"url": "file:///etc/passwd"})

    step = result.steps["call"]
    assert (step.status, step.attempts) == ("failed", 1)
    assert "scheme 'file'" in step.error


# ------------------------------------------------------------------ definition checks


def test_invalid_fields_are_all_reported_with_their_location() -> None:
    with pytest.raises(DefinitionError) as excinfo:
        workflow(http_step(method="FETCH", url="https://api.test/", headers=["x"],
                           params={"a": {"b": 1}}, json={"a": 1}, body="text",
                           expect=[200, 99, True, "{{ input.code }}"],
                           follow_redirects="sometimes"))

    problems = problems_of(excinfo)
    assert set(problems) == {"steps[0].method", "steps[0].headers", "steps[0].params.a",
                             "steps[0].body", "steps[0].expect[1]", "steps[0].expect[2]",
                             "steps[0].follow_redirects"}
    assert "GET" in problems["steps[0].method"]
    assert "`json` and `body`" in problems["steps[0].body"]


def test_missing_url_unknown_field_and_bad_header_name() -> None:
    with pytest.raises(DefinitionError) as excinfo:
        workflow(http_step(headers={"Bad Header": "x", "Ok": 1, "Name": "caf\u00e9"},
                           timeout_s=3))

    problems = problems_of(excinfo)
    assert set(problems) == {"steps[0].url", "steps[0].headers.Bad Header",
                             "steps[0].headers.Name", "steps[0].timeout_s"}
    assert "ASCII" in problems["steps[0].headers.Name"]


async def test_templates_are_accepted_wherever_a_value_can_be_templated(
        respx_mock: respx.MockRouter) -> None:
    route = respx_mock.put("https://api.test/items", params={"p": "7"}).respond(202)
    templated = workflow(http_step(
        method="{{ input.m }}", url="{{ input.url }}", headers="{{ input.headers }}",
        params={"p": "{{ input.p }}"}, json="{{ input.payload }}", expect="{{ input.codes }}",
        follow_redirects="{{ input.follow }}"))
    templated.validate()  # raises DefinitionError for a field that refuses a template

    result = await templated.run_async({
        "m": "PUT", "url": "https://api.test/items", "headers": {"X-Id": "9"}, "p": 7,
        "payload": {"a": 1}, "codes": [202], "follow": False})

    step = result.steps["call"]
    assert (step.status, step.output["status"]) == ("completed", 202), step.error
    sent = route.calls.last.request
    assert (sent.headers["x-id"], json.loads(sent.content)) == ("9", {"a": 1})


def test_a_template_error_in_a_field_fails_without_retry() -> None:
    result = workflow(http_step(url="https://api.test/{{ input.missing.deeper }}")).run()

    step = result.steps["call"]
    assert (step.status, step.attempts) == ("failed", 1)
    assert "url" in step.error


# ------------------------------------------------------------------ Retry-After


def test_retry_after_reads_seconds_and_http_dates() -> None:
    now = 1_700_000_000.0
    assert retry_after_seconds("120", now) == 120.0
    assert retry_after_seconds("0.25", now) == 0.25
    assert retry_after_seconds(formatdate(now + 30, usegmt=True), now) == 30.0
    assert retry_after_seconds(formatdate(now - 30, usegmt=True), now) == 0.0
    assert retry_after_seconds("-5", now) == 0.0
    assert retry_after_seconds("soon", now) is None
    assert retry_after_seconds("nan", now) is None
    assert retry_after_seconds(None, now) is None
