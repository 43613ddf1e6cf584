"""Did-you-mean suggestions for unknown names."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(name: str, known: Iterable[str]) -> str | None:
    """``did you mean 'x'?`` for the closest known name, or None when none is close."""
    pool = list(known)
    if len(pool) > 5000:  # difflib is quadratic-ish; prefilter on the first letter
        pool = [k for k in pool if k[:1] == name[:1]] or pool[:5000]
    close = difflib.get_close_matches(name, pool, n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else None
