"""Serving ``luigid`` on a tornado loop the caller runs: Luigi's ``luigi.server._init_api``.

``run()`` owns its loop until ``stop()``; ``_init_api`` only binds, hands the application to the current
loop and starts the prune timer, then returns, so a test (or an embedding program) starts the loop itself.
"""

from __future__ import annotations

from typing import Any

import tornado.httpserver
import tornado.ioloop

from luigi.server.app import app
from luigi.server.guard import HostPolicy
from luigi.server.serve import DEFAULT_PORT, SchedulerServer
from luigi.server.served import ServedScheduler

__all__ = ["_init_api"]


def _init_api(
    scheduler: ServedScheduler,
    api_port: int | None = None,
    address: str | None = None,
    unix_socket: str | None = None,
) -> list[Any]:
    """Bind (CannotListenError if that fails) and serve ``scheduler`` on the current tornado loop.

    Returns the bound sockets' names (``(host, port)`` pairs, or the socket path), as Luigi does; port 0
    picks a free port.
    """
    port = DEFAULT_PORT if api_port is None else api_port
    server = SchedulerServer(scheduler, port=port, address=address, unix_socket=unix_socket)
    server.bind()
    settings = server.settings
    hosts = HostPolicy.for_server(settings.allowed_hosts, server.address, unix_socket is not None)
    http = tornado.httpserver.HTTPServer(
        app(scheduler, settings, hosts), max_body_size=settings.connection_body_limit
    )
    http.add_sockets(server.sockets)
    pruning = tornado.ioloop.PeriodicCallback(scheduler.prune, settings.prune_interval * 1000.0)
    pruning.start()
    return [sock.getsockname() for sock in server.sockets]
