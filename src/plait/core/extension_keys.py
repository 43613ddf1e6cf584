"""Extension keys: ``x-...`` keys a definition may carry for its own use (YAML anchors
to merge into steps, notes for other tools), as in docker-compose files.

They are accepted, and ignored, in every mapping whose field names the loader checks:
the top level, ``defaults`` and ``defaults.TYPE``, each step (a map's inline step
included), and a step's ``retry``, ``cache`` and ``circuit_breaker``, each pool and
``limits``.  Ignored means they are not part of the model: not stored, not in the
canonical JSON, so they never change a definition's fingerprint.  Inside a field that
is data (``with``, ``headers``, ``json``, ``value``, ``input``) an ``x-`` key is data
like any other.
"""

from __future__ import annotations

PREFIX = "x-"


def is_extension(key: object) -> bool:
    return isinstance(key, str) and key.startswith(PREFIX)
