"""``POST /api/_batch`` with a JSON body, served without tornado's ``RequestHandler``.

That request is what our own client sends once per task, and tornado's per-request handler machinery
(building the handler, its default headers and output transforms, the finish bookkeeping) cost about
as much as running the calls themselves. ``ApiRouter`` hands that one kind of request to ``FastBatch``,
a plain HTTP message delegate that checks, runs and answers it exactly as ``BatchHandler`` would; every
other request (form-encoded batches, GET, OPTIONS, pages) goes to the tornado application unchanged.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import tornado.escape
import tornado.routing
import tornado.web
from tornado import httputil

from luigi.server.api import CappedBody, decode_data, is_json_content, serve_batch, utf8_text
from luigi.server.handlers import CONTENT_SECURITY_POLICY, ClientError, check_bearer_token
from luigi.server.settings import ServerSettings

logger = logging.getLogger("luigi.server")
access_logger = logging.getLogger("luigi.server.access")

BATCH_PATH = "/api/_batch"


class ApiRouter(tornado.routing.Router):
    """Sends JSON ``POST /api/_batch`` requests to ``FastBatch`` and everything else to ``application``."""

    def __init__(self, application: tornado.web.Application, scheduler: Any, settings: ServerSettings):
        self.application = application
        self._scheduler = scheduler
        self._settings = settings

    def find_handler(
        self, request: httputil.HTTPServerRequest, **kwargs: Any
    ) -> httputil.HTTPMessageDelegate:
        if (
            request.method == "POST"
            and request.path == BATCH_PATH
            and is_json_content(request.headers.get("Content-Type", ""))
        ):
            return FastBatch(request, self._scheduler, self._settings)
        return self.application.find_handler(request, **kwargs)


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
            status, body, extra = error.status, _error_json(error.message), error.headers
            self._log_refusal(error)
        except Exception as exc:  # a bug here must still answer, as tornado would for a handler
            logger.exception("POST %s failed", BATCH_PATH)
            status, body = 500, _error_json(f"_batch failed: {type(exc).__name__}: {exc}")
        self._write(status, body.encode("utf-8"), extra)

    def _answer(self) -> str:
        check_bearer_token(self._settings, self._request.headers)
        data = decode_data(utf8_text(self._body.take(), "request body"))
        return '{"response": ' + serve_batch(self._scheduler, data, self._request.remote_ip) + "}"

    def _write(self, status: int, body: bytes, extra: dict[str, str]) -> None:
        headers = httputil.HTTPHeaders(
            {
                "Server": "luigid",
                "Content-Type": "application/json; charset=UTF-8",
                "Content-Length": str(len(body)),
                "Date": _http_date(),
                "Content-Security-Policy": CONTENT_SECURITY_POLICY,
            }
        )
        for name, value in self._settings.cors.headers_for(
            self._request.headers.get("Origin"), False
        ).items():
            headers[name] = value
        for name, value in extra.items():
            headers[name] = value
        start = httputil.ResponseStartLine("HTTP/1.1", status, httputil.responses.get(status, "Unknown"))
        connection = self._request.connection
        assert connection is not None
        connection.write_headers(start, headers, body)
        connection.finish()
        access_logger.debug(
            "%d POST %s (%s) %.1fms",
            status,
            BATCH_PATH,
            self._request.remote_ip,
            1000 * self._request.request_time(),
        )

    def _log_refusal(self, error: ClientError) -> None:
        if error.status < 500:
            logger.warning(
                "POST %s from %s refused (%d): %s",
                BATCH_PATH,
                self._request.remote_ip,
                error.status,
                error.message,
            )


_date = [0, ""]  # the Date header of the current second: formatting one costs more than the rest of them


def _http_date() -> str:
    now = int(time.time())
    if now != _date[0]:
        _date[:] = [now, httputil.format_timestamp(now)]
    return str(_date[1])


def _error_json(message: str) -> str:
    return tornado.escape.json_encode({"error": message})
