"""The central scheduler: pure state and decisions behind the RPC methods (no I/O, injectable clock).

``core`` is the ``Scheduler`` (one method per RPC), thin over ``rules/`` (what changes: intake,
transitions, pruning, get_work) and ``views/`` (read-only answers), which both stand on ``model/``
(records and the indexed state every write goes through). ``settings`` reads the configuration,
``hooks`` holds the side effects (disable notices, batched e-mails, task history) and ``store/`` keeps
the state across restarts. This module only re-exports.

``luigi.scheduler.time`` is the module the default clock reads, ``luigi.scheduler.notifications`` is
where disable notices go by default, and ``Scheduler(batch_emails=True)`` builds
``luigi.scheduler.BatchNotifier``; tests may patch any of them (each is looked up here at call time).
"""

from __future__ import annotations

import time

from luigi import notifications
from luigi.batch_notifier import BatchNotifier
from luigi.metrics import MetricsCollectors
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
    "BatchNotifier",
    "MetricsCollectors",
    "notifications",
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
