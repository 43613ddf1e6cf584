"""`plait run` and `plait show` against what an attacker or a careless definition tries:
connecting to the metadata service, leaking a secret in a derived form."""

from __future__ import annotations

import base64
import html
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, quote_plus, unquote_plus, urlsplit

import pytest

SECRET = "s3cr3t/v@l+ue&x=é<'>"


def secret_forms(secret: str = SECRET) -> dict[str, str]:
    """The forms of the secret that must never be stored or shown."""
    raw = secret.encode()
    return {"plain": secret, "quote": quote(secret, safe=""), "quote_plus": quote_plus(secret),
            "json": json.dumps(secret)[1:-1], "html": html.escape(secret),
            "base64": base64.b64encode(raw).decode(),
            "base64url": base64.urlsafe_b64encode(raw).decode().rstrip("="),
            "basic": base64.b64encode(b"user:" + raw).decode()[8:-4]}


def assert_no_secret(text: str, where: str) -> None:
    for name, form in secret_forms().items():
        assert form not in text, f"{where} holds the secret ({name}: {form!r})"


class Handler(BaseHTTPRequestHandler):
    """/jump: 302 to the metadata address; /echo: the query in many forms, as JSON;
    /fail: 500 with the query in its body."""

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        if path == "/jump":
            self.reply(302, b"", location="http://169.254.169.254/latest/meta-data")
            return
        value = dict(p.split("=", 1) for p in query.split("&") if "=" in p).get("k", "")
        plain = unquote_plus(value)
        echoed = {"raw_query": query, "path": self.path, "value": plain,
                  "b64": base64.b64encode(plain.encode()).decode(),
                  "basic": base64.b64encode(b"user:" + plain.encode()).decode(),
                  "html": html.escape(plain)}
        body = json.dumps(echoed).encode()
        self.reply(500 if path == "/fail" else 200, body)

    def reply(self, status: int, body: bytes, location: str | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json" if status == 200 else "text/plain")
        self.send_header("Content-Length", str(len(body)))
        if location:
            self.send_header("Location", location)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, list[str]]]:
    """(base URL, the paths requested) of a local HTTP server."""
    requested: list[str] = []

    class Recording(Handler):
        def do_GET(self) -> None:
            requested.append(urlsplit(self.path).path)
            super().do_GET()

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Recording)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", requested
    httpd.shutdown()
    httpd.server_close()
    thread.join()


# ------------------------------------------------------------------ network policy


def test_run_refuses_a_redirect_to_the_metadata_service(plait, write, server):
    base, requested = server
    write("flow.yaml", f"""
        name: fetcher
        steps:
          - {{id: jump, type: http, url: "{base}/jump"}}
          - {{id: decimal, type: http, url: "http://2852039166/"}}
          - {{id: mapped, type: http, url: "http://[::ffff:a9fe:a9fe]/"}}
          - {{id: local, type: http, url: "{base}/echo?k=1"}}
    """)

    done = plait("run", "flow.yaml", "--json")

    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "failed"
    for step_id, address in (("jump", "169.254.169.254"), ("decimal", "169.254.169.254"),
                             ("mapped", "::ffff:169.254.169.254")):
        step = result["steps"][step_id]
        assert (step["status"], step["attempts"]) == ("failed", 1), step
        assert f"refused to connect to {address}" in step["error"]
        assert "PLAIT_ALLOWED_HOSTS" in step["error"]
    assert result["steps"]["local"]["status"] == "completed"  # loopback is allowed
    assert sorted(requested) == ["/echo", "/jump"]


def test_denied_networks_from_the_environment_block_the_local_server(plait, write, server):
    base, requested = server
    write("flow.yaml", f"""
        name: fetcher
        steps:
          - {{id: local, type: http, url: "{base}/echo?k=1"}}
    """)

    done = plait("run", "flow.yaml", "--json", env={"PLAIT_DENIED_NETWORKS": "127.0.0.0/8"})

    assert done.returncode == 1
    step = json.loads(done.stdout)["steps"]["local"]
    assert (step["status"], step["attempts"]) == ("failed", 1)
    assert "127.0.0.1" in step["error"] and "PLAIT_DENIED_NETWORKS" in step["error"]
    assert requested == []


# ------------------------------------------------------------------ secrets


def test_a_secret_is_redacted_in_every_derived_form(plait, write, server, tmp_path: Path):
    base, requested = server
    write("flow.yaml", f"""
        name: leaky
        defaults:
          retry: {{max_retries: 0}}
        steps:
          - {{id: echo, type: http, url: "{base}/echo", params: {{k: "{{{{ secrets.Y }}}}"}}}}
          - {{id: fail, type: http, url: "{base}/fail", params: {{k: "{{{{ secrets.Y }}}}"}}}}
    """)
    env = {"PLAIT_SECRET_Y": SECRET}

    done = plait("run", "flow.yaml", "--json", env=env)

    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    echo, fail = result["steps"]["echo"], result["steps"]["fail"]
    assert echo["status"] == "completed" and fail["status"] == "failed"
    assert echo["output"]["json"]["value"] == "***"  # the server did get the secret
    assert echo["output"]["json"]["raw_query"] == "k=***"
    assert echo["output"]["url"].endswith("/echo?k=***")
    assert "HTTP 500" in fail["error"]
    assert sorted(requested) == ["/echo", "/fail"]
    assert_no_secret(done.stdout + done.stderr, "plait run")
    run_id = result["run_id"]
    shown = plait("show", run_id, "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    assert_no_secret(shown.stdout, "plait show --json")
    text = plait("show", run_id, env=env)
    assert_no_secret(text.stdout + text.stderr, "plait show")
    stored = b"".join(p.read_bytes() for p in (tmp_path / ".plait").glob("plait.db*"))
    assert_no_secret(stored.decode("utf-8", errors="replace"), "the database")


# ------------------------------------------------------------------ step logs


TALKY = '''
import time


def talk(token, ctx):
    ctx.logger.info("using %s", token)
    ctx.logger.warning("token %s expires soon", token)
    return 1


def spin(ctx):
    open("started", "w").close()
    while not ctx.cancelled:
        time.sleep(0.01)
    return "stopped"
'''


def test_step_logs_are_redacted_on_stderr_and_kept_for_show(plait, write):
    write("talky.py", TALKY)
    write("flow.yaml", """
        name: talky
        steps:
          - {id: talk, type: python, call: "talky:talk", with: {token: "{{ secrets.Y }}"}}
    """)
    env = {"PLAIT_SECRET_Y": SECRET}

    done = plait("run", "flow.yaml", "--json", env=env)

    assert done.returncode == 0, done.stderr
    assert "step talk (attempt 1): token *** expires soon" in done.stderr
    assert "using" not in done.stderr  # INFO goes to the history, not to stderr
    assert_no_secret(done.stdout + done.stderr, "plait run")
    run_id = json.loads(done.stdout)["run_id"]
    shown = plait("show", run_id, "--json", env=env)
    logs = json.loads(shown.stdout)["logs"]
    assert [(r["step"], r["attempt"], r["level"], r["message"]) for r in logs] == [
        ("talk", 1, "INFO", "using ***"), ("talk", 1, "WARNING", "token *** expires soon")]
    text = plait("show", run_id, env=env).stdout
    section = text[text.index("logs of talk"):]
    assert "INFO     #1  using ***" in section
    assert "WARNING  #1  token *** expires soon" in section
    assert_no_secret(shown.stdout + text, "plait show")


def test_cancel_ends_a_run_whose_sync_step_polls_cancelled(plait, spawn, write, tmp_path):
    write("talky.py", TALKY)
    write("flow.yaml", """
        name: spinner
        steps:
          - {id: spin, type: python, call: "talky:spin"}
    """)
    running = spawn("run", "flow.yaml", "--json")
    started = tmp_path / "started"
    for _ in range(3000):  # the step starts (bounded wait, not a claim about speed)
        if started.exists() or running.poll() is not None:
            break
        time.sleep(0.01)
    assert started.exists(), running.stderr.read() if running.stderr else ""
    listed = json.loads(plait("runs", "--json").stdout)["runs"]
    run_id = listed[0]["run_id"]

    cancelled = plait("cancel", run_id)

    assert cancelled.returncode == 0, cancelled.stderr
    out, err = running.communicate(timeout=30)
    assert running.returncode == 1, err
    result = json.loads(out)
    assert result["status"] == "cancelled"
    assert result["steps"]["spin"]["status"] == "cancelled"
