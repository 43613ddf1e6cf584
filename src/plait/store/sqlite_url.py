"""The SQLite store's URL: ``sqlite:///path.db?synchronous=FULL``."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qsl

from ..errors import StoreError

SYNCHRONOUS_MODES = ("NORMAL", "FULL")


def parse_url(url: str) -> tuple[Path, str]:
    """``sqlite:///path.db?synchronous=FULL`` -> (path, synchronous)."""
    if not url.startswith("sqlite:///"):
        raise StoreError(f"bad SQLite URL {url!r}: write sqlite:///relative/path.db or "
                         f"sqlite:////absolute/path.db (three slashes, then the path)")
    location, _, query = url[len("sqlite:///"):].partition("?")
    if location in ("", ":memory:"):
        raise StoreError(f"bad SQLite URL {url!r}: it names no database file "
                         f"(use memory:// for a store that is not kept)")
    synchronous = "NORMAL"
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key != "synchronous":
            raise StoreError(f"SQLite URL {url!r}: unknown option {key!r} "
                             f"(known: synchronous)")
        if value.upper() not in SYNCHRONOUS_MODES:
            raise StoreError(f"SQLite URL {url!r}: synchronous must be NORMAL or FULL, "
                             f"not {value!r}")
        synchronous = value.upper()
    return Path(location), synchronous
