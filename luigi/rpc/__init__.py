"""The HTTP client of the central scheduler: ``RemoteScheduler`` and what its calls raise.

``client`` is the scheduler's RPC methods over HTTP; ``pipeline`` holds the calls waiting for the next
request and the requests sent whose answers are not read yet; ``retry`` is the one retry policy (backoff,
and riding out a scheduler restart); ``connection`` is the keep-alive socket; ``calls`` encodes calls and
batches; ``address`` parses scheduler URLs; ``options`` reads the client's settings; ``errors`` names the
failures; ``recognise`` tells our client from other schedulers without loading it. ``layers`` and
``fetchers`` are Luigi's replaceable layers and fetchers, which carry the calls once a user's test replaces
one of them; ``hooks`` reads the names tests patch here (``logger``, ``HAS_REQUESTS``, the fetcher classes)
at each use.

The errors are imported with the package; the client and its HTTP machinery on first use of their names,
so that a worker with a local scheduler, which catches these errors, never loads them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from luigi._lazy import lazy_names
from luigi.rpc.errors import NoSchedulerError, RPCError, SchedulerHTTPError

if TYPE_CHECKING:
    from luigi.rpc.address import unix_socket_url as unix_socket_url
    from luigi.rpc.client import RemoteScheduler as RemoteScheduler
    from luigi.rpc.client import logger as logger
    from luigi.rpc.fetchers import HAS_REQUESTS as HAS_REQUESTS
    from luigi.rpc.fetchers import RequestsFetcher as RequestsFetcher
    from luigi.rpc.fetchers import URLLibFetcher as URLLibFetcher
    from luigi.rpc.retry import retry_delay as retry_delay

_LAZY = {
    "unix_socket_url": "luigi.rpc.address",
    "RemoteScheduler": "luigi.rpc.client",
    "logger": "luigi.rpc.client",
    "HAS_REQUESTS": "luigi.rpc.fetchers",
    "RequestsFetcher": "luigi.rpc.fetchers",
    "URLLibFetcher": "luigi.rpc.fetchers",
    "retry_delay": "luigi.rpc.retry",
}

__all__ = [
    "HAS_REQUESTS",
    "NoSchedulerError",
    "RPCError",
    "RemoteScheduler",
    "RequestsFetcher",
    "SchedulerHTTPError",
    "URLLibFetcher",
    "logger",
    "retry_delay",
    "unix_socket_url",
]

__getattr__ = lazy_names(__name__, _LAZY, globals())
