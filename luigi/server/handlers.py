"""What every ``luigid`` route shares: JSON errors, bearer-token auth, CORS, and the non-API routes.

Errors are answered as ``{"error": "..."}`` with one log line; nothing a client sends reaches the
scheduler before it has been checked.
"""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Mapping
from http.client import responses
from typing import Any

import tornado.escape
import tornado.web
from tornado import httputil

from luigi.server.errors import ClientError, error_json
from luigi.server.settings import ServerSettings

logger = logging.getLogger("luigi.server")
access_logger = logging.getLogger("luigi.server.access")

VISUALISER_PATH = "/static/visualiser/index.html"
# On every response: the visualiser runs only its own files, so a value that slipped onto a page as
# markup could still run no inline script, load nothing from elsewhere and not be framed.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "frame-ancestors 'none'; object-src 'none'"
)
# Relative, so the redirect also works when a proxy serves luigid under a path prefix.
_VISUALISER_REDIRECT = VISUALISER_PATH.lstrip("/")


def check_bearer_token(settings: ServerSettings, headers: Mapping[str, str]) -> None:
    """ClientError 401 unless ``headers`` carry the configured bearer token (when there is one)."""
    expected = settings.auth_token
    if expected is None:
        return
    scheme, _, given = headers.get("Authorization", "").partition(" ")
    supplied = given.strip() if scheme.lower() == "bearer" else ""
    # compare_digest takes the same time wherever the strings differ, so the token cannot be guessed
    # byte by byte from response times.
    if not supplied or not hmac.compare_digest(supplied.encode(), expected.encode()):
        reason = "missing" if "Authorization" not in headers else "wrong"
        raise ClientError(
            401,
            f"Authentication required: {reason} bearer token (send 'Authorization: Bearer <token>')",
            {"WWW-Authenticate": 'Bearer realm="luigid"'},
        )


class JsonErrorsMixin(tornado.web.RequestHandler):
    """Answers every error as JSON, adds CORS headers and checks the bearer token."""

    server_settings: ServerSettings

    def initialize(self, server_settings: ServerSettings) -> None:
        self.server_settings = server_settings

    def set_default_headers(self) -> None:
        self.set_header("Server", "luigid")
        self.set_header("Content-Security-Policy", CONTENT_SECURITY_POLICY)

    def add_cors_headers(self, preflight: bool = False) -> None:
        """Set the CORS headers ``[cors]`` grants this request's ``Origin`` (none when CORS is off)."""
        origin = self.request.headers.get("Origin")
        for name, value in self.server_settings.cors_headers(origin, preflight).items():
            self.set_header(name, value)

    def check_auth(self) -> None:
        """Refuse the request (401) unless it carries the configured bearer token (when there is one)."""
        check_bearer_token(self.server_settings, self.request.headers)

    def refuse(self, error: ClientError) -> None:
        """Answer ``error`` as JSON and log it in one line (server errors were logged where they happened)."""
        if error.status < 500:
            logger.warning(
                "%s %s from %s refused (%d): %s",
                self.request.method,
                self.request.path,
                self.request.remote_ip,
                error.status,
                error.message,
            )
        self.clear()
        self.add_cors_headers()
        for name, value in error.headers.items():
            self.set_header(name, value)
        self.write_json({"error": error.message}, status=error.status)

    def write_json(self, payload: Any, status: int = 200) -> None:
        """Finish with ``payload`` (already JSON-ready, or a JSON string) as the body."""
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(payload if isinstance(payload, (str, bytes)) else tornado.escape.json_encode(payload))

    def log_exception(self, typ: Any, value: Any, tb: Any) -> None:
        # HTTP errors are logged in one line by write_error; anything else is a bug worth its traceback.
        if not isinstance(value, tornado.web.HTTPError):
            logger.error("%s %s failed", self.request.method, self.request.path, exc_info=(typ, value, tb))

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        # Reached for errors tornado raises itself (bad method, missing file, unexpected exception);
        # send_error has already cleared the response and set the status.
        message = f"{status_code} {self._reason}: {self.request.method} {self.request.path}"
        if status_code == 405:
            allowed = ", ".join(m for m in self.SUPPORTED_METHODS if _implements(self, m))
            self.set_header("Allow", allowed)
            message += f" (allowed: {allowed})"
        if status_code < 500:
            logger.warning("%s from %s refused", message, self.request.remote_ip)
        self.add_cors_headers()
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(tornado.escape.json_encode({"error": message}))

    def options(self, *args: Any, **kwargs: Any) -> None:
        """CORS preflight: 204 with the allowed methods and headers (no token needed)."""
        self.add_cors_headers(preflight=True)
        self.set_status(204)
        self.finish()


class GuardedHandler(JsonErrorsMixin):
    """A handler whose body tornado reads in full first, so auth can be checked in ``prepare``."""

    def prepare(self) -> None:
        if self.request.method == "OPTIONS":
            return
        try:
            self.check_auth()
        except ClientError as error:
            self.refuse(error)
            return
        self.add_cors_headers()


class RootHandler(GuardedHandler):
    """``/``: the visualiser (redirect); ``HEAD /`` answers 204 for health checks. No token needed:
    neither reveals scheduler data."""

    def prepare(self) -> None:
        pass

    def head(self) -> None:
        self.set_status(204)
        self.finish()

    def get(self) -> None:
        self.redirect(_VISUALISER_REDIRECT)


class NotFoundHandler(GuardedHandler):
    """Any path no route matches: a JSON 404."""

    def prepare(self) -> None:
        super().prepare()
        if not self._finished:
            self.refuse(ClientError(404, f"No such page: {self.request.path}"))


class StaticHandler(GuardedHandler, tornado.web.StaticFileHandler):
    """Files under ``luigi/static`` (the visualiser). They hold no scheduler data, so they load without
    the token: the page then asks for it once and sends it on every ``/api`` call."""

    def prepare(self) -> None:
        self.add_cors_headers()

    def validate_absolute_path(self, root: str, absolute_path: str) -> str | None:
        # A NUL byte makes the file system calls below raise ValueError, which would answer 500.
        if "\x00" in absolute_path:
            raise tornado.web.HTTPError(404)
        return super().validate_absolute_path(root, absolute_path)

    def initialize(  # type: ignore[override]
        self, server_settings: ServerSettings, path: str, default_filename: str | None = None
    ) -> None:
        GuardedHandler.initialize(self, server_settings)
        tornado.web.StaticFileHandler.initialize(self, path, default_filename)


def _implements(handler: tornado.web.RequestHandler, method: str) -> bool:
    """Whether ``handler`` overrides the tornado default for HTTP ``method`` (which answers 405)."""
    own = getattr(type(handler), method.lower(), None)
    default = getattr(tornado.web.RequestHandler, method.lower(), None)
    return own is not None and own is not default


class Refused(httputil.HTTPMessageDelegate):
    """A request refused before any route saw it: its body is ignored, then ``error`` is answered."""

    def __init__(self, request: httputil.HTTPServerRequest, settings: ServerSettings, error: ClientError):
        self._request = request
        self._settings = settings
        self._error = error

    def finish(self) -> None:
        error = self._error
        logger.warning(
            "%s %s from %s refused (%d): %s",
            self._request.method,
            self._request.path,
            self._request.remote_ip,
            error.status,
            error.message,
        )
        write_answer(self._request, self._settings, error.status, error_json(error.message).encode(), {})


def write_answer(
    request: httputil.HTTPServerRequest,
    settings: ServerSettings,
    status: int,
    body: bytes,
    extra: dict[str, str],
) -> None:
    """Answer ``request`` with a JSON ``body`` and luigid's usual headers (CORS as ``[cors]`` allows)."""
    headers = httputil.HTTPHeaders(
        {
            "Server": "luigid",
            "Content-Type": "application/json; charset=UTF-8",
            "Content-Length": str(len(body)),
            "Date": _http_date(),
            "Content-Security-Policy": CONTENT_SECURITY_POLICY,
        }
    )
    for name, value in settings.cors_headers(request.headers.get("Origin"), False).items():
        headers[name] = value
    for name, value in extra.items():
        headers[name] = value
    start = httputil.ResponseStartLine("HTTP/1.1", status, responses.get(status, "Unknown"))
    connection = request.connection
    assert connection is not None
    connection.write_headers(start, headers, body)
    connection.finish()
    access_logger.debug(
        "%d %s %s (%s) %.1fms",
        status,
        request.method,
        request.path,
        request.remote_ip,
        1000 * request.request_time(),
    )


_date = [0, ""]  # the Date header of the current second: formatting one costs more than the rest of them


def _http_date() -> str:
    now = int(time.time())
    if now != _date[0]:
        _date[:] = [now, httputil.format_timestamp(now)]
    return str(_date[1])
