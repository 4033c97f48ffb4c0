"""The tornado application factory: the whole ``luigid`` over one scheduler, so tests serve what runs.

``app(scheduler)`` is the production stack: every request passes the ``luigi.server.guard`` checks, then
its route; ``/api/_batch`` also takes our client's upgrade to an RPC channel (``luigi.server.channel``),
and ``/api/openapi.json`` describes the API (``luigi.server.openapi``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import tornado.web
from tornado import httputil

from luigi.server.api import BatchHandler, RpcHandler
from luigi.server.channel import Channels
from luigi.server.guard import HostPolicy, refusal
from luigi.server.handlers import NotFoundHandler, Refused, RootHandler, StaticHandler
from luigi.server.history import history_routes
from luigi.server.metrics import MetricsHandler
from luigi.server.openapi import DOCUMENT_PATH, OpenApiHandler
from luigi.server.served import ServedScheduler
from luigi.server.settings import ServerSettings

__all__ = ["STATIC_DIR", "app"]

STATIC_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "static")

access_logger = logging.getLogger("luigi.server.access")


class LuigidApplication(tornado.web.Application):
    """The routes, behind the ``luigi.server.guard`` checks that every request passes first.

    ``channels`` are the RPC channels its ``/api/_batch`` route adopted (the server closes them at exit).
    """

    def __init__(self, channels: Channels, routes: list[Any], **settings: Any) -> None:
        super().__init__(routes, **settings)
        self.channels = channels
        # Asked before any route once the guard let a request through: another answer, or None (a
        # standby's, ``luigi.server.standby``; the server sets it).
        self.gate: Callable[[httputil.HTTPServerRequest], httputil.HTTPMessageDelegate | None] | None = None

    def find_handler(  # type: ignore[override]  # a refusal is a plain delegate, not a handler's
        self, request: httputil.HTTPServerRequest, **kwargs: Any
    ) -> httputil.HTTPMessageDelegate:
        settings: ServerSettings = self.settings["server_settings"]
        refused = refusal(
            self.settings["host_policy"], settings.cors_policy, request.method or "", request.headers
        )
        if refused is not None:
            return Refused(request, settings, refused)
        if self.gate is not None:
            instead = self.gate(request)
            if instead is not None:
                return instead
        return super().find_handler(request, **kwargs)


def app(
    scheduler: ServedScheduler,
    settings: ServerSettings | None = None,
    host_policy: HostPolicy | None = None,
    **tornado_settings: Any,
) -> LuigidApplication:
    """The ``luigid`` web application serving ``scheduler``.

    Args:
        scheduler: a ``ServedScheduler`` (normally a ``Scheduler``), answering the methods of
            ``luigi.rpc_methods``.
        settings: auth, allowed hosts, body cap, CORS; read from the configuration when None.
        host_policy: the names requests may be addressed to; by default ``settings.allowed_hosts``,
            else the loopback names (``SchedulerServer`` adds the address it is bound to).
        tornado_settings: extra ``tornado.web.Application`` settings (they win over ours).
    """
    settings = settings if settings is not None else ServerSettings.from_config()
    if host_policy is None:
        host_policy = HostPolicy.for_server(settings.allowed_hosts, "127.0.0.1", unix=False)
    common = {"server_settings": settings}
    api = {"server_settings": settings, "scheduler": scheduler}
    channels = Channels(scheduler, settings)
    routes: list[Any] = [
        (r"/", RootHandler, dict(common)),
        (r"/api/_batch", BatchHandler, {**api, "channels": channels}),
        (DOCUMENT_PATH.replace(".", r"\."), OpenApiHandler, dict(common)),
        (r"/api/(.*)", RpcHandler, api),
        (r"/metrics", MetricsHandler, api),
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
        "host_policy": host_policy,
    }
    options.update(tornado_settings)
    return LuigidApplication(channels, routes, **options)


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
