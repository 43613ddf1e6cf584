"""Streamed model output: the time from the model's first token to the first partial
output (``emit``) an SSE client of ``plait serve`` sees.

    python benchmarks/stream_latency.py [--calls 100] [--db sqlite|postgresql|URL ...]
        [--out FILE.json]

A model server in this process (a thread; OpenAI's chat completions stream) answers
each request with a role chunk, then, once the benchmark's SSE client is connected to
the run's event stream, its first content token, noting the time it wrote it; it then
holds the rest of the answer for ``HOLD_S``, so the first emit can only come from the
first token, and sends the rest.  ``plait serve`` runs in a subprocess on the store;
each call is one run of a one-step workflow (an ``llm`` step with ``stream: true``)
started with ``POST /api/runs``; the client reads ``GET /api/runs/{id}/events`` and
notes the time it read the first ``emit`` note.  Latency = that time - the first
token's time (one clock: both are this process's).  Calls run one after the other.

Stores (``--db``, repeatable): ``sqlite`` (a fresh file; the server executes the step
itself) and ``postgresql`` (a fresh database on ``PLAIT_TEST_DATABASE_URL``, or a URL:
the server with its worker and one ``plait worker`` process; the step has a pool, so
its attempt is always a ticket a worker claims, and its emits reach the store through
that worker).  Reports p50, p99 and max per store; exits 1 when a run does not
complete with the whole answer.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
from harness import machine_header, table

HOLD_S = 0.3  # the rest of the answer waits this long after the first token
WORDS = ["Durable ", "workflows ", "stream ", "their ", "answers."]
KEY_ENV = "BENCH_STREAM_KEY"


class Model:
    """What the model server shares with the benchmark: per call, when its client is
    connected (an Event) and when the first token was written."""

    def __init__(self) -> None:
        self.connected: dict[str, threading.Event] = {}
        self.first_token: dict[str, float] = {}
        self.lock = threading.Lock()

    def gate(self, call: str) -> threading.Event:
        with self.lock:
            return self.connected.setdefault(call, threading.Event())


def model_server(model: Model) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            call = body["messages"][-1]["content"]
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self._chunk({"role": "assistant", "content": ""})
            model.gate(call).wait(30)  # the benchmark's client follows the run
            self._chunk({"content": WORDS[0]})
            model.first_token[call] = time.time()
            time.sleep(HOLD_S)
            for word in WORDS[1:]:
                self._chunk({"content": word})
            self._chunk({}, "stop")
            self.wfile.write(b'data: {"choices": [], "usage": {"prompt_tokens": 1, '
                             b'"completion_tokens": 5, "total_tokens": 6}}\n\n')
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

        def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> None:
            data = {"model": "bench", "choices": [{"index": 0, "delta": delta,
                                                   "finish_reason": finish}]}
            self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def plait_server(db: str, workers: int) -> Iterator[str]:
    """``plait serve`` on ``db`` (and ``workers`` ``plait worker`` processes): its URL."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAIT_")}
    env.update({KEY_ENV: "sk-bench", "PLAIT_ALLOWED_KEY_ENVS": KEY_ENV,
                "PLAIT_ALLOWED_HOSTS": "127.0.0.1"})
    procs = [subprocess.Popen([sys.executable, "-m", "plait", "serve", "--db", db,
                               "--port", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    procs += [subprocess.Popen([sys.executable, "-m", "plait", "worker", "--db", db,
                                "--poll", "0.5"], env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
              for _ in range(workers)]
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline or procs[0].poll() is not None:
                raise SystemExit(f"plait serve on {db} did not start")
            time.sleep(0.1)
        yield base
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def one_call(client: httpx.Client, model: Model, workflow: str, i: int) -> float:
    call = f"call-{i}-{uuid.uuid4().hex[:6]}"
    started = client.post("/api/runs", json={"workflow": workflow, "input": {"call": call}})
    started.raise_for_status()
    run_id = started.json()["run_id"]
    seen: float | None = None
    with client.stream("GET", f"/api/runs/{run_id}/events", timeout=60) as events:
        model.gate(call).set()  # connected: the model may send its first token
        for line in events.iter_lines():
            if seen is None and line.startswith("data:"):
                data = json.loads(line[5:])
                if data["kind"] == "note" and "emit" in (data["data"] or {}):
                    seen = time.time()
    run = client.get(f"/api/runs/{run_id}").json()
    if run["status"] != "completed" or run["steps"]["ask"]["output"]["content"] \
            != "".join(WORDS) or seen is None:
        raise SystemExit(f"run {run_id}: {run['status']}, {run['steps']['ask']}")
    return seen - model.first_token[call]


def measure(db: str, calls: int, model: Model, model_url: str, workers: int) -> list[float]:
    step: dict[str, Any] = {"id": "ask", "type": "llm", "base_url": model_url,
                            "model": "bench", "api_key_env": KEY_ENV,
                            "prompt": "{{ input.call }}", "stream": True}
    definition: dict[str, Any] = {"name": "stream-bench", "steps": [step]}
    if workers:  # a ticket a worker claims, whatever worker drives the run
        definition["pools"] = {"model": {"concurrency": 4}}
        step["pool"] = "model"
    with plait_server(db, workers) as base, httpx.Client(base_url=base, timeout=30) as client:
        client.post("/api/workflows", json=definition).raise_for_status()
        one_call(client, model, "stream-bench", -1)  # warm-up, not counted
        return [one_call(client, model, "stream-bench", i) for i in range(calls)]


def fresh_pg(url: str) -> str:
    import psycopg

    name = f"bench_stream_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return url.rsplit("/", 1)[0] + "/" + name


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--db", action="append", default=None,
                        help="sqlite, postgresql, or a PostgreSQL URL (repeatable)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--md", type=Path, help="also write the report as Markdown")
    args = parser.parse_args()
    load = os.getloadavg()
    model = Model()
    server = model_server(model)
    model_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for which in args.db or ["sqlite"]:
            if which == "sqlite":
                db, workers, label = f"sqlite:///{tmp}/bench.db", 0, "sqlite"
            else:
                base = os.environ.get("PLAIT_TEST_DATABASE_URL") if which == "postgresql" \
                    else which
                if not base:
                    raise SystemExit("--db postgresql needs PLAIT_TEST_DATABASE_URL")
                db, workers, label = fresh_pg(base), 1, "postgresql (step on a worker)"
            ms = [s * 1000 for s in measure(db, args.calls, model, model_url, workers)]
            results[label] = {"calls": len(ms), "p50_ms": round(percentile(ms, 50), 1),
                              "p99_ms": round(percentile(ms, 99), 1),
                              "max_ms": round(max(ms), 1),
                              "mean_ms": round(statistics.fmean(ms), 1)}
            print(f"{label}: first token -> first emit at an SSE client over "
                  f"{len(ms)} calls: p50 {results[label]['p50_ms']} ms, "
                  f"p99 {results[label]['p99_ms']} ms, max {results[label]['max_ms']} ms",
                  flush=True)
    server.shutdown()
    server.server_close()
    if args.out:
        args.out.write_text(json.dumps({
            "when": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": f"{platform.machine()}, {os.cpu_count()} cpus, "
                       f"Python {platform.python_version()}",
            "results": results}, indent=2) + "\n")
    if args.md:
        args.md.write_text(markdown(results, load))
    return 0


TARGET_P50_MS = 300.0


def markdown(results: dict[str, Any], load: tuple[float, float, float]) -> str:
    """The report ``make bench-plans`` writes (benchmarks/STREAM.md, quoted in the README)."""
    lines = machine_header("Streamed model output: first token to first emit", [
        "load average before the run (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in load),
        "what: an `llm` step with `stream: true` against a local model server that sends "
        "its first token, then holds the rest; the time from that token to the first "
        "partial text read by a client of `plait serve`'s event stream"])
    rows = [(label, row["calls"], row["p50_ms"], row["p99_ms"], row["max_ms"],
             f"< {TARGET_P50_MS:g} ms", "yes" if row["p50_ms"] < TARGET_P50_MS else "**no**")
            for label, row in results.items()]
    return "\n".join(lines + table(("store", "calls", "p50 (ms)", "p99 (ms)", "max (ms)",
                                    "target (p50)", "met"), rows))


if __name__ == "__main__":
    sys.exit(main())
