"""The worker: schedules tasks with a scheduler and runs the ones it grants (``Worker``).

This package only re-exports the names Luigi users and our code import from ``luigi.worker``. The map:
``loop`` (``Worker``: lifecycle and the run loop), ``graph_walk`` (``add``: requires(), complete(),
add_task), ``execution`` (the ``TaskRunner`` seam, the one place a runner is chosen, and the in-process
runner), ``work_source`` (where grants come from: asked in turn, or ahead with leases kept), ``slots`` (the
forked-slot runner), ``task_process`` (running one task).
"""

from __future__ import annotations

import multiprocessing  # ``luigi.worker.multiprocessing.Pool`` (users patch it): parallel scheduling's pool
import time  # ``luigi.worker.time`` (hook users patch): the clock of every run and the idle loop's sleep

from luigi.worker.completion import CompletionCheckError, check_complete
from luigi.worker.config import worker
from luigi.worker.execution import TaskRunner
from luigi.worker.get_work_reply import WORKER_STATE_ACTIVE, WORKER_STATE_DISABLED, WorkGrant
from luigi.worker.keep_alive import KeepAliveThread
from luigi.worker.loop import Worker
from luigi.worker.task_process import (
    ContextManagedTaskProcess,
    SchedulerMessage,
    TaskException,
    TaskProcess,
    TaskStatusReporter,
)

__all__ = [
    "WORKER_STATE_ACTIVE",
    "WORKER_STATE_DISABLED",
    "CompletionCheckError",
    "ContextManagedTaskProcess",
    "KeepAliveThread",
    "SchedulerMessage",
    "TaskException",
    "TaskProcess",
    "TaskRunner",
    "TaskStatusReporter",
    "Worker",
    "WorkGrant",
    "check_complete",
    "multiprocessing",
    "time",
    "worker",
]
