"""What bounds a template's render (docs/expressions.md), without Jinja2: its time and size limits,
the stop flag its owner sets, and the context key of declared outputs.  The sandbox
(``sandbox``) enforces them; the runtime holds a ``Stop`` per attempt whether or not the
step has templates."""

from __future__ import annotations

from dataclasses import dataclass

MAX_SIZE = 1 << 20  # 1 MiB: characters of text, items of a list, bytes of an integer
MAX_SECONDS = 2.0

# a context key no template can name (not an identifier): declared output key -> steps
OUTPUT_OWNERS = "plait:outputs"


@dataclass(slots=True)
class Stop:
    """Set by whoever owns a render (the step's task) to end it at the next check."""

    requested: bool = False
