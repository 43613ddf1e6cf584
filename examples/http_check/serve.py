"""A tiny demo service for the http-check example: GET /health answers 200 and
GET /broken answers 503.

    python examples/http_check/serve.py [PORT]      # default 8765, on 127.0.0.1
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROUTES = {"/health": (200, {"ok": True}), "/broken": (503, {"ok": False, "error": "db down"})}


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # the name http.server calls
        status, body = ROUTES.get(self.path, (404, {"error": "not found"}))
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass  # keep the terminal quiet


def make_server(port: int = 8765) -> ThreadingHTTPServer:
    return ThreadingHTTPServer(("127.0.0.1", port), Handler)


if __name__ == "__main__":
    server = make_server(int(sys.argv[1]) if len(sys.argv) > 1 else 8765)
    print(f"serving on http://127.0.0.1:{server.server_address[1]} (/health, /broken)")
    server.serve_forever()
