"""plait's own log lines (the ``plait`` loggers: engine, workers, scheduler, server) as
text or as JSON, one object per line (``plait --log-format json``, ``PLAIT_LOG_FORMAT``).

JSON lines::

    {"ts": "2026-01-02T03:04:05.678Z", "level": "WARNING", "logger": "plait.worker",
     "message": "...", "run_id": "...", "step_id": "...",   # extra fields, when given
     "exc": "Traceback ..."}                                 # when an exception is logged

Extra fields are whatever the call passed as ``extra=`` (plait passes ``run_id`` and
``step_id`` where it knows them); values that are not JSON are written as their text.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import UTC, datetime
from typing import TextIO

__all__ = ["ENV", "FORMATS", "JsonFormatter", "configure", "format_from_environment"]

ENV = "PLAIT_LOG_FORMAT"
FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(message)s"
# the attributes every LogRecord has: anything else was given as ``extra``
_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname, "logger": record.name,
            "message": record.getMessage()}
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_") and key not in out:
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exc"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def format_from_environment() -> str:
    """``PLAIT_LOG_FORMAT`` (text or json; anything else: text)."""
    value = os.environ.get(ENV, "text").strip().lower()
    return value if value in FORMATS else "text"


class _PlaitHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler ``configure`` installs (so a second call replaces it)."""


def configure(fmt: str | None = None, *, level: int | None = None,
              stream: TextIO | None = None) -> logging.Handler:
    """Send the ``plait`` loggers' records to ``stream`` (stderr) in ``fmt`` (default:
    ``PLAIT_LOG_FORMAT``, else text), replacing what an earlier call installed.
    ``level``: the ``plait`` logger's level (None: leave it)."""
    fmt = fmt or format_from_environment()
    if fmt not in FORMATS:
        raise ValueError(f"unknown log format {fmt!r}: use one of {', '.join(FORMATS)}")
    root = logging.getLogger("plait")
    for old in [h for h in root.handlers if isinstance(h, _PlaitHandler)]:
        root.removeHandler(old)
    handler = _PlaitHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root.addHandler(handler)
    if level is not None:
        root.setLevel(level)
    return handler
