"""Several scheduler URLs, one active ``luigid``: which one the client follows now.

``--scheduler-url`` (``[core] scheduler_url``) may hold a comma-separated list: every ``luigid`` sharing
one PostgreSQL state (``luigi.server.standby``). The client sends to the one it follows; on a standby's
503 or no answer at all it moves on to the next URL at once (in the same attempt), and keeps following
the one that answered. A single URL behaves exactly as before.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence

from luigi.rpc.address import SchedulerAddress, parse_scheduler_url
from luigi.rpc.connection import HTTPAnswer
from luigi.rpc.hooks import rpc_logger

__all__ = ["SchedulerAddresses", "is_standby_answer", "split_scheduler_urls"]

_STANDBY_STATUS = 503


def split_scheduler_urls(urls: str) -> list[str]:
    """The URLs of a comma-separated ``scheduler_url``; ValueError naming an empty entry."""
    parts = [part.strip() for part in urls.split(",")] if isinstance(urls, str) else [urls]
    if len(parts) > 1 and not all(parts):
        raise ValueError(
            f"Scheduler URL list {urls!r} has an empty entry; separate the luigid URLs with single commas"
        )
    return parts


class SchedulerAddresses:
    """The scheduler addresses a client was given, and the one it follows (shared by its connections)."""

    def __init__(self, addresses: Sequence[SchedulerAddress]) -> None:
        if not addresses:
            raise ValueError("no scheduler URL given")
        self.all = tuple(addresses)
        self._current = 0
        self._lock = threading.Lock()

    @classmethod
    def parse(cls, urls: str) -> SchedulerAddresses:
        """From ``scheduler_url``: one URL, or several separated by commas; ValueError naming a bad one."""
        return cls([parse_scheduler_url(url) for url in split_scheduler_urls(urls)])

    def __len__(self) -> int:
        return len(self.all)

    @property
    def current(self) -> SchedulerAddress:
        """The address followed now."""
        return self.all[self._current]

    @property
    def shown(self) -> str:
        """The URLs for messages (passwords masked)."""
        return ", ".join(address.url.rstrip("/") for address in self.all)

    def move_on(self, past: SchedulerAddress, why: str) -> SchedulerAddress:
        """``past`` did not serve (``why``): follow the next address, unless another caller already moved."""
        with self._lock:
            if self.all[self._current] is past:
                self._current = (self._current + 1) % len(self.all)
                rpc_logger().info("Scheduler %s %s; trying %s", past.url, why, self.all[self._current].url)
            return self.all[self._current]


def is_standby_answer(answer: HTTPAnswer) -> bool:
    """Whether ``answer`` is a standby luigid's 503 (``{"standby": true, ...}``), not another failure."""
    if answer.status != _STANDBY_STATUS:
        return False
    try:
        payload = json.loads(answer.body)
    except ValueError:
        return False
    return isinstance(payload, dict) and payload.get("standby") is True
