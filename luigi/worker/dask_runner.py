"""Running granted tasks on a Dask cluster (``[worker] executor = dask``, ``[dask] scheduler_address``).

The worker still walks the graph, talks to the scheduler and pings; ``DaskRunner`` only moves each task's
run to the cluster, where ``luigi.worker.dask_remote.run_on_dask_worker`` runs it as a local run would. A
task is shipped by Dask's own transport (cloudpickle). While it runs, its progress reports and its events
come back on a Dask event topic of this runner: reports go on to the scheduler through the worker's status
reporter, events are fired on the worker's own task object, so event handlers registered in the worker
process see them as the task fires them (the few that carry more than plain data come with the outcome).
Scheduler messages for a task that accepts them go to it on a Dask queue. A task with a timeout runs on
the Dask worker in a forked task slot, killed with everything it started when the deadline passes. A Dask
worker that dies mid-task fails the task (the scheduler's retry rules apply); a run is reported DONE only
from the outcome its own run returned. Tasks' modules must be importable on the Dask workers, as they must
be for any remote worker.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from luigi.event import Event
from luigi.scheduler_api import SchedulerAPI
from luigi.task import Task
from luigi.task_status import FAILED
from luigi.worker.dask_remote import (
    RemoteRun,
    TheTask,
    cancel_queue_name,
    messages_queue_name,
    run_on_dask_worker,
)
from luigi.worker.messages import Message
from luigi.worker.task_process import (
    FORWARDABLE_REPORTS,
    TaskOutcome,
    TaskRunOptions,
    TaskStatusReporter,
    run_options,
)

# distributed's API is untyped: its client and its futures (of a ``RemoteRun``) are held as Any.
DaskClient = Any
DaskFuture = Any

logger = logging.getLogger("luigi-interface")

# After a task's deadline, how long its Dask worker has to report the timed-out run before it is cancelled.
TIMEOUT_GRACE_SECONDS = 10.0
# How long an ended run's outcome waits for the events its task sent live and that are still on their way.
LIVE_EVENTS_GRACE_SECONDS = 5.0


class DaskUnavailableError(RuntimeError):
    """The Dask executor was asked for, but ``distributed`` is missing or its scheduler does not answer."""


@dataclass
class _Submitted:
    task: Task
    run_key: str
    future: DaskFuture
    reporter: TaskStatusReporter
    timeout: float | None
    deadline: float | None  # wall clock, as the Dask worker keeps it
    live_events: int = 0  # events received on the topic
    messages: Any = None  # the run's Dask queue of scheduler messages, made at the first message


class DaskRunner:
    """A ``TaskRunner`` that runs each task on a Dask cluster; it never asks ahead.

    The worker loop caps how many run at once (``--workers N``). ``scheduler`` receives the tasks' reports
    from this process; ``opened(task_id)`` is told when a task may take scheduler messages. The runner's
    own Dask client is closed by ``shut_down``.
    """

    def __init__(
        self,
        scheduler: SchedulerAPI,
        options: TaskRunOptions,
        address: str,
        connect_timeout: float,
        opened: Callable[[str], None] = lambda task_id: None,
    ):
        self._scheduler = scheduler
        # The cluster keeps no completion cache of ours, and the task runs outside this process.
        self._options = TaskRunOptions(
            worker_id=options.worker_id,
            check_unfulfilled_deps=options.check_unfulfilled_deps,
            check_complete_on_run=options.check_complete_on_run,
            task_process_context=options.task_process_context,
            in_child_process=True,
        )
        self._address = address
        self._connect_timeout = connect_timeout
        self._opened = opened  # told when a task may take messages: at once, its Dask queue holds them
        self._wakeups: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()  # filled by Dask's thread
        self._topic = ""
        self._client: DaskClient | None = self._connect()  # now: a wrong address stops the worker early
        self._running: dict[str, _Submitted] = {}
        self._finished: list[DaskFuture] = []
        # Runs an operator cancelled, and why: cancelled by ``collect`` in the worker loop.
        self._cancelled: dict[str, str] = {}
        self._cancelled_lock = threading.Lock()

    def _connect(self) -> DaskClient:
        """A Dask client whose reports topic is new: reports of an earlier run cannot reach this one."""
        client = _connect(self._address, self._connect_timeout)
        self._topic = f"luigi-reports-{uuid.uuid4().hex}"
        client.subscribe_topic(self._topic, lambda event: self._wakeups.put(("report", event[1])))
        return client

    def start(self, task: Task, timeout: float | None, trace_parent: str | None = None) -> None:
        """Submit ``task``'s run to the cluster (connecting again after a ``shut_down``)."""
        task_id = task.task_id
        deadline = time.time() + timeout if timeout else None
        reporter = TaskStatusReporter(self._scheduler, task_id, self._options.worker_id)
        if self._client is None:
            self._client = self._connect()
        run_key = f"{task_id}-{uuid.uuid4().hex}"
        future = self._client.submit(
            run_on_dask_worker,
            task,
            run_options(self._options, trace_parent),
            self._topic,
            run_key,
            timeout,
            deadline,
            key=run_key,
        )
        self._running[task_id] = _Submitted(task, run_key, future, reporter, timeout, deadline)
        future.add_done_callback(lambda done: self._wakeups.put(("done", done)))
        if task.accepts_messages:
            self._opened(task_id)

    def capacity(self, worker_processes: int) -> int:
        """One task on the cluster for each of the worker's processes."""
        return max(1, worker_processes)

    def deliver(self, task_id: str, message: Message) -> bool:
        """Put a scheduler message on the run's Dask queue; False if the task does not run here or refuses."""
        submitted = self._running.get(task_id)
        if submitted is None or not submitted.task.accepts_messages or self._client is None:
            return False
        if submitted.messages is None:
            import distributed

            queue_class: Any = distributed.Queue  # untyped
            submitted.messages = queue_class(messages_queue_name(submitted.run_key), client=self._client)
        submitted.messages.put(dict(message))
        return True

    def wait(self, longest: float) -> None:
        """Block until a run ends, a report arrives, a deadline's grace runs out, or ``longest`` seconds."""
        if self._finished or self._cancelled or not self._running:
            return
        try:
            self._take(self._wakeups.get(timeout=self._wait_limit(longest)))
        except queue.Empty:
            pass

    def _wait_limit(self, longest: float) -> float:
        now = time.time()
        limits = [s.deadline + TIMEOUT_GRACE_SECONDS - now for s in self._running.values() if s.deadline]
        return max(0.0, min([longest, *limits]))

    def _take(self, wakeup: tuple[str, Any]) -> None:
        kind, payload = wakeup
        if kind == "done":
            self._finished.append(payload)
        elif kind == "report":
            self._apply_report(payload)
        # ("cancel": only wakes the wait; ``collect`` cancels the run)

    def _apply_report(self, report: Any) -> None:
        """Apply a report or fire an event the run sent live; what is not of a running run is dropped."""
        submitted = self._running.get(str(report.get("task_id"))) if isinstance(report, dict) else None
        if submitted is None or report.get("run") != submitted.run_key:
            return  # of a task that has ended, or of an earlier run of it
        if report.get("kind") == "event":
            submitted.live_events += 1
            self._fire(
                submitted.task, str(report.get("event")), report.get("args", []), report.get("task_at", [])
            )
            return
        name = report.get("report")
        if name not in FORWARDABLE_REPORTS:
            return  # not one a task may send
        try:
            getattr(submitted.reporter, name)(*report.get("args", []))
        except Exception:  # a failed progress report must not take the worker down; it is logged
            logger.exception("Could not forward %s for %s", name, submitted.task)

    @staticmethod
    def _fire(task: Task, event: str, args: list[Any], task_at: list[int]) -> None:
        """Fire a live event on the worker's own task object, the task put back where it was an argument."""
        arguments = [task if index in task_at else arg for index, arg in enumerate(args)]
        try:
            task.trigger_event(event, *arguments)
        except Exception:  # an event handler's error must not take the worker down; it is logged
            logger.exception("An event handler for %s failed on %s", event, task)

    def collect(self) -> list[TaskOutcome]:
        """Outcomes of runs that ended (reports first), then of runs past their deadline and its grace."""
        while True:
            try:
                self._take(self._wakeups.get_nowait())
            except queue.Empty:
                break
        finished, self._finished = self._finished, []
        outcomes = [self._outcome(submitted) for submitted in self._take_submitted(finished)]
        outcomes.extend(self._cancel_overdue())
        outcomes.extend(self._cancel_cancelled())
        return outcomes

    def cancel_run(self, task_id: str, reason: str) -> bool:
        """Have the run of ``task_id`` cancelled at the loop's next ``collect`` (within its wait), FAILED
        with ``reason``; False if it does not run here."""
        if task_id not in self._running:
            return False
        with self._cancelled_lock:
            self._cancelled[task_id] = reason
        self._wakeups.put(("cancel", task_id))
        return True

    def _cancel_cancelled(self) -> list[TaskOutcome]:
        """Cancel the cancelled runs still going on the cluster (one that ended first keeps its outcome)."""
        with self._cancelled_lock:
            cancelled, self._cancelled = self._cancelled, {}
        outcomes = []
        for task_id, reason in cancelled.items():
            submitted = self._running.get(task_id)
            if submitted is not None:
                self._stop_remote_run(self._forget(submitted), reason)
                logger.info("Cancelled the run of %s on the cluster: %s", task_id, reason)
                outcomes.append(TaskOutcome(task_id, FAILED, reason))
        return outcomes

    def _stop_remote_run(self, submitted: _Submitted, reason: str) -> None:
        """Cancel the run's future; a run in a task slot (one with a timeout) is told to kill its slot and
        what it started, as at its deadline. Dask cannot stop a run in a Dask worker's thread: that one
        ends on its own, and its outcome is dropped."""
        submitted.future.cancel()
        if submitted.timeout is not None and self._client is not None:
            import distributed

            queue_class: Any = distributed.Queue  # untyped
            queue_class(cancel_queue_name(submitted.run_key), client=self._client).put(reason)

    def _take_submitted(self, finished: list[DaskFuture]) -> list[_Submitted]:
        """The runs of these futures that are still ours (not timed out, nor of a cancelled run)."""
        by_future = {id(submitted.future): submitted for submitted in self._running.values()}
        return [self._forget(by_future[id(future)]) for future in finished if id(future) in by_future]

    def _forget(self, submitted: _Submitted) -> _Submitted:
        """Stop tracking a run (its reports are dropped from now on) and close its message queue."""
        del self._running[submitted.task.task_id]
        if submitted.messages is not None:
            submitted.messages.close()
        return submitted

    def _outcome(self, submitted: _Submitted) -> TaskOutcome:
        """The outcome the run returned, after its events; FAILED with the cause if it returned none."""
        task, future = submitted.task, submitted.future
        if future.status != "finished":
            return _outcome_of_lost_run(task, future)
        remote: RemoteRun = future.result()
        self._await_live_events(submitted, remote.live_events)
        for event, args in remote.events:
            task.trigger_event(event, *(task if isinstance(arg, TheTask) else arg for arg in args))
        return remote.outcome

    def _await_live_events(self, submitted: _Submitted, expected: int) -> None:
        """Take the topic's messages until the run's live events have all arrived (or a grace passed)."""
        self._running[submitted.task.task_id] = submitted  # so that its late events still apply
        give_up = time.monotonic() + LIVE_EVENTS_GRACE_SECONDS
        try:
            while submitted.live_events < expected and time.monotonic() < give_up:
                try:
                    self._take(self._wakeups.get(timeout=max(0.0, give_up - time.monotonic())))
                except queue.Empty:
                    break
        finally:
            del self._running[submitted.task.task_id]
        if submitted.live_events < expected:
            logger.warning(
                "%d event(s) of %s did not arrive from the cluster",
                expected - submitted.live_events,
                submitted.task,
            )

    def _cancel_overdue(self) -> list[TaskOutcome]:
        """Runs whose Dask worker did not report them timed out: cancelled and failed as timed out."""
        now = time.time()
        overdue = [
            s for s in self._running.values() if s.deadline and now >= s.deadline + TIMEOUT_GRACE_SECONDS
        ]
        outcomes = []
        for submitted in overdue:
            task = self._forget(submitted).task
            submitted.future.cancel()
            message = (
                f"Worker task {task.task_id} timed out after {submitted.timeout} seconds and was cancelled."
            )
            logger.error(message)
            task.trigger_event(Event.TIMEOUT, task, message)
            outcomes.append(TaskOutcome(task.task_id, FAILED, message))
        return outcomes

    def take_granted_ahead(self) -> dict[str, Any] | None:
        """Never anything: tasks run on the cluster while the worker asks: no round trip to hide."""
        return None

    def granted_ahead(self) -> list[str]:
        """Never anything (see ``take_granted_ahead``)."""
        return []

    def shut_down(self) -> None:
        """Cancel what runs on the cluster and close this runner's Dask client (``start`` reconnects)."""
        for submitted in list(self._running.values()):
            self._forget(submitted).future.cancel()
        self._finished.clear()
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


def _outcome_of_lost_run(task: Task, future: DaskFuture) -> TaskOutcome:
    """FAILED for a run that returned no outcome: its Dask worker died, or the cluster could not run it."""
    from distributed import KilledWorker

    try:
        exc = future.exception()
    except Exception as cancelled:  # a cancelled future has no exception to give, only this one
        exc = cancelled
    if isinstance(exc, KilledWorker):
        message = f"Worker task {task.task_id} died unexpectedly: its Dask worker was lost ({exc})"
        logger.error(message)
        task.trigger_event(Event.PROCESS_FAILURE, task, message)
        return TaskOutcome(task.task_id, FAILED, message)
    remote_traceback = "".join(_format_traceback(future))
    message = f"Dask could not run {task.task_id}: {exc!r}\n{remote_traceback}"
    logger.error(message)
    task.trigger_event(Event.FAILURE, task, exc)
    return TaskOutcome(task.task_id, FAILED, message)


def _format_traceback(future: DaskFuture) -> list[str]:
    import traceback

    try:
        return traceback.format_tb(future.traceback())
    except Exception:  # no traceback to show (a cancelled future): the message alone says it
        return []
