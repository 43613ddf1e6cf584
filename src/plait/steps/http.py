"""The ``http`` step type: one HTTP request through httpx per attempt.

Fields (every value may contain templates, rendered before the request)::

    method            GET (default), HEAD, POST, PUT, PATCH, DELETE or OPTIONS
    url               required; an absolute http:// or https:// URL
    headers           mapping of header name to value; a null value sends no header
    params            mapping of query parameter to a value or a list of values
    json              any JSON value, sent as the body with Content-Type application/json
    body              text sent as the body as it is (not together with ``json``)
    expect            list of acceptable status codes (default: any 2xx)
    follow_redirects  true (default) or false

Output (a JSON object)::

    {"status": 200,                       # final status code
     "headers": {"content-type": "..."},  # response headers, names lower-cased
     "json": {...} | null,                # the parsed body when the response is JSON
     "text": "..." | null,                # the body text when it is not JSON
     "url": "https://...",                # the final URL (after redirects), no user:password
     "truncated": false}                  # true when the body passed MAX_BODY_BYTES

A body is read up to ``MAX_BODY_BYTES`` (1 MiB); a longer one is cut there, ``truncated``
is true and it is returned as ``text`` (never parsed).

Failures and retries: a status outside ``expect`` raises ``HTTPStatusError``.  5xx, 429
and 408 are retryable, and a ``Retry-After`` header (seconds or an HTTP-date) sets the
least delay before the next attempt; any other status fails without retry.  Connection
failures, timeouts and dropped connections are retryable; requests that cannot work
(a bad URL, header or scheme, a redirect loop) fail at once.  Error messages show the URL
without its query string and never any header value.

Idempotency: every request carries ``Idempotency-Key: <run_id>:<step_id>`` unless the
definition sets that header itself (a null value sends none).  The key is the same for
every attempt of the step in a run, so an API that deduplicates on it applies a retried
request once.

Security: ``Services.http_policy`` (a ``NetworkPolicy``, by default built from the
environment) limits where requests go; every connection, each redirect hop included, is
judged before it is made (``plait.steps.netclient``), and a refused one fails the step
at once with a ``NetworkRefused`` naming the address.  The timeout of the whole attempt
is the step's ``timeout``; single network operations are bounded by
``netclient.TIMEOUT``.
"""

from __future__ import annotations

import codecs
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import cast

import httpx

from ..core import expressions
from ..core.model import JSON, JSONDict
from ..errors import FatalError, HTTPStatusError, StepError
from .netclient import guarded_client
from .netpolicy import host_problem
from .registry import StepCall
from .types import HTTP_FIELDS

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
SCHEMES = ("http", "https")
MAX_BODY_BYTES = 1 << 20
IDEMPOTENCY_HEADER = "Idempotency-Key"
RETRYABLE_STATUSES = frozenset({408, 429})
FIELDS = HTTP_FIELDS

# Transport failures worth another attempt: the network or the server may recover.  The
# other httpx errors (LocalProtocolError, UnsupportedProtocol, TooManyRedirects,
# DecodingError) would fail the same way again.
_RETRYABLE_TRANSPORT = (httpx.TimeoutException, httpx.NetworkError,
                        httpx.RemoteProtocolError, httpx.ProxyError)
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_Scalar = str | int | float | bool
_ItemCheck = Callable[[str, JSON], str | None]  # one entry of a mapping field -> problem


# ------------------------------------------------------------------ the request


@dataclass(frozen=True, slots=True, kw_only=True)
class _Request:
    """A step's fields, rendered and checked: what one attempt sends."""

    method: str
    url: httpx.URL
    headers: dict[str, str]
    params: dict[str, _Scalar | list[_Scalar]]
    json: JSON
    content: bytes | None
    expect: frozenset[int] | None
    follow_redirects: bool


def _prepare(call: StepCall) -> _Request:
    """Render every field and check what templates produced (FatalError if unusable)."""
    config, step = call.step.config, call.step.id

    def field(name: str, default: JSON = None) -> JSON:
        return call.render(config.get(name, default), name)

    headers = _headers(field("headers"), step)
    if not any(name.lower() == IDEMPOTENCY_HEADER.lower() for name in headers):
        headers[IDEMPOTENCY_HEADER] = f"{call.run_id}:{step}"
    rendered = {k: v for k, v in headers.items() if v is not None}
    return _Request(method=_method(field("method", "GET"), step),
                    url=_url(field("url"), step),
                    headers=rendered,
                    params=_params(field("params"), step),
                    json=field("json"),
                    content=_content(field("body"), step),
                    expect=_expect(field("expect"), step),
                    follow_redirects=_flag(field("follow_redirects", True),
                                           "follow_redirects", step))


def _fatal(step: str, message: str) -> FatalError:
    return FatalError(f"step {step!r}: {message}", step=step)


def _method(value: JSON, step: str) -> str:
    if isinstance(value, str) and value.upper() in METHODS:
        return value.upper()
    raise _fatal(step, f"`method` must be one of {', '.join(METHODS)}, got {value!r}")


def _url(value: JSON, step: str) -> httpx.URL:
    if not isinstance(value, str):
        raise _fatal(step, f"`url` must render to a string, got {type(value).__name__}")
    problem = _url_problem(value)
    if problem is not None:
        raise _fatal(step, f"`url` {quoted_url(value)}: {problem}")
    return httpx.URL(value)


def _url_problem(text: str) -> str | None:
    """What makes ``text`` a URL no request can be sent to, or None."""
    try:
        url = httpx.URL(text)
        host, port = url.host, url.port  # the host is IDNA-decoded here (IDNAError)
    except (httpx.InvalidURL, ValueError) as exc:  # IDNAError is a UnicodeError
        return f"not a valid URL: {exc}"
    if url.scheme not in SCHEMES:
        return (f"scheme {url.scheme!r} is not allowed (only http and https)" if url.scheme
                else "expected an absolute http:// or https:// URL")
    if not host:
        return "the URL has no host"
    if port is not None and not 1 <= port <= 65535:
        return f"port {port} is not from 1 to 65535"
    return host_problem(url.raw_host.decode("ascii", "replace"))


def quoted_url(text: str) -> str:
    """``text`` quoted for a message, cut after 200 characters."""
    return repr(text if len(text) <= 200 else text[:200] + "...")


def _headers(value: JSON, step: str) -> dict[str, str | None]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _fatal(step, "`headers` must render to a mapping of names to values")
    out: dict[str, str | None] = {}
    for name, item in value.items():
        # Never show the value: headers carry credentials.
        problem = _header_problem(name, item)
        if problem is not None:
            raise _fatal(step, f"`headers.{name}`: {problem}")
        out[name] = _text(item) if isinstance(item, str | int | float) else None
    return out


def _header_problem(name: str, value: JSON) -> str | None:
    if not _HEADER_NAME.fullmatch(name):
        return "not a valid header name"
    if isinstance(value, dict | list):
        return "a header value must be text, a number or a boolean"
    if isinstance(value, str) and ("\r" in value or "\n" in value or "\0" in value):
        return "a header value cannot contain line breaks or NUL"
    if isinstance(value, str) and not value.isascii():
        return "a header value must be ASCII text"
    return None


def _text(value: _Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _params(value: JSON, step: str) -> dict[str, _Scalar | list[_Scalar]]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _fatal(step, "`params` must render to a mapping")
    out: dict[str, _Scalar | list[_Scalar]] = {}
    for name, item in value.items():
        if item is None:
            continue
        items = item if isinstance(item, list) else [item]
        scalars = [v for v in items if isinstance(v, _Scalar)]
        if len(scalars) != len(items):
            raise _fatal(step, f"`params.{name}` must be a value or a list of values")
        out[name] = scalars if isinstance(item, list) else scalars[0]
    return out


def _content(value: JSON, step: str) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str | int | float):
        raise _fatal(step, "`body` must render to text; use `json` to send JSON")
    return _text(value).encode()


def _expect(value: JSON, step: str) -> frozenset[int] | None:
    if value is None:
        return None
    codes = value if isinstance(value, list) else [value]
    out: set[int] = set()
    for code in codes:
        number = int(code) if isinstance(code, str) and code.strip().isdigit() else code
        if not isinstance(number, int) or isinstance(number, bool) \
                or not 100 <= number <= 599:
            raise _fatal(step, f"`expect` must list status codes 100-599, got {code!r}")
        out.add(number)
    return frozenset(out)


def _flag(value: JSON, name: str, step: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):  # text rendered from a template: as it reads
        return value.strip().lower() not in ("", "false", "0", "no", "none", "null")
    raise _fatal(step, f"`{name}` must be true or false, got {value!r}")


# ------------------------------------------------------------------ one attempt


async def run_http(call: StepCall) -> JSON:
    request = await call.rendered(_prepare)
    step = call.step.id
    where = f"{request.method} {_shown(request.url)}"
    client = guarded_client(call.services.http_policy, step=step)
    try:
        async with client, client.stream(
                request.method, request.url, headers=request.headers,
                params=request.params or None, content=request.content,
                json=request.json, follow_redirects=request.follow_redirects,
        ) as response:
            body, truncated = await _read_bounded(response)
    except _RETRYABLE_TRANSPORT as exc:
        raise StepError(f"step {step!r}: {_describe(exc)} during {where}", step=step) from exc
    except httpx.HTTPError as exc:
        raise _fatal(step, f"{_describe(exc)} during {where}") from exc
    return _outcome(response, body, truncated, request.expect, step)


def _describe(exc: Exception) -> str:
    detail = str(exc)
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


async def _read_bounded(response: httpx.Response) -> tuple[bytes, bool]:
    """The body up to MAX_BODY_BYTES, and whether there was more."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return b"".join(chunks)[:MAX_BODY_BYTES], True
    return b"".join(chunks), False


def _outcome(response: httpx.Response, body: bytes, truncated: bool,
             expect: frozenset[int] | None, step: str) -> JSONDict:
    status = response.status_code
    parsed = _NOT_JSON if truncated else _parse_json(body, response.headers)
    text = None if parsed is not _NOT_JSON else _decode(body, response)
    if not (status in expect if expect is not None else 200 <= status < 300):
        retryable = status >= 500 or status in RETRYABLE_STATUSES
        retry_after = retry_after_seconds(response.headers.get("retry-after"), time.time())
        shown = text if text is not None else _decode(body, response)
        raise HTTPStatusError(status, _shown(response.url), retryable=retryable, step=step,
                              retry_after=retry_after if retryable else None, body=shown)
    return {"status": status,
            "headers": dict(response.headers.items()),
            "json": None if parsed is _NOT_JSON else cast(JSON, parsed),
            "text": text,
            "url": str(_without_userinfo(response.url)),
            "truncated": truncated}


_NOT_JSON = object()


def _parse_json(body: bytes, headers: httpx.Headers) -> object:
    """The parsed body when the response says it is JSON, else _NOT_JSON."""
    if "json" not in headers.get("content-type", "").lower():
        return _NOT_JSON
    try:
        return json.loads(body, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return _NOT_JSON


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")  # NaN and Infinity cannot be stored


def _decode(body: bytes, response: httpx.Response) -> str:
    try:
        return codecs.decode(body, response.encoding or "utf-8", errors="replace")
    except LookupError:  # an unknown charset in Content-Type
        return body.decode("utf-8", errors="replace")


def retry_after_seconds(value: str | None, now: float) -> float | None:
    """Seconds to wait from a Retry-After header: delta-seconds (decimals accepted) or an
    HTTP-date (``now`` is epoch seconds).  None when absent or unreadable."""
    if value is None:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            moment = parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if moment.tzinfo is None:  # HTTP-dates are GMT
            return None
        seconds = moment.timestamp() - now
    return max(0.0, seconds) if seconds == seconds else None  # NaN is unreadable


def _without_userinfo(url: httpx.URL) -> httpx.URL:
    return url.copy_with(username=None, password=None) if url.userinfo else url


def _shown(url: httpx.URL) -> str:
    """A URL for messages: no credentials, no query string (it may carry keys)."""
    return str(url.copy_with(username=None, password=None, query=None, fragment=None))


# ------------------------------------------------------------------ definition checks


def check_http(config: Mapping[str, JSON]) -> list[tuple[str, str]]:
    """Static checks of an http step's fields; a template stands for any value."""
    out: list[tuple[str, str]] = []
    out += _check_method(config.get("method"))
    out += _check_url(config.get("url"))
    out += _check_mapping("headers", config.get("headers"), _header_problem)
    out += _check_mapping("params", config.get("params"), _param_problem)
    if "json" in config and "body" in config:
        out.append((".body", "`json` and `body` cannot both be set (`json` sends JSON, "
                             "`body` sends text)"))
    body = config.get("body")
    if isinstance(body, dict | list):
        out.append((".body", "expected text; use `json` to send JSON"))
    out += _check_expect(config.get("expect"))
    redirects = config.get("follow_redirects")
    if redirects is not None and not isinstance(redirects, bool) and not _templated(redirects):
        out.append((".follow_redirects", f"expected true or false, got {redirects!r}"))
    return out


def _templated(value: JSON) -> bool:
    return isinstance(value, str) and expressions.is_template(value)


def _check_method(method: JSON) -> list[tuple[str, str]]:
    if method is None or _templated(method):
        return []
    if isinstance(method, str) and method.upper() in METHODS:
        return []
    return [(".method", f"expected one of {', '.join(METHODS)}, got {method!r}")]


def _check_url(url: JSON) -> list[tuple[str, str]]:
    if url is None:
        return []  # `required` reports a missing url
    if not isinstance(url, str):
        return [(".url", f"expected a URL string, got {url!r}")]
    if not _templated(url):
        problem = _url_problem(url)
        return [] if problem is None else [(".url", problem)]
    # A template may fill in the rest, but a literal scheme before it is checked now.
    prefix = re.split(r"\{\{|\{%", url, maxsplit=1)[0]
    scheme = prefix.split("://", 1)[0].lower() if "://" in prefix else None
    if scheme is not None and scheme not in SCHEMES:
        return [(".url", f"scheme {scheme!r} is not allowed (only http and https)")]
    return []


def _check_mapping(name: str, value: JSON, item_problem: _ItemCheck) -> list[tuple[str, str]]:
    if value is None or _templated(value):
        return []
    if not isinstance(value, dict):
        return [(f".{name}", f"expected a mapping, got {type(value).__name__}")]
    out = []
    for key, item in value.items():
        problem = item_problem(key, item)
        if problem is not None:
            out.append((f".{name}.{key}", problem))
    return out


def _param_problem(name: str, value: JSON) -> str | None:
    items = value if isinstance(value, list) else [value]
    if any(isinstance(v, dict | list) for v in items):
        return "expected a value or a list of values"
    return None


def _check_expect(expect: JSON) -> list[tuple[str, str]]:
    if expect is None or _templated(expect):
        return []
    if not isinstance(expect, list) or not expect:
        return [(".expect", "expected a non-empty list of status codes")]
    out = []
    for i, code in enumerate(expect):
        if _templated(code):
            continue
        if not isinstance(code, int) or isinstance(code, bool) or not 100 <= code <= 599:
            out.append((f".expect[{i}]", f"expected a status code 100-599, got {code!r}"))
    return out

