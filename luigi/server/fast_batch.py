"""``POST /api/_batch`` with a JSON body, served without tornado's ``RequestHandler``.

That request is what our own client sends once per task, and tornado's per-request handler machinery
(building the handler, its default headers and output transforms, the finish bookkeeping) cost about
as much as running the calls themselves. ``ApiRouter`` hands that one kind of request to ``FastBatch``,
a plain HTTP message delegate that checks, runs and answers it exactly as ``BatchHandler`` would; a
``GET`` of the same path asking for ``Upgrade: luigi-rpc`` goes to ``ChannelUpgrade``, which hands the
socket to an RPC channel (``luigi.server.channel``); every other request (form-encoded batches, GET,
OPTIONS, pages) goes to the tornado application unchanged.
"""

from __future__ import annotations

import logging
from typing import Any

import tornado.routing
import tornado.web
from tornado import httputil

from luigi.server.api import CappedBody, decode_data, is_json_content, serve_batch, utf8_text
from luigi.server.channel import Channels, asks_for_channel
from luigi.server.guard import HostPolicy, refusal
from luigi.server.handlers import ClientError, Refused, check_bearer_token, error_json, write_answer
from luigi.server.settings import ServerSettings

logger = logging.getLogger("luigi.server")

BATCH_PATH = "/api/_batch"


class ApiRouter(tornado.routing.Router):
    """JSON ``POST /api/_batch`` to ``FastBatch``, channel upgrades to ``ChannelUpgrade``, the rest to
    ``application`` (which applies the same ``luigi.server.guard`` checks to its own routes)."""

    def __init__(self, application: tornado.web.Application, channels: Channels):
        self.application = application
        self._channels = channels
        self._hosts: HostPolicy = application.settings["host_policy"]

    def find_handler(
        self, request: httputil.HTTPServerRequest, **kwargs: Any
    ) -> httputil.HTTPMessageDelegate:
        fast = request.path == BATCH_PATH and (
            (request.method == "POST" and is_json_content(request.headers.get("Content-Type", "")))
            or (request.method == "GET" and asks_for_channel(request.headers))
        )
        if not fast:
            return self.application.find_handler(request, **kwargs)
        settings = self._channels.settings
        refused = refusal(self._hosts, settings.cors, request.method or "", request.headers)
        if refused is not None:
            return Refused(request, settings, refused)
        if request.method == "POST":
            return FastBatch(request, self._channels.scheduler, settings)
        return ChannelUpgrade(request, self._channels)


class FastBatch(httputil.HTTPMessageDelegate):
    """One JSON ``_batch`` request: the body is collected up to the cap, then run and answered at once."""

    def __init__(self, request: httputil.HTTPServerRequest, scheduler: Any, settings: ServerSettings):
        self._request = request
        self._scheduler = scheduler
        self._settings = settings
        self._body = CappedBody(request, settings)

    def data_received(self, chunk: bytes) -> None:
        self._body.add(chunk)

    def finish(self) -> None:
        extra: dict[str, str] = {}
        try:
            status, body = 200, self._answer()
        except ClientError as error:
            status, body, extra = error.status, error_json(error.message), error.headers
            self._log_refusal(error)
        except Exception as exc:  # a bug here must still answer, as tornado would for a handler
            logger.exception("POST %s failed", BATCH_PATH)
            status, body = 500, error_json(f"_batch failed: {type(exc).__name__}: {exc}")
        self._write(status, body.encode("utf-8"), extra)

    def _answer(self) -> str:
        check_bearer_token(self._settings, self._request.headers)
        data = decode_data(utf8_text(self._body.take(), "request body"))
        return '{"response": ' + serve_batch(self._scheduler, data, self._request.remote_ip) + "}"

    def _write(self, status: int, body: bytes, extra: dict[str, str]) -> None:
        write_answer(self._request, self._settings, status, body, extra)

    def _log_refusal(self, error: ClientError) -> None:
        if error.status < 500:
            logger.warning(
                "POST %s from %s refused (%d): %s",
                BATCH_PATH,
                self._request.remote_ip,
                error.status,
                error.message,
            )


class ChannelUpgrade(httputil.HTTPMessageDelegate):
    """``GET /api/_batch`` with ``Upgrade: luigi-rpc``: once authorised, the socket becomes a channel."""

    def __init__(self, request: httputil.HTTPServerRequest, channels: Channels) -> None:
        self._request = request
        self._channels = channels
        self._refusal: ClientError | None = None

    def headers_received(
        self,
        start_line: httputil.RequestStartLine | httputil.ResponseStartLine,
        headers: httputil.HTTPHeaders,
    ) -> None:
        try:
            check_bearer_token(self._channels.settings, headers)
        except ClientError as error:
            self._refusal = error  # answered in finish(), the ordinary HTTP way
            return
        connection: Any = self._request.connection
        self._channels.adopt(connection.detach(), self._request.remote_ip)

    def finish(self) -> None:
        error = self._refusal
        if error is not None:
            logger.warning(
                "RPC channel upgrade from %s refused (%d): %s",
                self._request.remote_ip,
                error.status,
                error.message,
            )
            body = error_json(error.message).encode("utf-8")
            write_answer(self._request, self._channels.settings, error.status, body, error.headers)
