"""The scheduler's answer to ``get_work``, checked for shape before the worker acts on it."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger("luigi-interface")

WORKER_STATE_ACTIVE = "active"
WORKER_STATE_DISABLED = "disabled"


def _count(reply: dict[str, Any], key: str) -> int:
    value = reply.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _optional_str(reply: dict[str, Any], key: str) -> str | None:
    value = reply.get(key)
    return None if value is None else str(value)


@dataclass
class WorkGrant:
    """A granted task (``task_id``, or a batch), and the pending counts used by keep-alive decisions."""

    task_id: str | None = None
    task_family: str = ""
    task_module: str | None = None
    task_params: dict[str, Any] = field(default_factory=dict)
    batch_id: str | None = None
    batch_task_ids: list[str] = field(default_factory=list)
    n_pending_tasks: int = 0
    n_unique_pending: int = 0
    n_pending_last_scheduled: int = 0
    worker_state: str = WORKER_STATE_ACTIVE
    running_tasks: list[dict[str, Any]] = field(default_factory=list)

    def __getitem__(self, index: int) -> Any:
        """Luigi's ``GetWorkResponse`` tuple: (task_id, running_tasks, n_pending_tasks, n_unique_pending,
        n_pending_last_scheduled, worker_state)."""
        return (
            self.task_id,
            self.running_tasks,
            self.n_pending_tasks,
            self.n_unique_pending,
            self.n_pending_last_scheduled,
            self.worker_state,
        )[index]

    @classmethod
    def nothing(cls, worker_state: str = WORKER_STATE_ACTIVE) -> WorkGrant:
        return cls(worker_state=worker_state)

    @classmethod
    def from_reply(cls, reply: Any) -> WorkGrant:
        """Parse a ``get_work`` reply; a malformed one raises ValueError saying what was wrong."""
        if not isinstance(reply, dict):
            raise ValueError(f"The scheduler's get_work reply should be a JSON object, got {reply!r}")
        params = reply.get("task_params") or {}
        batch_ids = reply.get("batch_task_ids") or []
        running = reply.get("running_tasks") or []
        if not isinstance(params, dict) or not isinstance(batch_ids, list) or not isinstance(running, list):
            raise ValueError(f"The scheduler's get_work reply has fields of the wrong type: {reply!r}")
        return cls(
            task_id=_optional_str(reply, "task_id"),
            task_family=str(reply.get("task_family") or ""),
            task_module=_optional_str(reply, "task_module"),
            task_params=params,
            batch_id=_optional_str(reply, "batch_id"),
            batch_task_ids=[str(task_id) for task_id in batch_ids],
            n_pending_tasks=_count(reply, "n_pending_tasks"),
            n_unique_pending=_count(reply, "n_unique_pending"),
            n_pending_last_scheduled=_count(reply, "n_pending_last_scheduled"),
            worker_state=str(reply.get("worker_state") or WORKER_STATE_ACTIVE),
            running_tasks=[item for item in running if isinstance(item, dict)],
        )

    def log_no_work(self, tasks_running_here: bool) -> None:
        """Say why no task was granted: others are running them, or nothing is left."""
        if self.running_tasks:
            logger.info(
                "There are %d pending tasks possibly being run by other workers", len(self.running_tasks)
            )
        if self.n_unique_pending:
            logger.info("There are %d pending tasks unique to this worker", self.n_unique_pending)
        if self.n_pending_last_scheduled:
            logger.info(
                "There are %d pending tasks last scheduled by this worker", self.n_pending_last_scheduled
            )
        if not self.n_pending_tasks and not tasks_running_here:
            logger.info("Done: there are no more tasks to run at this time")
