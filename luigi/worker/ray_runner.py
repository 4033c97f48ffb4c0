"""Running granted tasks on a Ray cluster (``[worker] executor = ray``, ``[ray] address``).

``RayRunner`` is a ``ClusterRunner`` (``luigi.worker.cluster_runner``: what every cluster executor
promises) over Ray: each run is a Ray task of ``luigi.worker.ray_remote.run_on_ray_worker`` taking one CPU,
never retried by Ray (``max_retries=0``: a run lost with its Ray worker fails in luigi and is retried under
luigi's rules), the task by reference. Reports, live events, scheduler messages and cancels of runs in a
task slot go through one ``RunChannel`` actor of this runner; a thread of this process takes the reports
from it. A cancelled run outside a slot, and one past its deadline and grace, is force-cancelled: Ray kills
its worker process. This process joins the cluster as a Ray driver (``ray.init(address=...)``), unless it
already is one.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any

from luigi.scheduler_api import SchedulerAPI
from luigi.worker.cluster_runner import ClusterRunner, LostRun, Submitted
from luigi.worker.ray_remote import RunChannel, run_on_ray_worker
from luigi.worker.remote_run import RemoteRun
from luigi.worker.remote_task import TaskPayload
from luigi.worker.task_process import TaskRunOptions

# How long the head's port has to answer before the worker gives up on the cluster.
_CONNECT_TIMEOUT_SECONDS = 10.0
# How long the reports thread waits on the channel in one call (also how soon it sees ``_close``).
_REPORTS_POLL_SECONDS = 0.5


class RayUnavailableError(RuntimeError):
    """The Ray executor was asked for, but ``ray`` is missing or its cluster does not answer."""


class RayRunner(ClusterRunner):
    """A ``ClusterRunner`` on a Ray cluster; ``shut_down`` kills its channel and leaves the cluster."""

    cluster = "Ray"

    def __init__(
        self,
        scheduler: SchedulerAPI,
        options: TaskRunOptions,
        address: str,
        opened: Callable[[str], None] = lambda task_id: None,
    ) -> None:
        super().__init__(scheduler, options, opened)
        self._address = address
        self._ray = _import_ray()
        self._joined = False  # whether this runner made this process a Ray driver (and leaves at close)
        self._channel: Any = None
        # Runs in a task slot told to cancel, by id of their handle: the channel holds each one's cancel
        # reason until its run ends, when it is forgotten there (with the call that posted it).
        self._cancelled_in_slot: dict[int, tuple[Submitted, Any]] = {}
        self._remote_run: Any = None
        self._reports_thread: threading.Thread | None = None
        self._closing = threading.Event()
        self._connect()  # now: a wrong address stops the worker early

    def _connect(self) -> None:
        """Join the cluster, make this runner's channel and start taking its reports."""
        ray = self._ray
        if not self._address:
            raise RayUnavailableError(
                "[worker] executor = ray needs the Ray cluster's address: set [ray] address"
            )
        if not ray.is_initialized():
            _check_reachable(self._address)
            try:
                ray.init(address=self._address, log_to_driver=False)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise RayUnavailableError(
                    f"Cannot reach the Ray cluster at {self._address} ([ray] address): {exc}"
                ) from exc
            self._joined = True
        self._channel = ray.remote(RunChannel).options(num_cpus=0).remote()
        self._remote_run = ray.remote(run_on_ray_worker).options(num_cpus=1, max_retries=0)
        self._closing.clear()
        self._reports_thread = threading.Thread(
            target=self._take_reports, name="luigi-ray-reports", daemon=True
        )
        self._reports_thread.start()

    def _take_reports(self) -> None:
        """The reports thread: move each report from the channel into the runner's wakeups."""
        ray, channel = self._ray, self._channel
        while not self._closing.is_set():
            try:
                reports = ray.get(channel.take_reports.remote(_REPORTS_POLL_SECONDS))
            except Exception:  # the channel is gone (the runner closes, the cluster went away): stop here
                return
            for report in reports:
                self._wakeups.put(("report", report))

    def _submit(
        self,
        payload: TaskPayload,
        options: TaskRunOptions,
        run_key: str,
        timeout: float | None,
        deadline: float | None,
    ) -> Any:
        if self._channel is None:
            self._connect()
        ref = self._remote_run.remote(payload, options, self._channel, run_key, timeout, deadline)
        ref.future().add_done_callback(lambda _: self._wakeups.put(("done", ref)))
        return ref

    def _post_message(self, submitted: Submitted, message: dict[str, Any]) -> None:
        self._channel.post_message.remote(submitted.run_key, message)

    def _stop(self, submitted: Submitted, reason: str | None) -> None:
        """A run in a task slot is told to kill its slot and what it started (as at its deadline); any other
        is force-cancelled (Ray kills its worker process)."""
        if reason is not None and submitted.timeout is not None and self._channel is not None:
            posted = self._channel.cancel.remote(submitted.run_key, reason)
            self._cancelled_in_slot[id(submitted.handle)] = (submitted, posted)
        else:
            self._ray.cancel(submitted.handle, force=True)

    def _forget(self, submitted: Submitted) -> Submitted:
        """Also drop the run's mailbox on the channel."""
        forgotten = super()._forget(submitted)
        if submitted.task.accepts_messages and self._channel is not None:
            self._channel.forget.remote(submitted.run_key)
        return forgotten

    def _take_submitted(self, finished: list[Any]) -> list[Submitted]:
        """Also forget on the channel the cancel reason of each run cancelled in its slot that has ended
        (the runner forgot the run when it cancelled it, before the run read the reason)."""
        for handle in finished:
            cancelled = self._cancelled_in_slot.pop(id(handle), None)
            if cancelled is not None and self._channel is not None:
                submitted, posted = cancelled
                self._channel.forget.remote(submitted.run_key, after=posted)
        return super()._take_submitted(finished)

    def _result(self, submitted: Submitted) -> RemoteRun | LostRun:
        exceptions = self._ray.exceptions
        try:
            remote: RemoteRun = self._ray.get(submitted.handle, timeout=0)
            return remote
        except exceptions.RayTaskError as failed:  # the run raised: its cause, and the remote traceback
            return LostRun(failed.cause if failed.cause is not None else failed, False, str(failed))
        except (
            exceptions.WorkerCrashedError,
            exceptions.NodeDiedError,
            exceptions.LocalRayletDiedError,
        ) as lost:
            return LostRun(lost, True)
        except exceptions.RayError as other:  # cancelled, or the object is lost: the run returned nothing
            return LostRun(other, False, str(other))

    def _close(self) -> None:
        self._closing.set()
        if self._reports_thread is not None:
            self._reports_thread.join()
            self._reports_thread = None
        if self._channel is not None:
            self._ray.kill(self._channel)
            self._channel = None
        self._cancelled_in_slot.clear()  # their cancel reasons went with the channel
        if self._joined:
            self._ray.shutdown()
            self._joined = False


def _check_reachable(address: str) -> None:
    """Fail at once, naming the setting, when nothing answers at ``host:port`` (Ray itself waits minutes)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return  # another form Ray knows ("auto"...): Ray checks it
    try:
        socket.create_connection((host, int(port)), timeout=_CONNECT_TIMEOUT_SECONDS).close()
    except OSError as exc:
        raise RayUnavailableError(
            f"Cannot reach the Ray cluster at {address} ([ray] address): {exc}"
        ) from exc


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise RayUnavailableError(
            f"[worker] executor = ray needs the ray package (pip install 'luigi[ray]'): {exc}"
        ) from exc
    return ray
