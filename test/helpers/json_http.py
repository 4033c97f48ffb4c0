"""What the HTTP stand-ins share: a JSON reply, and serving a handler on a thread on a free loopback port."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["JsonHandler", "MethodRouter", "serving"]


class JsonHandler(BaseHTTPRequestHandler):
    """A quiet request handler that reads and writes JSON bodies."""

    def read_json(self) -> dict[str, Any]:
        return dict(json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}"))

    def reply(self, status: int, answer: dict[str, Any]) -> None:
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  # keep test output quiet
        pass


class MethodRouter(JsonHandler):
    """A handler whose every HTTP method goes to one ``route(method)``, for stand-ins that route on method
    and path together."""

    def route(self, method: str) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement route()")

    def do_GET(self) -> None:  # noqa: N802  # http.server's names
        self.route("GET")

    def do_POST(self) -> None:  # noqa: N802
        self.route("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self.route("PUT")

    def do_PATCH(self) -> None:  # noqa: N802
        self.route("PATCH")

    def do_DELETE(self) -> None:  # noqa: N802
        self.route("DELETE")


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler], name: str) -> Iterator[str]:
    """Serve ``handler`` on 127.0.0.1 at a free port on a thread; yield its base URL; stop it after."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name=name, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
