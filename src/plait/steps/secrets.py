"""``secrets.NAME`` in templates: read from ``PLAIT_SECRET_NAME``, redacted from
everything stored, logged or shown.  Every ``PLAIT_SECRET_*`` value set when a run
starts is redacted, whether a template read it or step code took it from the
environment itself.

Redaction covers the secret as it is and the forms plait (and the services it calls)
derive from it: URL-encoded (``quote`` and ``quote_plus``, hex digits in either case),
JSON-escaped, HTML-escaped, and base64 (standard and URL-safe, with or without padding).
Base64 is also caught where the secret is part of a longer encoded value (a Basic
``user:secret`` header): the characters of an encoding that depend on the secret alone
are the same wherever it starts, up to its offset modulo 3, so those three cores are
redacted too.  At most a character or two at each edge of such a core remains, which
cannot be decoded back into the secret.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
from collections.abc import Collection, Iterable, Iterator, Mapping
from urllib.parse import quote, quote_plus

from ..core.model import JSON

REDACTED = "***"
# A base64 core shorter than this would redact unrelated text too often.
_MIN_CORE = 6
_PERCENT = re.compile(r"%[0-9A-F]{2}")


_PREFIX = "PLAIT_SECRET_"

# Credentials plait read for a step outside ``secrets.*`` (an llm step's API key, from
# the variable its ``api_key_env`` names): redacted by every Secrets of the process.
_EXTRA: set[str] = set()


def add_redacted(value: str) -> None:
    """Redact ``value`` (in every derived form) from all that this process stores, logs
    or shows from now on, like a ``PLAIT_SECRET_*`` value."""
    if value:
        _EXTRA.add(value)


def _secret_values(env: Mapping[str, str]) -> set[str]:
    """The non-empty values of every ``PLAIT_SECRET_*`` variable.  For ``os.environ`` on
    POSIX the names are matched on its raw table of bytes, and only those few decoded:
    decoding every variable of the environment was a tenth of a small run's cost."""
    raw = getattr(env, "_data", None) if env is os.environ and os.name == "posix" else None
    if isinstance(raw, dict):
        prefix = _PREFIX.encode()
        names = [key.decode() for key in raw
                 if isinstance(key, bytes) and key.startswith(prefix)]
        return {value for name in names if (value := env.get(name))}
    return {value for key, value in env.items() if key.startswith(_PREFIX) and value}


class Secrets(Mapping[str, str]):
    """The ``secrets`` of a run's templates.  ``allowed``: the only names templates may
    read (an engine running untrusted definitions: PLAIT_ALLOWED_SECRETS); None: any."""

    def __init__(self, environ: Mapping[str, str] | None = None, *,
                 allowed: Collection[str] | None = None) -> None:
        self._env = environ if environ is not None else os.environ
        self._allowed = None if allowed is None else frozenset(allowed)
        # Every secret in the environment is redacted, not only those a template read:
        # step code may read one itself (os.environ) and log or return it.
        self.used: set[str] = _secret_values(self._env)
        self._pattern: re.Pattern[str] | None = None
        self._covered = 0  # how many of ``used`` the pattern covers (``used`` only grows)

    def __getitem__(self, name: str) -> str:
        if self._allowed is not None and name not in self._allowed:
            raise KeyError(f"secret {name!r} may not be read here: it is not listed in "
                           f"PLAIT_ALLOWED_SECRETS")
        value = self._env.get(f"PLAIT_SECRET_{name}")
        if value is None:
            raise KeyError(f"secret {name!r} is not set (environment variable "
                           f"PLAIT_SECRET_{name})")
        if value:
            self.used.add(value)
        return value

    def __iter__(self) -> Iterator[str]:
        return (k[len("PLAIT_SECRET_"):] for k in self._env if k.startswith("PLAIT_SECRET_")
                and (self._allowed is None or k[len("PLAIT_SECRET_"):] in self._allowed))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    @property
    def redacting(self) -> bool:
        """Whether there is anything to redact (a used secret or an added value)."""
        return bool(self.used or _EXTRA)

    def redact(self, value: JSON) -> JSON:
        """``value`` with every used secret, in every derived form, replaced by ***."""
        if not self.used and not _EXTRA:
            return value
        return _redact(value, self._current_pattern())

    def redact_text(self, text: str | None) -> str | None:
        if text is None or (not self.used and not _EXTRA):
            return text
        return self._current_pattern().sub(REDACTED, text)

    def _current_pattern(self) -> re.Pattern[str]:
        if self._pattern is None or self._covered != len(self.used) + len(_EXTRA):
            # a step thread may add one meanwhile: count what we saw (both sets only grow)
            used = list(self.used) + list(_EXTRA)
            self._pattern = redaction_pattern(set(used))
            self._covered = len(used)
        return self._pattern


def _redact(value: JSON, pattern: re.Pattern[str]) -> JSON:
    if isinstance(value, str):
        return pattern.sub(REDACTED, value)
    if isinstance(value, dict):
        return {pattern.sub(REDACTED, k): _redact(v, pattern) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact(v, pattern) for v in value]
    return value


def redaction_pattern(secrets: Iterable[str]) -> re.Pattern[str]:
    """One regular expression matching every form of every secret, longest first (so a
    padded base64 value is redacted whole, not around its core)."""
    forms = {form for secret in secrets for form in derived_forms(secret)}
    ordered = sorted(forms, key=lambda f: (-len(f), f))
    # a percent escape matches in either hex case (%2F, %2f)
    return re.compile("|".join(_PERCENT.sub(_either_case, re.escape(form))
                               for form in ordered))


def _either_case(escape: re.Match[str]) -> str:
    return "%" + "".join(f"[{c}{c.lower()}]" if c.isalpha() else c
                         for c in escape.group()[1:])


def derived_forms(secret: str) -> set[str]:
    """The secret and the encodings of it that may end up in what is stored or shown."""
    percent = {quote(secret, safe=""), quote(secret), quote_plus(secret),
               quote_plus(secret, safe="")}
    escaped = {json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1],
               html.escape(secret), html.escape(secret, quote=False),
               html.escape(secret).replace("&#x27;", "&#39;")}
    forms = {secret} | percent | escaped | _base64_forms(secret.encode())
    return {form for form in forms if form}


def _base64_forms(raw: bytes) -> set[str]:
    out: set[str] = set()
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        whole = encode(raw).decode()
        out |= {whole, whole.rstrip("=")}
        for offset in range(3):
            core = _core(encode(b"\0" * offset + raw).decode(), offset, len(raw))
            if len(core) >= _MIN_CORE:
                out.add(core)
    return out


def _core(encoded: str, offset: int, size: int) -> str:
    """The characters of ``encoded`` (the base64 of ``offset`` bytes, then the secret's
    ``size`` bytes) that depend on the secret's bits only: each character holds 6 bits,
    the secret's bits run from ``8 * offset`` to ``8 * (offset + size)``."""
    first = -(-8 * offset // 6)  # ceil: the first character after the prefix's bits
    last = 8 * (offset + size) // 6  # floor: characters wholly inside the secret's bits
    return encoded[first:last]
