"""The scheduler as a worker sees it: the RPC methods a worker calls, plus flushing and closing.

Both the in-process ``luigi.scheduler.Scheduler`` and the HTTP client ``luigi.rpc.RemoteScheduler``
satisfy ``SchedulerAPI``, and mypy checks that they do (``luigi/rpc/worker_calls.py`` gives the client
these methods with their types; the others it makes from the registry). The parameters are those of
``luigi.rpc_methods``, the one declared RPC surface; a test checks that the three agree.
"""

from __future__ import annotations

from typing import Any, Protocol

from luigi.task_status import PENDING

__all__ = ["SchedulerAPI"]


class SchedulerAPI(Protocol):
    """What the worker needs of a scheduler (see ``luigi.rpc_methods`` for each method's meaning)."""

    def add_task(
        self,
        task_id: str,
        status: str = PENDING,
        runnable: bool | None = True,
        deps: list[str] | None = None,
        new_deps: list[str] | None = None,
        expl: Any = None,
        resources: dict[str, Any] | None = None,
        priority: float = 0,
        family: str = "",
        module: str | None = None,
        params: dict[str, Any] | None = None,
        param_visibilities: dict[str, int] | None = None,
        accepts_messages: bool | None = False,
        assistant: bool = False,
        tracking_url: str | None = None,
        *,
        worker: str,
        batchable: bool | None = None,
        batch_id: str | None = None,
        retry_policy_dict: dict[str, Any] | None = None,
        owners: Any = None,
        task_log: dict[str, Any] | None = None,
    ) -> None: ...

    def add_task_batcher(
        self, worker: str, task_family: str, batched_args: list[str], max_batch_size: float = ...
    ) -> None: ...

    def add_worker(self, worker: str, info: Any) -> None: ...

    def get_work(
        self,
        worker: str,
        host: str | None = None,
        assistant: bool = False,
        current_tasks: list[str] | None = None,
        assume_done: list[str] | None = None,
        max_tasks: int = 1,
    ) -> dict[str, Any]: ...

    def ping(self, worker: str, held: list[str] | None = None) -> dict[str, Any]: ...

    def count_pending(self, worker: str) -> dict[str, Any]: ...

    def announce_scheduling_failure(
        self, task_name: str, family: str, params: dict[str, Any], expl: Any, owners: Any, worker: str
    ) -> None: ...

    def set_task_status_message(self, task_id: str, status_message: Any) -> None: ...

    def set_task_progress_percentage(self, task_id: str, progress_percentage: Any) -> None: ...

    def decrease_running_task_resources(self, task_id: str, decrease_resources: dict[str, Any]) -> None: ...

    def add_scheduler_message_response(self, task_id: str, message_id: str, response: Any) -> None: ...

    def report_task_statistics(self, task_id: str, statistics: Any) -> None: ...

    def scheduler_features(self) -> dict[str, Any]: ...

    def append_task_log(
        self, task_id: str, worker: str, run: str, offset: int, chunk: str, ended: bool = False
    ) -> None: ...

    def flush(self) -> None:
        """Make what was sent so far durable (the client: send what it holds)."""

    def close(self) -> None:
        """Flush, then let go of connections and files; no call may follow."""
