"""Plain records of what the scheduler knows: one per task and one per worker.

Fields above the ``derived`` marker are the state to persist; the rest are indexes the state rebuilds.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from luigi.scheduler.model.shared import EMPTY_DICT, EMPTY_LIST, NO_IDS, interned
from luigi.scheduler.settings import TaskRetryPolicy
from luigi.task_status import FAILED, PENDING

PUBLIC_VISIBILITY = 0
HIDDEN_VISIBILITY = 1

# A task's resource needs in a hashable, order-independent form: tasks with equal keys compete alike.
ResourceKey = tuple[tuple[str, Any], ...]

# Statuses counted by ``count_pending`` (per worker: tasks, unique tasks, tasks it scheduled last).
COUNTED_STATUSES = (PENDING, FAILED)


def resource_key(resources: dict[str, Any]) -> ResourceKey:
    """The hashable form of a resources dict (names sorted)."""
    return tuple(sorted(resources.items())) if resources else ()


@dataclass(slots=True, eq=False)
class TaskRecord:
    """One task as the scheduler sees it (Luigi's scheduler ``Task``).

    Its containers other than ``params`` are read-only and may be shared with other records
    (``model.shared``): ``SchedulerState`` replaces them, it never changes them in place.
    """

    id: str
    status: str
    created: float
    updated: float
    retry_policy: TaskRetryPolicy
    deps: frozenset[str] = NO_IDS
    priority: float = 0
    family: str = ""
    module: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    param_visibilities: dict[str, int] = field(default_factory=lambda: EMPTY_DICT)
    resources: dict[str, Any] = field(default_factory=lambda: EMPTY_DICT)
    stakeholders: frozenset[str] = NO_IDS
    # an ordered set: the order is the add order
    workers: dict[str, None] = field(default_factory=lambda: EMPTY_DICT)
    retry: float | None = None
    remove: float | None = None
    worker_running: str | None = None
    time_running: float | None = None
    resources_running: dict[str, Any] | None = None
    expl: Any = None
    accepts_messages: bool = False
    tracking_url: str | None = None
    status_message: str | None = None
    progress_percentage: Any = None
    scheduler_message_responses: dict[str, Any] = field(default_factory=lambda: EMPTY_DICT)
    scheduler_disable_time: float | None = None
    failure_times: list[float] = field(default_factory=lambda: EMPTY_LIST)
    first_failure_time: float | None = None
    runnable: bool = False
    batchable: bool = False
    batch_id: str | None = None
    owners: list[str] = field(default_factory=lambda: EMPTY_LIST)
    # who lost its run of the task, while nobody has started it since (``rules.leases``): a dict of
    # ``worker``, ``ahead`` (a grant made ahead, put back) and ``failed_at`` (the failure the loss added)
    lost_lease: dict[str, Any] | None = None
    # when an operator asked to cancel its run (``cancel_task``): kept while it runs and once it FAILED, so
    # the failure is not retried until forgiven; any other status clears it (``SchedulerState``)
    cancel_requested: float | None = None
    # granted to start after its worker's current run (``rules.leases``); kept, so that a restart or a
    # standby's takeover still puts such a grant back to PENDING when its worker is lost
    granted_ahead: bool = False
    # derived: rebuilt from the fields above
    unfinished_deps: int = 0
    resource_key: ResourceKey = ()
    pretty_cache: str | None = None

    def set_params(self, params: dict[str, Any] | None) -> None:
        """Replace the parameters (the display name follows); their names are interned (they repeat)."""
        self.params = {interned(key): value for key, value in params.items()} if params else {}
        self.pretty_cache = None

    @property
    def public_params(self) -> dict[str, Any]:
        """Parameters whose visibility is PUBLIC (the default): the ones shown anywhere."""
        visibilities = self.param_visibilities
        return {
            k: v
            for k, v in self.params.items()
            if visibilities.get(k, PUBLIC_VISIBILITY) == PUBLIC_VISIBILITY
        }

    @property
    def hidden_params(self) -> dict[str, Any]:
        """Parameters marked HIDDEN: kept for running the task, never displayed."""
        visibilities = self.param_visibilities
        return {
            k: v
            for k, v in self.params.items()
            if visibilities.get(k, PUBLIC_VISIBILITY) == HIDDEN_VISIBILITY
        }

    @property
    def pretty_id(self) -> str:
        """``Family(k=v, ...)`` over the public parameters, sorted by name (what users search for)."""
        if self.pretty_cache is None:
            self.pretty_cache = self.display_name()
        return self.pretty_cache

    def display_name(self) -> str:
        """``pretty_id`` without keeping it on the record (the search index reads every task's)."""
        if self.pretty_cache is not None:
            return self.pretty_cache
        shown = ", ".join(f"{key}={value}" for key, value in sorted(self.public_params.items()))
        return f"{self.family}({shown})"

    def failures_in_window(self, now: float) -> int:
        """Failures within the retry policy's ``disable_window`` seconds before ``now``."""
        cutoff = now - self.retry_policy.disable_window
        return len(self.failure_times) - bisect.bisect_left(self.failure_times, cutoff)

    @property
    def last_worker(self) -> str | None:
        """The worker that most recently started listing this task (Luigi's ``workers.peek(last=True)``)."""
        return next(reversed(self.workers), None) if self.workers else None


@dataclass(slots=True, eq=False)
class WorkerRecord:
    """One worker process that talked to the scheduler recently."""

    id: str
    started: float
    last_active: float
    last_get_work: float | None = None
    reference: dict[str, Any] | None = None
    info: dict[str, Any] = field(default_factory=dict)
    disabled: bool = False
    rpc_messages: list[dict[str, Any]] = field(default_factory=list)
    # derived: rebuilt from the task records
    tasks: set[str] = field(default_factory=set)  # tasks listing this worker in ``workers``
    stake: set[str] = field(default_factory=set)  # tasks listing this worker in ``stakeholders``
    pending_counts: dict[str, list[int]] = field(
        default_factory=lambda: {status: [0, 0, 0] for status in COUNTED_STATUSES}
    )
    # its grants made ahead, in order (``rules.leases``): rebuilt from the tasks' ``granted_ahead``
    ahead: list[str] = field(default_factory=list)

    @property
    def enabled(self) -> bool:
        """False once an operator disabled the worker."""
        return not self.disabled

    @property
    def state(self) -> str:
        """``active`` or ``disabled``, as ``count_pending`` and ``worker_list`` report it."""
        return "disabled" if self.disabled else "active"

    @property
    def assistant(self) -> bool:
        """Whether the worker declared itself an assistant (runs any runnable task)."""
        return bool(self.info.get("assistant", False))

    def add_rpc_message(self, name: str, **kwargs: Any) -> None:
        """Queue a message for the worker's next ``ping``."""
        self.rpc_messages.append({"name": name, "kwargs": kwargs})

    def fetch_rpc_messages(self) -> list[dict[str, Any]]:
        """Hand over and forget the queued messages."""
        messages, self.rpc_messages = self.rpc_messages, []
        return messages
