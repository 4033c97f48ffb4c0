"""The central scheduler: pure state and decisions behind the RPC methods (no I/O, injectable clock).

``core`` is the ``Scheduler`` (one method per RPC), thin over ``rules/`` (what changes: intake,
transitions, pruning, get_work) and ``views/`` (read-only answers), which both stand on ``model/``
(records and the indexed state every write goes through). ``settings`` reads the configuration,
``hooks`` holds the side effects (disable notices, batched e-mails, task history) and ``store/`` keeps
the state across restarts. This module only re-exports, plus Luigi's module-level names.

``luigi.scheduler.time`` is the module the default clock reads, ``luigi.scheduler.notifications`` is
where disable notices go by default, and ``Scheduler(batch_emails=True)`` builds
``luigi.scheduler.BatchNotifier``; tests may patch any of them (each is looked up here at call time).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

# As in Luigi, importing the scheduler loads (and so registers the Config classes of) the e-mail
# modules, before ``[scheduler]`` itself: ``luigi --help-all`` lists them in this order.
from luigi import notifications  # isort: split

from luigi import batch_notifier, metrics, task_history
from luigi._lazy import lazy_names
from luigi.batch_notifier import BatchNotifier
from luigi.metrics import MetricsCollectors
from luigi.rpc_methods import RPC_METHODS
from luigi.scheduler.hooks import FailureBatcher
from luigi.scheduler.model.clock import Clock, ManualClock, system_time
from luigi.scheduler.settings import RetryPolicy, SchedulerConfig, scheduler
from luigi.scheduler.settings import _get_empty_retry_policy as _get_empty_retry_policy  # Luigi's internal
from luigi.task_status import (
    BATCH_RUNNING,
    DISABLED,
    DONE,
    FAILED,
    PENDING,
    RUNNING,
    SUSPENDED,
    UNKNOWN,
    WORKER_STATE_ACTIVE,
    WORKER_STATE_DISABLED,
)

if TYPE_CHECKING:
    from luigi.scheduler.core import Scheduler
    from luigi.scheduler.model.records import TaskRecord, WorkerRecord
    from luigi.scheduler.model.state import SimpleTaskState
    from luigi.scheduler.views.upstream import (
        UPSTREAM_DISABLED,
        UPSTREAM_FAILED,
        UPSTREAM_MISSING_INPUT,
        UPSTREAM_RUNNING,
        UPSTREAM_SEVERITY_ORDER,
    )

# Loaded on first use: ``import luigi`` imports this package (for its flags) but only a local scheduler
# needs the engine behind ``Scheduler``, a third of what ``import luigi`` would otherwise load.
_LAZY = {
    "Scheduler": "luigi.scheduler.core",
    "SimpleTaskState": "luigi.scheduler.model.state",
    "TaskRecord": "luigi.scheduler.model.records",
    "WorkerRecord": "luigi.scheduler.model.records",
    "UPSTREAM_DISABLED": "luigi.scheduler.views.upstream",
    "UPSTREAM_FAILED": "luigi.scheduler.views.upstream",
    "UPSTREAM_MISSING_INPUT": "luigi.scheduler.views.upstream",
    "UPSTREAM_RUNNING": "luigi.scheduler.views.upstream",
    "UPSTREAM_SEVERITY_ORDER": "luigi.scheduler.views.upstream",
}

__all__ = [
    "BATCH_RUNNING",
    "DISABLED",
    "DONE",
    "FAILED",
    "PENDING",
    "RPC_METHODS",
    "RUNNING",
    "SUSPENDED",
    "UNKNOWN",
    "BatchNotifier",
    "MetricsCollectors",
    "UPSTREAM_DISABLED",
    "UPSTREAM_FAILED",
    "UPSTREAM_MISSING_INPUT",
    "UPSTREAM_RUNNING",
    "UPSTREAM_SEVERITY_ORDER",
    "WORKER_STATE_ACTIVE",
    "WORKER_STATE_DISABLED",
    "Clock",
    "FailureBatcher",
    "ManualClock",
    "RetryPolicy",
    "Scheduler",
    "SchedulerConfig",
    "SimpleTaskState",
    "TaskRecord",
    "WorkerRecord",
    "batch_notifier",
    "metrics",
    "notifications",
    "scheduler",
    "system_time",
    "task_history",
    "time",
]


__getattr__ = lazy_names(__name__, _LAZY, globals())
