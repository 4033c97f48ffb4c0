"""The HTTP client of the central scheduler: ``RemoteScheduler`` and what its calls raise.

``client`` is the scheduler's RPC methods over HTTP; ``pipeline`` holds the calls waiting for the next
request and the requests sent whose answers are not read yet; ``retry`` is the one retry policy (backoff,
and riding out a scheduler restart); ``connection`` is the keep-alive socket; ``calls`` encodes calls and
batches; ``address`` parses scheduler URLs; ``options`` reads the client's settings; ``errors`` names the
failures. ``layers`` and ``fetchers`` are Luigi's replaceable layers and fetchers, which carry the calls
once a user's test replaces one of them; ``hooks`` reads the names tests patch here (``logger``,
``HAS_REQUESTS``, the fetcher classes) at each use.
"""

from __future__ import annotations

from luigi.rpc.address import unix_socket_url
from luigi.rpc.client import RemoteScheduler, logger
from luigi.rpc.errors import NoSchedulerError, RPCError, SchedulerHTTPError
from luigi.rpc.fetchers import HAS_REQUESTS, RequestsFetcher, URLLibFetcher
from luigi.rpc.retry import retry_delay

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
