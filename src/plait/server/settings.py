"""What the server reads from its environment (SPEC 9), as one value."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from ..runtime.netpolicy import UNTRUSTED, NetworkPolicy

TOKEN_ENV = "PLAIT_API_TOKEN"  # noqa: S105 - a variable name
WEBHOOK_SECRET_ENV = "PLAIT_WEBHOOK_SECRET"  # noqa: S105 - a variable name
ALLOWED_MODULES_ENV = "PLAIT_ALLOWED_MODULES"
MAX_BODY_BYTES = 1024 * 1024  # SPEC 9: bodies over 1 MiB are refused with 413
SESSION_TTL_S = 12 * 3600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSettings:
    """``token``: PLAIT_API_TOKEN (None: no authentication).  ``webhook_secret``:
    PLAIT_WEBHOOK_SECRET (None: every hook is refused).  ``allowed_modules``: the module
    prefixes of PLAIT_ALLOWED_MODULES that python steps of API-registered definitions may
    call.  ``http_policy``: where the http/llm steps of the runs the server executes may
    connect (the UNTRUSTED profile plus PLAIT_ALLOWED_HOSTS / PLAIT_DENIED_NETWORKS)."""

    token: str | None = None
    webhook_secret: str | None = None
    allowed_modules: tuple[str, ...] = ()
    http_policy: NetworkPolicy = UNTRUSTED
    max_body_bytes: int = MAX_BODY_BYTES
    session_ttl: float = SESSION_TTL_S

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> ServerSettings:
        env = os.environ if environ is None else environ
        modules = tuple(p.strip() for p in env.get(ALLOWED_MODULES_ENV, "").split(",")
                        if p.strip())
        return cls(token=env.get(TOKEN_ENV) or None,
                   webhook_secret=env.get(WEBHOOK_SECRET_ENV) or None,
                   allowed_modules=modules,
                   http_policy=NetworkPolicy.from_environment(env, base=UNTRUSTED))
