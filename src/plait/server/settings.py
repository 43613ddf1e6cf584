"""What the server reads from its environment, as one value."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from ..core.model import Limits
from ..core.sizes import parse_size
from ..core.trust import CAP_SETTINGS, ENGINE_LIMITS, TrustPolicy
from ..runtime.retention import Retention, retention_from_environment
from ..steps.netpolicy import UNTRUSTED, NetworkPolicy

TOKEN_ENV = "PLAIT_API_TOKEN"  # noqa: S105 - a variable name
WEBHOOK_SECRET_ENV = "PLAIT_WEBHOOK_SECRET"  # noqa: S105 - a variable name
ALLOWED_MODULES_ENV = "PLAIT_ALLOWED_MODULES"
ALLOWED_KEY_ENVS_ENV = "PLAIT_ALLOWED_KEY_ENVS"
ALLOWED_SECRETS_ENV = "PLAIT_ALLOWED_SECRETS"
ALLOWED_HOSTNAMES_ENV = "PLAIT_ALLOWED_HOSTNAMES"
HEADER_TIMEOUT_ENV = "PLAIT_HEADER_TIMEOUT"
MAX_BODY_BYTES = 1024 * 1024  # bodies over 1 MiB are refused with 413
SESSION_TTL_S = 12 * 3600.0
MIN_TOKEN_LENGTH = 16  # a shorter PLAIT_API_TOKEN is guessed too easily: refused
HEADER_TIMEOUT_S = 10.0
LOGIN_FAILURES = 5  # failed logins a client address may make ...
LOGIN_WINDOW_S = 60.0  # ... in this many seconds before it gets 429


class SettingError(ValueError):
    """An environment variable of the server has a bad value: ``variable`` names it."""

    def __init__(self, variable: str, message: str) -> None:
        self.variable = variable
        super().__init__(f"{variable}: {message}")


def listed(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    """The comma-separated, non-empty entries of variable ``name``."""
    return tuple(p.strip() for p in env.get(name, "").split(",") if p.strip())


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSettings:
    """``token``: PLAIT_API_TOKEN (None: no authentication).  ``webhook_secret``:
    PLAIT_WEBHOOK_SECRET (None: every hook is refused).  ``allowed_modules``: the module
    prefixes of PLAIT_ALLOWED_MODULES that python steps of API-registered definitions may
    call.  ``allowed_key_envs``: PLAIT_ALLOWED_KEY_ENVS, the variables an untrusted
    ``llm`` step's ``api_key_env`` may name (never a ``PLAIT_*`` one).
    ``allowed_secrets``: PLAIT_ALLOWED_SECRETS, the ``secrets.NAME`` an untrusted
    definition may read (only in fields that leave the process).
    ``allowed_hostnames``: PLAIT_ALLOWED_HOSTNAMES, host names (besides the address it
    listens on and loopback names) the server answers to, e.g. its name behind a proxy.
    ``caps``: the most any definition the server runs may ask for in ``limits``
    (PLAIT_MAX_STEPS, PLAIT_MAX_MAP_ITEMS, PLAIT_MAX_OUTPUT_BYTES, PLAIT_MAX_DEPTH,
    PLAIT_MAX_SUBWORKFLOW_DEPTH; default: the engine's default limits).
    ``http_policy``: where the http/llm steps of the runs the server executes may
    connect (the UNTRUSTED profile plus PLAIT_ALLOWED_HOSTS / PLAIT_DENIED_NETWORKS).
    ``header_timeout``: PLAIT_HEADER_TIMEOUT, seconds a request's headers may take to
    arrive (``server.protocol``).  ``login_failures`` per ``login_window`` seconds: the
    failed logins one client address may make before ``POST /api/login`` answers 429."""

    token: str | None = None
    webhook_secret: str | None = None
    allowed_modules: tuple[str, ...] = ()
    allowed_key_envs: tuple[str, ...] = ()
    allowed_secrets: tuple[str, ...] = ()
    allowed_hostnames: tuple[str, ...] = ()
    caps: Limits = ENGINE_LIMITS
    http_policy: NetworkPolicy = UNTRUSTED
    max_body_bytes: int = MAX_BODY_BYTES
    session_ttl: float = SESSION_TTL_S
    header_timeout: float = HEADER_TIMEOUT_S
    login_failures: int = LOGIN_FAILURES
    login_window: float = LOGIN_WINDOW_S
    retention: Retention | None = None  # PLAIT_RETENTION (runtime.retention)

    @property
    def trust(self) -> TrustPolicy:
        """The rules every definition the server registers or runs must follow."""
        return TrustPolicy(allowed_modules=self.allowed_modules,
                           allowed_key_envs=self.allowed_key_envs,
                           allowed_secrets=self.allowed_secrets, caps=self.caps)

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> ServerSettings:
        """The settings in ``environ`` (default: the process's); SettingError naming
        the variable whose value is bad."""
        env = os.environ if environ is None else environ
        return cls(token=env.get(TOKEN_ENV) or None,
                   webhook_secret=env.get(WEBHOOK_SECRET_ENV) or None,
                   allowed_modules=listed(env, ALLOWED_MODULES_ENV),
                   allowed_key_envs=listed(env, ALLOWED_KEY_ENVS_ENV),
                   allowed_secrets=listed(env, ALLOWED_SECRETS_ENV),
                   allowed_hostnames=listed(env, ALLOWED_HOSTNAMES_ENV),
                   caps=caps_from(env),
                   http_policy=NetworkPolicy.from_environment(env, base=UNTRUSTED),
                   header_timeout=env_seconds(env, HEADER_TIMEOUT_ENV, HEADER_TIMEOUT_S),
                   retention=retention_from_environment(env))


def caps_from(env: Mapping[str, str]) -> Limits:
    """The limits caps of ``PLAIT_MAX_*`` (unset: the engine's default limit)."""
    base = Limits()
    values = {key: _cap(env, key, getattr(base, key)) for key in CAP_SETTINGS}
    return Limits(**values)


def _cap(env: Mapping[str, str], key: str, default: int) -> int:
    variable = CAP_SETTINGS[key]
    text = env.get(variable, "").strip()
    if not text:
        return default
    if key == "max_output_bytes":
        try:
            return parse_size(text)
        except ValueError as exc:
            raise SettingError(variable, str(exc)) from None
    if not (text.isascii() and text.isdigit() and len(text) < 19) or int(text) < 1:
        raise SettingError(variable, f"expected a whole number of at least 1 (below "
                           f"10^18), got {text!r}")
    return int(text)


def env_seconds(env: Mapping[str, str], name: str, default: float) -> float:
    """Variable ``name`` as a positive number of seconds (``default`` when unset);
    SettingError naming the variable otherwise."""
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 86400:
        raise SettingError(name, f"expected a number of seconds above 0 and below a "
                           f"day, got {text!r}")
    return value
