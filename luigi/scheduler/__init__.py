"""The central scheduler: pure state and decisions behind the RPC methods (no I/O, injectable clock).

``core`` is the ``Scheduler`` (one method per RPC), thin over ``rules/`` (what changes: intake,
transitions, pruning, get_work) and ``views/`` (read-only answers), which both stand on ``model/``
(records and the indexed state every write goes through). ``settings`` reads the configuration,
``hooks`` holds the side effects (disable notices, batched e-mails, task history) and ``store/`` keeps
the state across restarts. This module only re-exports.

``luigi.scheduler.time`` is the module the default clock reads, and ``luigi.scheduler.notifications``
is where disable notices go by default; tests may patch either.
"""

from __future__ import annotations

import importlib
import time
from typing import Any

from luigi.scheduler.core import Scheduler
from luigi.scheduler.hooks import FailureBatcher
from luigi.scheduler.model.clock import Clock, ManualClock, system_time
from luigi.scheduler.model.records import TaskRecord, WorkerRecord
from luigi.scheduler.settings import RetryPolicy, SchedulerConfig, scheduler
from luigi.scheduler.views.upstream import (
    UPSTREAM_DISABLED,
    UPSTREAM_FAILED,
    UPSTREAM_MISSING_INPUT,
    UPSTREAM_RUNNING,
    UPSTREAM_SEVERITY_ORDER,
)

__all__ = [
    "scheduler",
    "UPSTREAM_DISABLED",
    "UPSTREAM_FAILED",
    "UPSTREAM_MISSING_INPUT",
    "UPSTREAM_RUNNING",
    "UPSTREAM_SEVERITY_ORDER",
    "Clock",
    "FailureBatcher",
    "ManualClock",
    "RetryPolicy",
    "Scheduler",
    "SchedulerConfig",
    "TaskRecord",
    "WorkerRecord",
    "system_time",
    "time",
]


# Names of Luigi's scheduler module that live elsewhere, imported on first use: luigi.notifications (and
# the batch notifier, which sends through it) pull in the task model, which the scheduler never needs.
# ``Scheduler(batch_emails=True)`` builds ``luigi.scheduler.BatchNotifier``, so a test may replace it here.
_LAZY_NAMES = {
    "notifications": ("luigi.notifications", None),
    "BatchNotifier": ("luigi.batch_notifier", "BatchNotifier"),
    "MetricsCollectors": ("luigi.metrics", "MetricsCollectors"),
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module_name, attribute = _LAZY_NAMES[name]
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value
