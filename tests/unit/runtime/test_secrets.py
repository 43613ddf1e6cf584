"""Redaction of secrets and of the forms derived from them."""

from __future__ import annotations

import base64
import html
import json
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plait.steps.secrets import REDACTED, Secrets

SECRET = "tok/en+v@lue&é<'\">=="


def used(*values: str) -> Secrets:
    secrets = Secrets({f"PLAIT_SECRET_S{i}": v for i, v in enumerate(values)})
    for i in range(len(values)):
        secrets[f"S{i}"]
    return secrets


ENCODINGS = {
    "plain": lambda s: s,
    "quote": lambda s: quote(s, safe=""),
    "quote_slash": quote,
    "quote_plus": quote_plus,
    "quote_lower_hex": lambda s: quote(s, safe="").lower(),
    "json": lambda s: json.dumps(s)[1:-1],
    "json_utf8": lambda s: json.dumps(s, ensure_ascii=False)[1:-1],
    "html": html.escape,
    "html_noquote": lambda s: html.escape(s, quote=False),
    "base64": lambda s: base64.b64encode(s.encode()).decode(),
    "base64_unpadded": lambda s: base64.b64encode(s.encode()).decode().rstrip("="),
    "base64url": lambda s: base64.urlsafe_b64encode(s.encode()).decode(),
}


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_every_derived_form_is_redacted(encoding: str) -> None:
    form = ENCODINGS[encoding](SECRET)
    if encoding == "quote_lower_hex":
        form = quote(SECRET, safe="").replace("%2F", "%2f").replace("%C3%A9", "%c3%a9")
    text = f"before {form} after"

    assert used(SECRET).redact_text(text) == f"before {REDACTED} after"


@pytest.mark.parametrize("user", ["", "u", "us", "use", "user", "a-longer-user-name"])
def test_base64_of_a_basic_auth_pair_does_not_reveal_the_secret(user: str) -> None:
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        encoded = encode(f"{user}:{SECRET}".encode()).decode()
        redacted = used(SECRET).redact_text(f"Authorization: Basic {encoded}")
        assert redacted is not None and REDACTED in redacted
        # what is left cannot hold the secret: at most 2 characters beside the user part
        left = redacted.removeprefix("Authorization: Basic ").replace(REDACTED, "")
        assert len(left) <= len(encode(f"{user}:".encode()).decode()) + 4


def test_structures_keys_and_several_secrets_are_redacted() -> None:
    secrets = used(SECRET, "second-secret")
    value = {"url": f"https://h/?k={quote_plus(SECRET)}", f"key {SECRET}": [1, "second-secret"],
             "nested": {"b64": base64.b64encode(b"second-secret").decode()}}

    assert secrets.redact(value) == {"url": f"https://h/?k={REDACTED}",
                                     f"key {REDACTED}": [1, REDACTED],
                                     "nested": {"b64": REDACTED}}


def test_every_secret_of_the_environment_is_redacted_even_unread() -> None:
    """Step code may take a secret from the environment itself and log or return it."""
    secrets = Secrets({"PLAIT_SECRET_X": SECRET, "PLAIT_SECRET_EMPTY": "",
                       "OTHER": "not-a-secret"})
    assert secrets.redact(SECRET) == REDACTED
    assert secrets.redact("not-a-secret") == "not-a-secret"
    assert secrets["X"] == SECRET
    assert secrets.redact(f"a {SECRET} b") == f"a {REDACTED} b"


def test_a_secret_set_after_the_run_started_is_redacted_once_read() -> None:
    env = {"PLAIT_SECRET_A": "first-secret"}
    secrets = Secrets(env)
    env["PLAIT_SECRET_B"] = "later-secret"
    assert secrets.redact("later-secret") == "later-secret"
    assert secrets["B"] == "later-secret"
    assert secrets.redact("later-secret first-secret") == f"{REDACTED} {REDACTED}"


@given(st.text(min_size=8, max_size=40), st.text(max_size=20), st.text(max_size=20))
def test_a_secret_never_survives_in_base64_at_any_offset(
        secret: str, before: str, after: str) -> None:
    encoded = base64.b64encode((before + secret + after).encode()).decode()
    redacted = used(secret).redact_text(encoded)
    assert redacted is not None
    size = len(secret.encode())
    for offset in range(3):  # what encodes the secret's bits, wherever it starts
        alone = base64.b64encode(b"\0" * offset + secret.encode()).decode()
        inner = alone[-(-8 * offset // 6) + 1: 8 * (offset + size) // 6 - 1]
        assert inner not in redacted
