"""The notification outbox under faults (docs/notifications.md): a ``plait worker``
sending notifications to a slow receiver that fails the first request of each is
stopped (SIGTERM: it drains) or killed (SIGKILL) mid-delivery, then another worker
takes over.  Every notification arrives (0 lost), none is given up, and a duplicate
only ever carries the same idempotency key as the body's id."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import plaitproc
from plait.store.base import OutboxRow
from plait.store.url import open_store

ROWS = 120


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # a worker sends 20 at once: none refused by the backlog


class FlakyReceiver:
    """Answers 500 to the first request of each idempotency key, 200 to the next ones,
    each after a short pause (so a signal lands mid-delivery); records every request."""

    def __init__(self) -> None:
        self.seen: list[tuple[str | None, str]] = []  # (header key, body id)
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                key = self.headers.get("Idempotency-Key")
                time.sleep(0.03)
                with owner.lock:
                    first = all(k != key for k, _ in owner.seen)
                    owner.seen.append((key, body["id"]))
                self.send_response(500 if first else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def count(self) -> int:
        with self.lock:
            return len(self.seen)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[FlakyReceiver]:
    r = FlakyReceiver()
    try:
        yield r
    finally:
        r.close()


def _rows(url: str, prefix: str) -> list[OutboxRow]:
    now = time.time()
    return [OutboxRow(id=f"{prefix}-{i:04d}", event="run_failed",
                      target={"url": url}, shown="http://127.0.0.1/...",
                      body={"event": "run_failed", "id": f"{prefix}-{i:04d}"},
                      next_at=now, created_at=now) for i in range(ROWS)]


async def _call(db: str, method: str, *args: object) -> object:
    store = open_store(db)
    await store.open()
    try:
        return await getattr(store, method)(*args)
    finally:
        await store.close()


def _outbox(db: str) -> list[OutboxRow]:
    rows = asyncio.run(_call(db, "list_notifications", None, ROWS * 2))
    assert isinstance(rows, list)
    return rows


def _worker(db: str, cwd: Path) -> plaitproc.Process:
    env = {k: v for k, v in os.environ.items() if k != "PLAIT_DB"}
    env["PLAIT_NOTIFY_LEASE"] = "2"  # a killed sender's rows are taken over after 2 s
    return plaitproc.popen(["worker", "--db", db, "--poll", "200ms", "--grace", "1s"],
                           cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)


def _wait(condition: object, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"never: {what}")


def _db(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'plait.db'}"
    return str(request.getfixturevalue("pg_database"))


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql",
                                                             marks=pytest.mark.postgres)])
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "kill9"])
def test_a_sender_stopped_mid_delivery_loses_nothing(
        receiver: FlakyReceiver, tmp_path: Path, backend: str, how: signal.Signals,
        request: pytest.FixtureRequest) -> None:
    db = _db(backend, tmp_path, request)
    rows = _rows(receiver.url, f"ntf-{uuid.uuid4().hex[:12]}")  # one PG database a module
    ids = {row.id for row in rows}
    first = _worker(db, tmp_path)
    try:
        assert asyncio.run(_call(db, "enqueue_notifications", rows)) == ROWS
        _wait(lambda: receiver.count() >= 30, "the first worker sends")
        first.send_signal(how)
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    mine = [r for r in _outbox(db) if r.id in ids]
    unsent = [r for r in mine if r.state == "pending"]
    assert unsent, "stopped after every notification was sent: nothing was tested"
    if how is signal.SIGTERM:  # drained: what it held is handed over at once
        assert [r.id for r in unsent if r.claimed_by is not None] == []
    second = _worker(db, tmp_path)
    try:
        _wait(lambda: all(r.state != "pending" for r in _outbox(db) if r.id in ids),
              "the second worker sends the rest")
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=30)
    final = {r.id: r for r in _outbox(db) if r.id in ids}
    assert {r.state for r in final.values()} == {"sent"}, [  # 0 lost, none given up
        (r.attempts, r.error) for r in final.values() if r.state != "sent"]
    with receiver.lock:
        seen = list(receiver.seen)
    assert all(key == body_id for key, body_id in seen)  # a duplicate has the same key
    answered = Counter(key for key, _ in seen)
    assert set(answered) == ids
    assert all(n >= 2 for n in answered.values())  # each failed once, then got through
