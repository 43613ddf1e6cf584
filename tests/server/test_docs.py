"""``/docs`` works offline: its page references only this server's URLs, and each
answers 200 (nothing is loaded from the internet at run time)."""

from __future__ import annotations

import re
from typing import Any

from .conftest import TOKEN, Client

REFERENCE = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']|url:\s*["']([^"']+)["']""")


def references(html: str) -> list[str]:
    return [a or b for a, b in REFERENCE.findall(html)]


def test_docs_page_loads_everything_from_this_server(make_client: Client) -> None:
    client = make_client()
    page = client.get("/docs")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    urls = references(page.text)
    assert "/openapi.json" in urls
    assert any(u.endswith("swagger-ui-bundle.js") for u in urls)
    assert any(u.endswith("swagger-ui.css") for u in urls)
    for url in urls:
        assert url.startswith("/") and not url.startswith("//"), url
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
    assert "SwaggerUIBundle" in client.get("/docs/assets/swagger-ui-bundle.js").text
    assert not re.search(r"https?://", page.text), page.text


def test_redoc_from_a_cdn_is_gone_and_missing_assets_are_404(make_client: Client) -> None:
    client = make_client()
    assert client.get("/redoc").status_code == 404
    missing = client.get("/docs/assets/nothing.js")
    assert missing.status_code == 404


def test_docs_needs_the_token_but_its_static_files_do_not(make_client: Client) -> None:
    client = make_client(token=TOKEN)
    assert client.get("/docs").status_code == 401
    auth: dict[str, Any] = {"headers": {"Authorization": f"Bearer {TOKEN}"}}
    assert client.get("/docs", **auth).status_code == 200
    assert client.get("/openapi.json").status_code == 401
    assert client.get("/docs/assets/swagger-ui.css").status_code == 200
