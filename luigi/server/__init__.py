"""``luigid``'s HTTP side: a thin tornado adapter from ``/api/<method>`` to the ``Scheduler``.

``app(scheduler)`` builds the application (tests serve it in-process); ``run()`` is what ``luigid``
calls to serve until SIGTERM/SIGINT; ``stop()`` ends it from elsewhere; ``_init_api`` serves on a loop
the caller runs. ``RPCHandler``, ``BaseTaskHistoryHandler`` and ``from_utc`` are Luigi's names.
"""

from __future__ import annotations

from luigi.server.api import RpcHandler
from luigi.server.app import STATIC_DIR, app
from luigi.server.embed import _init_api
from luigi.server.handlers import VISUALISER_PATH
from luigi.server.history import BaseTaskHistoryHandler, from_utc
from luigi.server.metrics import MetricsHandler
from luigi.server.serve import DEFAULT_ADDRESS, DEFAULT_PORT, CannotListenError, SchedulerServer, run, stop
from luigi.server.settings import AUTH_TOKEN_ENV, CorsPolicy, ServerSettings, cors

RPCHandler = RpcHandler  # Luigi's name for the ``/api/<method>`` handler

__all__ = [
    "AUTH_TOKEN_ENV",
    "BaseTaskHistoryHandler",
    "DEFAULT_ADDRESS",
    "DEFAULT_PORT",
    "STATIC_DIR",
    "VISUALISER_PATH",
    "CannotListenError",
    "CorsPolicy",
    "MetricsHandler",
    "RPCHandler",
    "SchedulerServer",
    "ServerSettings",
    "_init_api",
    "app",
    "cors",
    "from_utc",
    "run",
    "stop",
]
