"""``secrets.NAME`` in templates: read from ``PLAIT_SECRET_NAME``, redacted from
everything stored or logged."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping

from ..core.model import JSON

REDACTED = "***"


class Secrets(Mapping[str, str]):
    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._env = environ if environ is not None else os.environ
        self.used: set[str] = set()

    def __getitem__(self, name: str) -> str:
        value = self._env.get(f"PLAIT_SECRET_{name}")
        if value is None:
            raise KeyError(f"secret {name!r} is not set (environment variable "
                           f"PLAIT_SECRET_{name})")
        if value:
            self.used.add(value)
        return value

    def __iter__(self) -> Iterator[str]:
        return (k[len("PLAIT_SECRET_"):] for k in self._env if k.startswith("PLAIT_SECRET_"))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def redact(self, value: JSON) -> JSON:
        if not self.used:
            return value
        if isinstance(value, str):
            for secret in self.used:
                value = value.replace(secret, REDACTED)
            return value
        if isinstance(value, dict):
            return {k: self.redact(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.redact(v) for v in value]
        return value

    def redact_text(self, text: str | None) -> str | None:
        return None if text is None else str(self.redact(text))
