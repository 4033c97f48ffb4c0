"""A stand-in for a scheduler server, built on the stdlib ``http.server``, for the RPC client tests.

By default it answers like Luigi's ``luigid``: ``/api/<name>`` reads the ``data`` form field, calls an
in-process ``Scheduler`` and writes ``{"response": ...}``; unknown names (``_batch`` included) get 404.
With ``batch=True`` it also serves ``/api/_batch`` as our own server does. Tests can queue scripted
answers (``script``) that are used, one per request, before the default behaviour.
"""

from __future__ import annotations

import json
import socketserver
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from luigi.rpc.address import unix_socket_url
from luigi.rpc_methods import RPC_METHODS, RpcArgumentError, invoke
from luigi.scheduler import Scheduler


@dataclass
class RecordedRequest:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    connection_id: int  # the same number for requests that arrived over the same connection

    @property
    def form(self) -> dict[str, list[str]]:
        return parse_qs(self.body.decode("ascii"), strict_parsing=True)

    @property
    def data(self) -> Any:
        """The kwargs sent: the ``data`` form field, or the body itself when it is JSON."""
        if self.headers.get("Content-Type") == "application/json":
            return json.loads(self.body)
        return json.loads(self.form["data"][0])

    @property
    def api_name(self) -> str:
        return self.path.rsplit("/api/", 1)[1]


@dataclass
class Reply:
    """A scripted answer: ``status`` and a JSON ``payload`` (or raw ``body``); ``close`` ends the socket."""

    status: int = 200
    payload: Any = None
    body: bytes | None = None
    close: bool = False

    def encoded(self) -> bytes:
        return self.body if self.body is not None else json.dumps(self.payload).encode()


DROP = object()  # a script action returning this closes the connection without answering
Action = Callable[[RecordedRequest], Any]  # returns a Reply, DROP, or None for the default behaviour


def respond(status: int = 200, close: bool = False, **payload: Any) -> Action:
    """A script action answering ``status`` with ``payload`` as the JSON body."""
    return lambda request: Reply(status, payload, close=close)


class FakeLuigid:
    """Serve until ``stop()``; use as a context manager. ``url`` is where clients should point."""

    def __init__(
        self,
        scheduler: Any = None,
        batch: bool = False,
        socket_path: str | None = None,
        prefix: str = "/",
    ) -> None:
        self.scheduler = scheduler if scheduler is not None else Scheduler()
        self.batch = batch
        self.prefix = prefix
        self.requests: list[RecordedRequest] = []
        # Requests asking to switch to the RPC channel, which this fake does not offer (it answers 405, as
        # a luigid without channels does); kept apart, so ``requests`` shows the RPC traffic alone.
        self.upgrades: list[RecordedRequest] = []
        self.script: deque[Action] = deque()
        self._lock = threading.Lock()
        self._connections = 0
        self._server = self._make_server(socket_path)
        if socket_path is None:
            host, port = self._server.server_address[:2]
            self.url = f"http://{host}:{port}{prefix}"
        else:
            self.url = unix_socket_url(socket_path, prefix)
        self._thread = threading.Thread(target=self._serve, name="fake-luigid", daemon=True)

    def __enter__(self) -> FakeLuigid:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    def _serve(self) -> None:
        self._server.serve_forever(poll_interval=0.01)  # a short poll keeps shutdown() quick

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def paths(self) -> list[str]:
        with self._lock:
            return [r.path for r in self.requests]

    def api_names(self) -> list[str]:
        with self._lock:
            return [r.api_name for r in self.requests]

    # -- the server side -----------------------------------------------------------------------------

    def _make_server(self, socket_path: str | None) -> socketserver.BaseServer:
        handler = _handler_class(self)
        if socket_path is None:
            server: socketserver.BaseServer = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        else:
            server = _ThreadingUnixServer(socket_path, handler)
        server.daemon_threads = True  # type: ignore[attr-defined]
        server.block_on_close = False  # type: ignore[attr-defined]
        return server

    def _next_connection_id(self) -> int:
        with self._lock:
            self._connections += 1
            return self._connections

    def _record(self, request: RecordedRequest) -> Action | None:
        with self._lock:
            self.requests.append(request)
            return self.script.popleft() if self.script else None

    def answer(self, request: RecordedRequest) -> Any:
        if "Upgrade" in request.headers:
            with self._lock:
                self.upgrades.append(request)
            return Reply(405, {"error": "_batch must be sent with POST"})
        action = self._record(request)
        reply = action(request) if action is not None else None
        return reply if reply is not None else self._default_answer(request)

    def _default_answer(self, request: RecordedRequest) -> Reply:
        path = urlsplit(request.path).path
        if not path.startswith(self.prefix + "api/"):
            return Reply(404, body=b"<html><title>404: Not Found</title></html>")
        name = path[len(self.prefix + "api/") :]
        kwargs = request.data if request.body else {}
        if name == "_batch" and self.batch:
            return Reply(200, {"response": self._batch_results(kwargs["calls"], kwargs.get("stop_on_error"))})
        if name not in RPC_METHODS:
            return Reply(404, body=b"<html><title>404: Not Found</title></html>")
        result = self._one_result(name, kwargs)
        return Reply(
            result.get("status", 200), result if "error" in result else {"response": result["response"]}
        )

    def _batch_results(self, calls: list[dict[str, Any]], stop_on_error: bool) -> list[dict[str, Any]]:
        results: list[dict[str, Any]] = []
        for call in calls:
            if stop_on_error and results and "error" in results[-1]:
                results.append({"error": "not run: an earlier call was refused", "status": 424})
            else:
                results.append(self._one_result(call["method"], call["kwargs"]))
        return results

    def _one_result(self, name: str, kwargs: Any) -> dict[str, Any]:
        if name not in RPC_METHODS:
            return {"error": f"No scheduler RPC method named {name!r}", "status": 404}
        try:
            with self._lock:
                return {"response": invoke(self.scheduler, name, kwargs)}
        except (RpcArgumentError, ValueError) as exc:  # as the real server answers them
            return {"error": str(exc), "status": 400}


class _ThreadingUnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    pass


def _handler_class(fake: FakeLuigid) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as tornado serves it

        def setup(self) -> None:
            super().setup()
            self.connection_id = fake._next_connection_id()

        def do_POST(self) -> None:
            self._handle()

        def do_GET(self) -> None:
            self._handle()

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            body = self.rfile.read(length) if length else b""
            request = RecordedRequest(self.command, self.path, dict(self.headers), body, self.connection_id)
            reply = fake.answer(request)
            if reply is DROP:
                self.close_connection = True
                return
            encoded = reply.encoded()
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(encoded)))
            self.end_headers()
            self.wfile.write(encoded)
            if reply.close:
                self.close_connection = True

        def address_string(self) -> str:
            return "test-client"

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler
