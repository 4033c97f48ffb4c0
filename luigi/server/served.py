"""``ServedScheduler``: the scheduler as ``luigid`` serves it, the one type every server module takes.

The RPC methods are reached by name through the registry (``luigi.rpc_methods.invoke``), so a scheduler
answers a call when it has the registered method; the members here are what the server calls itself:
the durable-state hooks around requests, the timers' prunes, a refused ping's sign of life, the metrics
collector's hooks and the history the pages read. ``luigi.scheduler.Scheduler`` satisfies it (mypy
checks that where ``serve.durable_scheduler`` builds one), and so must any stand-in a test serves.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Protocol

from luigi.rpc_methods import RPC_METHODS

if TYPE_CHECKING:
    from luigi.metrics import CollectorExtras, MetricsCollector
    from luigi.task_history import TaskHistory

__all__ = ["SERVER_HOOKS", "CollectorHolder", "MetricsSource", "ServedScheduler"]


class CollectorHolder(Protocol):
    """Where Luigi's ``MetricsHandler`` finds the collector at each scrape (its users' tests set it)."""

    @property
    def _metrics_collector(self) -> MetricsCollector: ...


class MetricsSource(Protocol):
    """What ``/metrics`` reads: Luigi's ``scheduler._state._metrics_collector``."""

    @property
    def _state(self) -> CollectorHolder: ...


class ServedScheduler(MetricsSource, Protocol):
    """What the server needs of the scheduler it serves, beside the registered RPC methods."""

    @property
    def metrics_extras(self) -> CollectorExtras:
        """The collector's optional hooks (``observe_rpc``: each served call is timed for it)."""

    @property
    def task_history(self) -> TaskHistory:
        """Where transitions are recorded; the history pages query it."""

    def load(self) -> None:
        """Replace the state with the stored one (at start, before serving)."""

    def flush(self) -> None:
        """Make the changes since the last flush durable (after each request, before answering)."""

    def checkpoint(self, due_only: bool = False, limit: int | None = None) -> None:
        """Fold journaled changes into the database, off the request path (between requests)."""

    def dump(self) -> None:
        """Save the state at exit."""

    def close(self) -> None:
        """Release the store and the history at exit; no call follows."""

    def prune(self) -> None:
        """Apply what is due (the periodic timer; also an RPC method)."""

    def prune_if_due(self) -> bool:
        """Prune if a deadline has come (the frequent timer); True if it pruned."""

    def note_alive(self, worker: str) -> None:
        """A worker pinged while its ping could not be served (the state cannot be saved)."""


# The methods the server calls itself and never routes: ServedScheduler's, less the RPC methods.
SERVER_HOOKS = frozenset(
    name
    for name, member in vars(ServedScheduler).items()
    if inspect.isfunction(member) and not name.startswith("_") and name not in RPC_METHODS
)
