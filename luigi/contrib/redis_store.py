"""Task completion markers in Redis: a `RedisTarget` exists once its task has touched its marker hash.

The marker is the hash ``<marker_prefix>:<update_id>`` holding the ``update_id`` and the ISO ``date`` of
the touch, optionally expiring after ``expire`` seconds. ``marker_prefix`` comes from ``[redis]
marker_prefix`` in the configuration (default ``luigi``), read when used, so a config file loaded after
import counts. Needs the ``redis`` package: ``pip install 'luigi[redis]'``.
"""

from __future__ import annotations

import contextlib
import datetime
import threading
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from luigi.configuration import get_config
from luigi.contrib.optional import require
from luigi.target import Target

__all__ = ["DEFAULT_MARKER_PREFIX", "RedisTarget", "RedisTargetError"]

DEFAULT_MARKER_PREFIX = "luigi"

# A marker check is cheap and a pipeline asks often: ride out a blip, but fail within about half a second
# rather than redis-py's default of ten retries (seconds per refused or unauthenticated check).
CONNECT_RETRIES = 2
RETRY_BACKOFF_BASE = 0.05
RETRY_BACKOFF_CAP = 0.25

_ClientKey = tuple[str, int, int, str | None, float | None]
_clients: dict[_ClientKey, Any] = {}
_clients_lock = threading.Lock()


class RedisTargetError(Exception):
    """Reaching or using the Redis server behind a `RedisTarget` failed; the message names server and key."""


class _MarkerPrefixFromConfig:
    """``[redis] marker_prefix`` read at each access; a subclass or an instance may still set its own.

    A non-data descriptor, so ``target.marker_prefix = "x"`` and ``marker_prefix = "x"`` in a subclass
    both override it.
    """

    def __get__(self, instance: object, owner: type | None = None) -> str:
        return str(get_config().get("redis", "marker_prefix", DEFAULT_MARKER_PREFIX))


def _module(name: str) -> ModuleType:
    """A module of redis-py, imported at first use."""
    return require(name, "redis", "luigi.contrib.redis_store")


def _redis() -> ModuleType:
    """The redis-py package, imported at first use."""
    return _module("redis")


def _shared_client(key: _ClientKey) -> Any:
    """One redis-py client (and so one connection pool) per server, db, password and timeout."""
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            host, port, db, password, socket_timeout = key
            retry = _module("redis.retry").Retry(
                _module("redis.backoff").ExponentialBackoff(cap=RETRY_BACKOFF_CAP, base=RETRY_BACKOFF_BASE),
                retries=CONNECT_RETRIES,
            )
            client = _redis().Redis(
                host=host, port=port, db=db, password=password, socket_timeout=socket_timeout, retry=retry
            )
            _clients[key] = client
        return client


class RedisTarget(Target):
    """A marker in a Redis database saying that the run identified by ``update_id`` has happened.

    Args:
        host, port, db: the Redis server and database number holding the marker.
        update_id: what identifies this run of the task (usually its task id); the marker's key suffix.
        password: the server's AUTH password; never shown in messages or reprs.
        socket_timeout: seconds to wait for the server before failing.
        expire: seconds (or a timedelta) after which Redis deletes the marker; None keeps it.
    """

    marker_prefix = _MarkerPrefixFromConfig()

    def __init__(
        self,
        host: str,
        port: int,
        db: int,
        update_id: str,
        password: str | None = None,
        socket_timeout: float | None = None,
        expire: int | datetime.timedelta | None = None,
    ) -> None:
        self.host = host
        self.port = int(port)
        self.db = int(db)
        self.update_id = update_id
        self.password = password
        self.socket_timeout = socket_timeout
        self.expire = expire

    @property
    def redis_client(self) -> Any:
        """The redis-py client this target talks through (shared by targets on the same server and db)."""
        return _shared_client((self.host, self.port, self.db, self.password, self.socket_timeout))

    def marker_key(self) -> str:
        """The key of the marker hash: ``<marker_prefix>:<update_id>``."""
        return f"{self.marker_prefix}:{self.update_id}"

    def touch(self) -> None:
        """Write the marker (and its expiry, in the same transaction), making the target exist."""
        key = self.marker_key()
        fields = {"update_id": self.update_id, "date": datetime.datetime.now().isoformat()}
        with self._reporting_errors("write the marker"):
            transaction = self.redis_client.pipeline(transaction=True)
            transaction.hset(key, mapping=fields)
            if self.expire is not None:
                transaction.expire(key, self.expire)
            transaction.execute()

    def exists(self) -> bool:
        """True if the marker is in the database."""
        with self._reporting_errors("check the marker"):
            return bool(self.redis_client.exists(self.marker_key()))

    @contextlib.contextmanager
    def _reporting_errors(self, action: str) -> Iterator[None]:
        """Turn a redis-py error into a RedisTargetError naming the server, the db, the key and the cause."""
        errors = _redis().exceptions
        try:
            yield
        except errors.AuthenticationError as exc:
            hint = (
                "pass the right password to RedisTarget" if self.password else "pass password= to RedisTarget"
            )
            raise self._error(action, exc, f"authentication failed ({hint})") from exc
        except errors.ConnectionError as exc:
            raise self._error(action, exc, "cannot connect (is the server running and reachable?)") from exc
        except errors.TimeoutError as exc:
            raise self._error(action, exc, f"no answer within socket_timeout={self.socket_timeout}s") from exc
        except errors.RedisError as exc:
            raise self._error(action, exc, "the server refused the command") from exc

    def _error(self, action: str, exc: Exception, cause: str) -> RedisTargetError:
        detail = str(exc)
        if self.password:
            detail = detail.replace(self.password, "***")  # redis-py does not echo it; be sure anyway
        return RedisTargetError(
            f"Cannot {action} {self.marker_key()!r} in Redis at {self.host}:{self.port} db {self.db}: "
            f"{cause}: {type(exc).__name__}: {detail}"
        )

    def __str__(self) -> str:
        return self.marker_key()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(host={self.host!r}, port={self.port}, db={self.db}, "
            f"update_id={self.update_id!r})"
        )
