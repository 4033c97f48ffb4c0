"""The tornado application factory: routes over one scheduler, so tests can serve it in-process."""

from __future__ import annotations

import logging
import os
from typing import Any

import tornado.web

from luigi.server.api import BatchHandler, RpcHandler
from luigi.server.handlers import NotFoundHandler, RootHandler, StaticHandler
from luigi.server.history import history_routes
from luigi.server.settings import ServerSettings

__all__ = ["STATIC_DIR", "app"]

STATIC_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "static")

access_logger = logging.getLogger("luigi.server.access")


def app(
    scheduler: Any, settings: ServerSettings | None = None, **tornado_settings: Any
) -> tornado.web.Application:
    """The ``luigid`` web application serving ``scheduler``.

    Args:
        scheduler: anything with the methods of ``luigi.rpc_methods`` (normally a ``Scheduler``).
        settings: auth, body cap, CORS; read from the configuration when None.
        tornado_settings: extra ``tornado.web.Application`` settings (they win over ours).
    """
    settings = settings if settings is not None else ServerSettings.from_config()
    common = {"server_settings": settings}
    api = {"server_settings": settings, "scheduler": scheduler}
    routes: list[Any] = [
        (r"/", RootHandler, dict(common)),
        (r"/api/_batch", BatchHandler, api),
        (r"/api/(.*)", RpcHandler, api),
        *history_routes(scheduler, settings),
    ]
    options: dict[str, Any] = {
        "static_path": STATIC_DIR,
        "static_handler_class": StaticHandler,
        # Copies: tornado adds "path" to the static handler's dict in place.
        "static_handler_args": dict(common),
        "default_handler_class": NotFoundHandler,
        "default_handler_args": dict(common),
        "compress_response": True,
        "log_function": _log_request,
        "scheduler": scheduler,
        "server_settings": settings,
    }
    options.update(tornado_settings)
    return tornado.web.Application(routes, **options)


def _log_request(handler: tornado.web.RequestHandler) -> None:
    # Refusals were already logged in one line with their reason; this is the plain access log.
    request = handler.request
    access_logger.debug(
        "%d %s %s (%s) %.1fms",
        handler.get_status(),
        request.method,
        request.uri,
        request.remote_ip,
        1000.0 * request.request_time(),
    )
