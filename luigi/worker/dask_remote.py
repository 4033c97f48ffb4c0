"""What runs on a Dask worker for ``[worker] executor = dask``: one task's run (``luigi.worker.remote_run``)
over Dask's transports.

Reports and live events go to the luigi worker on a Dask event topic of its runner; scheduler messages for a
task that accepts them arrive on a Dask queue named after the run; an operator's cancel of a run in a task
slot arrives on another. The task comes by reference (``luigi.worker.remote_task``) and is rebuilt here: the
Dask scheduler, which unpickles what is submitted, needs only ``luigi`` and ``distributed``, this Dask worker
the task's module.
"""

from __future__ import annotations

import queue
from typing import Any

from luigi.worker.remote_run import EventChannel, RemoteRun, run_remote
from luigi.worker.remote_task import TaskPayload, task_of
from luigi.worker.task_process import TaskRunOptions


def messages_queue_name(run_key: str) -> str:
    """The Dask queue that carries scheduler messages to the run ``run_key``."""
    return f"luigi-messages-{run_key}"


def cancel_queue_name(run_key: str) -> str:
    """The Dask queue on which the luigi worker asks the run ``run_key`` (in a task slot) to stop, and why."""
    return f"luigi-cancel-{run_key}"


class DaskMailbox:
    """The run's scheduler messages, on its Dask queue (a ``remote_run.Mailbox``)."""

    def __init__(self, run_key: str) -> None:
        import distributed

        queue_class: Any = distributed.Queue  # untyped
        self._queue = queue_class(messages_queue_name(run_key))

    def get(self, timeout: float | None) -> dict[str, Any]:
        try:
            message: dict[str, Any] = self._queue.get(timeout=timeout)
        except TimeoutError:
            raise queue.Empty from None
        return message

    def qsize(self) -> int:
        return int(self._queue.qsize())

    def close(self) -> None:
        self._queue.close()


class _DaskCancels:
    """Why the luigi worker cancelled the run, read from the run's cancel queue (made at the first ask)."""

    def __init__(self, run_key: str) -> None:
        self._run_key = run_key
        self._queue: Any = None

    def reason(self) -> str | None:
        if self._queue is None:
            import distributed

            queue_class: Any = distributed.Queue  # untyped
            self._queue = queue_class(cancel_queue_name(self._run_key))
        return str(self._queue.get()) if self._queue.qsize() else None

    def close(self) -> None:
        if self._queue is not None:
            self._queue.close()


def run_on_dask_worker(
    payload: TaskPayload,
    options: TaskRunOptions,
    topic: str,
    run_key: str,
    timeout: float | None,
    deadline: float | None,
) -> RemoteRun:
    """Run the task on this Dask worker as a local run would; with a ``timeout``, in a killable slot.

    ``payload`` names the task by reference (rebuilt here, so only this worker needs its module) or is the
    task itself; ``deadline`` (wall clock) is when the timeout, counted from the submission, runs out.
    """
    from distributed import get_worker

    task = task_of(payload)
    worker = get_worker()
    channel = EventChannel(lambda message: worker.log_event(topic, message), run_key, task)
    mailbox = DaskMailbox(run_key) if task.accepts_messages else None
    cancels = _DaskCancels(run_key)
    try:
        return run_remote(task, options, channel, mailbox, timeout, deadline, cancels.reason)
    finally:
        cancels.close()
