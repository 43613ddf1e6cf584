"""Events sent to a run by name (``plait signal``; docs/waiting.md): what a name and its
data may be, checked alike by every way of sending one and by every wait."""

from __future__ import annotations

import json

from .jsoncheck import NotJSON, checked_json
from .model import JSON

MAX_NAME_CHARS = 199  # an event name is 1 to 199 characters, none of them "/"
MAX_DATA_BYTES = 1 << 20  # an event's data, as JSON text


def event_name_problem(name: object) -> str | None:
    """What is wrong with ``name`` as an event name, or None."""
    if not isinstance(name, str):
        return f"an event name must be text, got {type(name).__name__}"
    if not name.strip():
        return "an event name cannot be empty"
    if "/" in name:
        return f"an event name cannot contain '/', got {name!r}"
    if len(name) > MAX_NAME_CHARS:
        return (f"an event name is at most {MAX_NAME_CHARS} characters, got "
                f"{len(name)}")
    return None


def checked_data(data: object) -> JSON:
    """``data`` as an event's data: JSON of at most 1 MiB; ValueError naming what is
    wrong otherwise."""
    try:
        checked = checked_json(data)
    except NotJSON as exc:
        raise ValueError(exc.describe("the event's data")) from None
    size = len(json.dumps(checked, ensure_ascii=False).encode())
    if size > MAX_DATA_BYTES:
        raise ValueError(f"the event's data is {size:,} bytes of JSON, over the "
                         f"{MAX_DATA_BYTES:,} bytes (1 MiB) an event may carry")
    return checked
