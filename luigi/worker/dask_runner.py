"""Running granted tasks on a Dask cluster (``[worker] executor = dask``, ``[dask] scheduler_address``).

``DaskRunner`` is a ``ClusterRunner`` (``luigi.worker.cluster_runner``: what every cluster executor
promises) over Dask's transports: each run is a Dask future of ``luigi.worker.dask_remote.run_on_dask_worker``
(the task by reference, so the Dask scheduler never needs the users' modules); its reports and live events
come back on a Dask event topic of this runner; scheduler messages go to it on a Dask queue named after the
run, and an operator's cancel of a run in a task slot on another. Dask cannot stop a run in a Dask worker's
thread: a cancelled one ends on its own, and its outcome is dropped. Tasks' modules must be importable on
the Dask workers, as they must be for any remote worker.
"""

from __future__ import annotations

import traceback
import uuid
from collections.abc import Callable
from typing import Any

from luigi.scheduler_api import SchedulerAPI
from luigi.worker.cluster_runner import ClusterRunner, LostRun, Submitted
from luigi.worker.dask_remote import cancel_queue_name, messages_queue_name, run_on_dask_worker
from luigi.worker.remote_run import RemoteRun
from luigi.worker.remote_task import TaskPayload
from luigi.worker.task_process import TaskRunOptions

# distributed's API is untyped: its client and its futures (of a ``RemoteRun``) are held as Any.
DaskClient = Any
DaskFuture = Any


class DaskUnavailableError(RuntimeError):
    """The Dask executor was asked for, but ``distributed`` is missing or its scheduler does not answer."""


class DaskRunner(ClusterRunner):
    """A ``ClusterRunner`` on a Dask cluster; its own Dask client is closed by ``shut_down``."""

    cluster = "Dask"

    def __init__(
        self,
        scheduler: SchedulerAPI,
        options: TaskRunOptions,
        address: str,
        connect_timeout: float,
        opened: Callable[[str], None] = lambda task_id: None,
    ):
        super().__init__(scheduler, options, opened)
        self._address = address
        self._connect_timeout = connect_timeout
        self._topic = ""
        self._client: DaskClient | None = self._connect()  # now: a wrong address stops the worker early

    def _connect(self) -> DaskClient:
        """A Dask client whose reports topic is new: reports of an earlier run cannot reach this one."""
        client = _connect(self._address, self._connect_timeout)
        self._topic = f"luigi-reports-{uuid.uuid4().hex}"
        client.subscribe_topic(self._topic, lambda event: self._wakeups.put(("report", event[1])))
        return client

    def _submit(
        self,
        payload: TaskPayload,
        options: TaskRunOptions,
        run_key: str,
        timeout: float | None,
        deadline: float | None,
    ) -> DaskFuture:
        if self._client is None:
            self._client = self._connect()
        future = self._client.submit(
            run_on_dask_worker, payload, options, self._topic, run_key, timeout, deadline, key=run_key
        )
        future.add_done_callback(lambda done: self._wakeups.put(("done", done)))
        return future

    def _post_message(self, submitted: Submitted, message: dict[str, Any]) -> None:
        if submitted.messages is None:
            submitted.messages = self._queue(messages_queue_name(submitted.run_key))
        submitted.messages.put(message)

    def _queue(self, name: str) -> Any:
        import distributed

        queue_class: Any = distributed.Queue  # untyped
        return queue_class(name, client=self._client)

    def _stop(self, submitted: Submitted, reason: str | None) -> None:
        """Cancel the run's future; a run in a task slot (one with a timeout) is told to kill its slot and
        what it started, as at its deadline."""
        submitted.handle.cancel()
        if reason is not None and submitted.timeout is not None and self._client is not None:
            self._queue(cancel_queue_name(submitted.run_key)).put(reason)

    def _result(self, submitted: Submitted) -> RemoteRun | LostRun:
        future = submitted.handle
        if future.status == "finished":
            remote: RemoteRun = future.result()
            return remote
        from distributed import KilledWorker

        try:
            exc = future.exception()
        except Exception as cancelled:  # a cancelled future has no exception to give, only this one
            exc = cancelled
        return LostRun(exc, isinstance(exc, KilledWorker), "".join(_format_traceback(future)))

    def _close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()


def _connect(address: str, connect_timeout: float) -> DaskClient:
    if not address:
        raise DaskUnavailableError(
            "[worker] executor = dask needs the Dask scheduler's address: set [dask] scheduler_address"
        )
    try:
        import distributed
    except ImportError as exc:
        raise DaskUnavailableError(
            f"[worker] executor = dask needs the distributed package (pip install 'luigi[dask]'): {exc}"
        ) from exc
    try:
        client_class: DaskClient = distributed.Client
        return client_class(address, timeout=connect_timeout, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise DaskUnavailableError(
            f"Cannot reach the Dask scheduler at {address} ([dask] scheduler_address): {exc}"
        ) from exc


def _format_traceback(future: DaskFuture) -> list[str]:
    try:
        return traceback.format_tb(future.traceback())
    except Exception:  # no traceback to show (a cancelled future): the message alone says it
        return []
