"""PostgreSQL store URLs: libpq's URI with plait's own options split off, and the
password never shown.  No server needed."""

from __future__ import annotations

import pytest

from plait.errors import StoreError
from plait.store import open_store
from plait.store.postgres_url import CONNECT_TIMEOUT_S, is_postgres, parse_url, redact
from plait.store.shared import shared_key


def test_defaults_and_a_connect_timeout() -> None:
    url = parse_url("postgresql://ada@db.example:5433/runs")
    assert (url.pool_min, url.pool_max, url.retry_for) == (1, 10, 30.0)
    assert url.conninfo == \
        f"postgresql://ada@db.example:5433/runs?connect_timeout={CONNECT_TIMEOUT_S}"
    assert url.where == "postgresql://ada@db.example:5433/runs"


def test_plait_options_are_removed_and_libpq_ones_kept() -> None:
    url = parse_url("postgres://ada:s3cret@h/db?sslmode=require&pool_max=20&pool_min=2"
                    "&retry_for=2.5&connect_timeout=3&application_name=plait%20w1")
    assert (url.pool_min, url.pool_max, url.retry_for) == (2, 20, 2.5)
    assert url.conninfo == ("postgres://ada:s3cret@h/db?sslmode=require&connect_timeout=3"
                            "&application_name=plait%20w1")
    assert "s3cret" not in url.where and "ada:***@h" in url.where


@pytest.mark.parametrize(("url", "secret"), [
    ("postgresql://ada:s3cret@h:5432/db", "s3cret"),
    ("postgresql://ada:p%40ss@h/db?sslmode=require", "p%40ss"),
    ("postgresql://h/db?user=ada&password=s3cret", "s3cret"),
    ("postgresql://h/db?sslpassword=k3y", "k3y"),
])
def test_passwords_are_redacted(url: str, secret: str) -> None:
    shown = redact(url)
    assert secret not in shown and "***" in shown
    assert shown.startswith("postgresql://") and "/db" in shown


@pytest.mark.parametrize(("url", "complaint"), [
    ("postgresql://h/db?pool_max=0", "pool_max must be a whole number of at least 1"),
    ("postgresql://h/db?pool_min=-1", "pool_min must be a whole number of at least 0"),
    ("postgresql://h/db?pool_min=3&pool_max=2", "pool_min (3) is larger than pool_max (2)"),
    ("postgresql://h/db?retry_for=soon", "retry_for must be a number of seconds"),
    ("postgresql://h/db?retry_for=nan", "retry_for must be a number of seconds"),
    ("postgresql://ada:pw@h:port/db", "bad PostgreSQL URL"),
    ("mysql://h/db", "bad PostgreSQL URL"),
])
def test_bad_urls_are_refused_without_showing_the_password(url: str, complaint: str) -> None:
    with pytest.raises(StoreError) as info:
        parse_url(url)
    assert complaint in str(info.value)
    assert ":pw@" not in str(info.value)


def test_both_schemes_open_the_postgres_store_without_connecting() -> None:
    from plait.store.postgres import PostgresStore

    for scheme in ("postgresql", "postgres", "PostgreSQL"):
        store = open_store(f"{scheme}://ada:s3cret@127.0.0.1:1/db")
        assert isinstance(store, PostgresStore)
        assert "s3cret" not in store.where
    assert open_store("postgresql://h/db", read_only=True).read_only is True  # type: ignore[attr-defined]
    assert not is_postgres("postgresql:/h/db") and not is_postgres("sqlite:///x.db")


def test_unknown_schemes_name_postgresql_among_the_known_ones() -> None:
    with pytest.raises(StoreError, match="postgresql://"):
        open_store("mongodb://h/db")


def test_plait_connect_shares_a_store_per_url_and_checks_it_first() -> None:
    assert shared_key("postgresql://h/db?pool_max=3") == "postgresql://h/db?pool_max=3"
    with pytest.raises(StoreError, match="pool_max"):
        shared_key("postgresql://h/db?pool_max=x")
