"""``luigid``'s HTTP side: a thin tornado adapter from ``/api/<method>`` to the ``Scheduler``.

``app(scheduler)`` builds the application (tests serve it in-process); ``run()`` is what ``luigid``
calls to serve until SIGTERM/SIGINT; ``stop()`` ends it from elsewhere.
"""

from __future__ import annotations

from luigi.server.app import STATIC_DIR, app
from luigi.server.handlers import VISUALISER_PATH
from luigi.server.metrics import MetricsHandler
from luigi.server.serve import DEFAULT_ADDRESS, DEFAULT_PORT, CannotListenError, SchedulerServer, run, stop
from luigi.server.settings import AUTH_TOKEN_ENV, CorsPolicy, ServerSettings, cors

__all__ = [
    "AUTH_TOKEN_ENV",
    "DEFAULT_ADDRESS",
    "DEFAULT_PORT",
    "STATIC_DIR",
    "VISUALISER_PATH",
    "CannotListenError",
    "CorsPolicy",
    "MetricsHandler",
    "SchedulerServer",
    "ServerSettings",
    "app",
    "cors",
    "run",
    "stop",
]
