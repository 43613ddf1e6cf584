"""A PostgreSQL store URL: what goes to libpq, plait's own options, and the form that
may be shown (the password redacted).  No driver is imported here, so the CLI and
``plait.connect`` can check and compare URLs without loading psycopg.

``postgresql://user:password@host:5432/dbname?sslmode=require&pool_max=20``: libpq's URI
(every libpq parameter works, as do the ``PG*`` environment variables), plus plait's
options, which are removed before the URI goes to libpq:

- ``pool_min`` (default 1), ``pool_max`` (default 10): the connection pool's sizes;
- ``retry_for`` (seconds, default 30): how long an operation that lost its connection
  keeps trying while the server comes back (``PostgresStore``).

Without ``connect_timeout`` a connection attempt gives up after CONNECT_TIMEOUT_S.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from ..errors import StoreError

SCHEMES = ("postgresql", "postgres")
CONNECT_TIMEOUT_S = 10
_SECRET_KEYS = frozenset({"password", "sslpassword"})
_DEFAULTS = {"pool_min": 1, "pool_max": 10, "retry_for": 30.0}


@dataclass(frozen=True, slots=True, kw_only=True)
class PostgresUrl:
    conninfo: str  # for libpq: plait's options removed, a connect_timeout added
    where: str  # the URL as it may be shown: the password replaced by ***
    pool_min: int
    pool_max: int
    retry_for: float


def is_postgres(url: str) -> bool:
    scheme, separator, _ = url.partition("://")
    return bool(separator) and scheme.lower() in SCHEMES


def redact(url: str) -> str:
    """``url`` with any password replaced by ``***`` (in the authority or the query);
    what errors and logs show.  A URL that cannot be parsed is not shown at all."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, host = netloc.rsplit("@", 1)
            if ":" in userinfo:
                netloc = f"{userinfo.split(':', 1)[0]}:***@{host}"
        query = [(k, "***" if k in _SECRET_KEYS else v)
                 for k, v in parse_qsl(parts.query, keep_blank_values=True)]
        return urlunsplit((parts.scheme, netloc, parts.path,
                           urlencode(query, safe="*/:", quote_via=quote), parts.fragment))
    except ValueError:
        return "<a PostgreSQL URL that cannot be parsed>"


def parse_url(url: str) -> PostgresUrl:
    """Split ``url`` into libpq's URI and plait's options; StoreError (naming the URL,
    its password redacted) for a URL that is not a PostgreSQL one or a bad option."""
    where = redact(url)
    if not is_postgres(url):
        raise StoreError(f"bad PostgreSQL URL {where!r}: write "
                         f"postgresql://user:password@host:5432/dbname")
    try:
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False)
        _ = parts.port  # a port that is not a number raises here
    except ValueError as exc:
        raise StoreError(f"bad PostgreSQL URL {where!r}: {exc}") from exc
    options: dict[str, float] = dict(_DEFAULTS)
    libpq: list[tuple[str, str]] = []
    for key, value in query:
        if key in _DEFAULTS:
            options[key] = _option(key, value, where)
        else:
            libpq.append((key, value))
    if options["pool_min"] > options["pool_max"]:
        raise StoreError(f"PostgreSQL URL {where!r}: pool_min ({options['pool_min']:g}) "
                         f"is larger than pool_max ({options['pool_max']:g})")
    if not any(key == "connect_timeout" for key, _ in libpq):
        libpq.append(("connect_timeout", str(CONNECT_TIMEOUT_S)))
    conninfo = urlunsplit((parts.scheme, parts.netloc, parts.path,
                           urlencode(libpq, quote_via=quote), parts.fragment))
    return PostgresUrl(conninfo=conninfo, where=where, pool_min=int(options["pool_min"]),
                       pool_max=int(options["pool_max"]), retry_for=options["retry_for"])


def _option(key: str, value: str, where: str) -> float:
    try:
        number = float(value) if key == "retry_for" else int(value)
    except ValueError:
        number = -1
    smallest = 1 if key == "pool_max" else 0
    if number < smallest or number != number:  # NaN
        kind = "a number of seconds" if key == "retry_for" else "a whole number"
        raise StoreError(f"PostgreSQL URL {where!r}: {key} must be {kind} of at least "
                         f"{smallest}, not {value!r}")
    return number
