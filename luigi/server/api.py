"""The JSON API: ``/api/<method>`` for each registered RPC method, and ``/api/_batch`` for our own client.

Each request's kwargs are the JSON object in the ``data`` form or query field (LUIGI_COMPAT f.1), or the
whole body when it is sent as ``application/json`` (what our own client does for ``_batch``); they are
checked against ``luigi.rpc_methods`` before the scheduler sees them. Methods that change state
answer POST only. Bodies are streamed and capped, so an oversized request costs no memory.
``GET /api/_batch`` asking for ``Upgrade: luigi-rpc`` hands the connection to an RPC channel
(``luigi.server.channel``), which answers every later call on it exactly as these handlers do: both
serve through ``luigi.server.dispatch``, and this module holds only what is HTTP (bodies, verbs, headers).
"""

from __future__ import annotations

from typing import Any

import tornado.web
from tornado import httputil
from tornado.http1connection import HTTP1Connection

from luigi.rpc_methods import CHANNEL_UPGRADE, RpcMethod
from luigi.server.channel import Channels
from luigi.server.dispatch import decode_data, lookup_method, serve_batch, serve_call, utf8_text
from luigi.server.errors import ClientError
from luigi.server.handlers import JsonErrorsMixin
from luigi.server.served import ServedScheduler
from luigi.server.settings import ServerSettings


class CappedBody:
    """A request body collected up to ``[scheduler] max_body_size``; past it, only counted.

    Errors wait until the body has been read: answering earlier would make tornado close the connection
    under a client still sending, which then never sees the answer.
    """

    def __init__(self, request: httputil.HTTPServerRequest, settings: ServerSettings) -> None:
        self._limit = settings.max_body_size
        self._chunks: list[bytes] = []
        self._received = 0
        declared = request.headers.get("Content-Length", "")
        self._too_large = declared.isdigit() and int(declared) > self._limit
        if isinstance(request.connection, HTTP1Connection):  # others keep the server's limit
            request.connection.set_max_body_size(settings.connection_body_limit)

    def add(self, chunk: bytes) -> None:
        self._received += len(chunk)
        if self._received > self._limit:
            self._too_large = True
            self._chunks.clear()
        elif not self._too_large:
            self._chunks.append(chunk)

    def take(self) -> bytes:
        """The whole body, or a 413 when it was larger than the cap."""
        if self._too_large:
            raise ClientError(
                413,
                f"Request body is larger than the limit of {self._limit} bytes ([scheduler] max_body_size)",
            )
        return b"".join(self._chunks)


@tornado.web.stream_request_body
class _ApiHandler(JsonErrorsMixin):
    """Collects the request body up to the cap; reading ``data`` then raises ClientError on bad input."""

    def initialize(self, server_settings: ServerSettings, scheduler: ServedScheduler) -> None:  # type: ignore[override]
        super().initialize(server_settings)
        self.scheduler = scheduler
        self._body: CappedBody | None = None

    def prepare(self) -> None:
        self._body = CappedBody(self.request, self.server_settings)

    def data_received(self, chunk: bytes) -> None:
        assert self._body is not None
        self._body.add(chunk)

    def read_data(self) -> dict[str, Any]:
        """The JSON object in ``data`` (query or form body; ``{}`` when absent), or a JSON body itself."""
        assert self._body is not None
        body = self._body.take()
        if is_json_content(self.request.headers.get("Content-Type", "")):
            return decode_data(utf8_text(body, "request body"))
        self._parse_body(body)
        # Read raw rather than with get_argument, which would quietly turn control characters into spaces.
        values = self.request.arguments.get("data")
        if not values:
            return {}
        return decode_data(utf8_text(values[-1], "'data' field"))

    def _parse_body(self, body: bytes) -> None:
        self.request.body = body
        try:
            httputil.parse_body_arguments(
                self.request.headers.get("Content-Type", ""),
                body,
                self.request.body_arguments,
                self.request.files,
                self.request.headers,
            )
        except httputil.HTTPInputError as exc:
            raise ClientError(400, f"Cannot read the request body: {exc}") from None
        for name, values in self.request.body_arguments.items():
            self.request.arguments.setdefault(name, []).extend(values)

    def answer(self, response_json: str) -> None:
        """Finish with ``{"response": <response_json>}``."""
        self.add_cors_headers()
        self.write_json('{"response": ' + response_json + "}")


def asks_for_channel(headers: httputil.HTTPHeaders) -> bool:
    """Whether a request's ``Upgrade`` header names our RPC channel."""
    offered = headers.get("Upgrade", "")
    return CHANNEL_UPGRADE in (token.strip().lower() for token in offered.split(","))


def is_json_content(content_type: str) -> bool:
    """Whether a request's body is the kwargs object itself (``application/json``), not a form."""
    return content_type.partition(";")[0].strip().lower() == "application/json"


class RpcHandler(_ApiHandler):
    """``/api/<method>``: read-only methods answer GET and POST, mutating ones POST only."""

    def get(self, name: str) -> None:
        self._serve(name, posted=False)

    def post(self, name: str) -> None:
        self._serve(name, posted=True)

    def _serve(self, name: str, posted: bool) -> None:
        try:
            self.check_auth()
            method = self._method_for(name, posted)
            response_json = serve_call(self.scheduler, method, self.read_data())
        except ClientError as error:
            self.refuse(error)
            return
        self.answer(response_json)

    def _method_for(self, name: str, posted: bool) -> RpcMethod:
        """The registered method (404 when unknown; 405 for a state-changing method sent without POST)."""
        method = lookup_method(name)
        if method.mutating and not posted:
            raise ClientError(
                405,
                f"{name} changes scheduler state: send it with POST, not {self.request.method}",
                {"Allow": "POST, OPTIONS"},
            )
        return method


class BatchHandler(_ApiHandler):
    """``POST /api/_batch``: several calls in one request, each checked and run in order.

    ``GET`` with ``Upgrade: luigi-rpc`` turns the connection, once authorised, into an RPC channel.
    """

    def initialize(  # type: ignore[override]
        self, server_settings: ServerSettings, scheduler: ServedScheduler, channels: Channels
    ) -> None:
        super().initialize(server_settings, scheduler)
        self.channels = channels

    def get(self) -> None:
        if not asks_for_channel(self.request.headers):
            error = ClientError(
                405,
                "_batch may run methods that change scheduler state, so it must be sent with POST",
                {"Allow": "POST, OPTIONS"},
            )
            self.refuse(error)
            return
        try:
            self.check_auth()
        except ClientError as error:
            self.refuse(error)
            return
        # As tornado's websocket handler does: the socket leaves tornado, the channel answers 101 itself.
        self.channels.adopt(self.detach(), self.request.remote_ip)

    def post(self) -> None:
        try:
            self.check_auth()
            response_json = serve_batch(self.scheduler, self.read_data(), self.request.remote_ip)
        except ClientError as error:
            self.refuse(error)
            return
        self.answer(response_json)
