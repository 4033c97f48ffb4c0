"""Running granted tasks on a Dask cluster (``[worker] executor = dask``, ``[dask] scheduler_address``).

The worker still walks the graph, talks to the scheduler and pings; ``DaskRunner`` only moves each task's
run to the cluster. A task is shipped by Dask's own transport (cloudpickle) to ``run_on_dask_worker``,
which runs it with ``TaskProcess`` exactly as a local run does. What happens there comes back three ways:
- progress reports (``set_status_message``, ``set_progress_percentage``, ...) as Dask events on a topic of
  this runner, applied here through the worker's status reporter while the task still runs;
- the events the task fired (START, SUCCESS, FAILURE, ...), recorded there and fired here on the worker's
  own task object once the run ended, so event handlers registered in the worker process see them;
- the ``TaskOutcome``, with the remote traceback in a failure's explanation.
A task with a timeout runs on the Dask worker in a forked task slot, killed with everything it started
when the deadline passes. A Dask worker that dies mid-task fails the task (the scheduler's retry rules
apply); a run is reported DONE only from the outcome its own run returned. Tasks' modules must be
importable on the Dask workers, as they must be for any remote worker.
"""

from __future__ import annotations

import logging
import pickle
import queue
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from luigi.event import Event
from luigi.scheduler_api import SchedulerAPI
from luigi.task import Task
from luigi.task_status import FAILED
from luigi.worker.messages import Message
from luigi.worker.task_process import (
    FORWARDABLE_REPORTS,
    TaskOutcome,
    TaskProcess,
    TaskRunOptions,
    TaskStatusReporter,
)

# distributed's API is untyped: its client and its futures (of a ``RemoteRun``) are held as Any.
DaskClient = Any
DaskFuture = Any

logger = logging.getLogger("luigi-interface")

# After a task's deadline, how long its Dask worker has to report the timed-out run before it is cancelled.
TIMEOUT_GRACE_SECONDS = 10.0
# How often a task slot on a Dask worker is checked (its report pipe is drained and its deadline kept).
_SLOT_POLL_SECONDS = 0.5


class DaskUnavailableError(RuntimeError):
    """The Dask executor was asked for, but ``distributed`` is missing or its scheduler does not answer."""


@dataclass
class RemoteRun:
    """What ``run_on_dask_worker`` sends back: the outcome, and the events the task fired there, in order.

    An event's arguments name the task as a ``TheTask``; an argument that does not pickle comes as its repr.
    """

    outcome: TaskOutcome
    events: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)
    pid: int = 0


class TheTask:
    """Stands for the task itself among a recorded event's arguments (the worker puts its own task there)."""


class _ForwardingReporter:
    """A status reporter on a Dask worker: each report goes to the luigi worker as an event on ``topic``."""

    def __init__(self, topic: str, task_id: str) -> None:
        from distributed import get_worker

        self._worker = get_worker()
        self._topic = topic
        self._task_id = task_id
        self.scheduler_messages = None  # scheduler messages do not reach a task on a Dask cluster

    def __getattr__(self, name: str) -> Callable[..., None]:
        if name not in FORWARDABLE_REPORTS:
            raise AttributeError(name)

        def forward(*args: Any) -> None:
            self._worker.log_event(
                self._topic, {"task_id": self._task_id, "report": name, "args": list(args)}
            )

        return forward


def _recording_events(task: Task, events: list[tuple[str, tuple[Any, ...]]]) -> Callable[..., None]:
    """A ``trigger_event`` for ``task`` on a Dask worker: it records, and the luigi worker fires later."""

    def record(event: str, *args: Any, **kwargs: Any) -> None:
        events.append((event, tuple(TheTask() if arg is task else _portable(arg) for arg in args)))

    return record


def _portable(value: Any) -> Any:
    try:
        pickle.dumps(value)
    except Exception:  # anything that does not pickle (an exception holding a socket...) travels as text
        return repr(value)
    return value


def run_on_dask_worker(
    task: Task, options: TaskRunOptions, topic: str, timeout: float | None, deadline: float | None
) -> RemoteRun:
    """Run ``task`` on this Dask worker as a local run would; with a ``timeout``, in a killable slot.

    ``deadline`` (wall clock) is when the timeout, counted from the submission, runs out.
    """
    import os

    events: list[tuple[str, tuple[Any, ...]]] = []
    task.trigger_event = _recording_events(task, events)  # type: ignore[method-assign]
    reporter = _ForwardingReporter(topic, task.task_id)
    if timeout is None or deadline is None:
        outcome = TaskProcess(task, reporter, options).run()
    else:
        outcome = _run_in_slot(TaskProcess(task, reporter, options, timeout=timeout), deadline)
    return RemoteRun(outcome, events, os.getpid())


def _run_in_slot(process: TaskProcess, deadline: float) -> TaskOutcome:
    """Run ``process`` in a forked task slot, killed (with what it started) once ``deadline`` passes."""
    from luigi.worker.slots.pool import SlotPool

    task = process.task
    pool = SlotPool()
    try:
        pool.start(process, deadline, {task.task_id: task}, None)
        while True:
            pool.wait(_SLOT_POLL_SECONDS, time.time())
            outcomes = pool.collect(time.time())
            if outcomes:
                return outcomes[0]
    finally:
        pool.shut_down()


@dataclass
class _Submitted:
    task: Task
    future: DaskFuture
    reporter: TaskStatusReporter
    timeout: float | None
    deadline: float | None  # wall clock, as the Dask worker keeps it


class DaskRunner:
    """A ``TaskRunner`` that runs each task on a Dask cluster; it never asks ahead.

    The worker loop caps how many run at once (``--workers N``). ``scheduler`` receives the tasks' reports
    from this process; the runner's own Dask client is closed by ``shut_down``.
    """

    def __init__(
        self, scheduler: SchedulerAPI, options: TaskRunOptions, address: str, connect_timeout: float
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
        self._wakeups: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()  # filled by Dask's thread
        self._topic = ""
        self._client: DaskClient | None = self._connect()  # now: a wrong address stops the worker early
        self._running: dict[str, _Submitted] = {}
        self._finished: list[DaskFuture] = []

    def _connect(self) -> DaskClient:
        """A Dask client whose reports topic is new: reports of an earlier run cannot reach this one."""
        client = _connect(self._address, self._connect_timeout)
        self._topic = f"luigi-reports-{uuid.uuid4().hex}"
        client.subscribe_topic(self._topic, lambda event: self._wakeups.put(("report", event[1])))
        return client

    def start(self, task: Task, timeout: float | None) -> None:
        """Submit ``task``'s run to the cluster (connecting again after a ``shut_down``)."""
        task_id = task.task_id
        deadline = time.time() + timeout if timeout else None
        reporter = TaskStatusReporter(self._scheduler, task_id, self._options.worker_id)
        if self._client is None:
            self._client = self._connect()
        future = self._client.submit(
            run_on_dask_worker,
            task,
            self._options,
            self._topic,
            timeout,
            deadline,
            key=f"{task_id}-{uuid.uuid4().hex}",
        )
        self._running[task_id] = _Submitted(task, future, reporter, timeout, deadline)
        future.add_done_callback(lambda done: self._wakeups.put(("done", done)))

    def deliver(self, task_id: str, message: Message) -> bool:
        """Scheduler messages do not reach a task on the cluster: always False (the worker drops them)."""
        return False

    def wait(self, longest: float) -> None:
        """Block until a run ends, a report arrives, a deadline's grace runs out, or ``longest`` seconds."""
        if self._finished or not self._running:
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
        else:
            self._apply_report(payload)

    def _apply_report(self, report: Any) -> None:
        submitted = self._running.get(str(report.get("task_id"))) if isinstance(report, dict) else None
        name = report.get("report") if submitted is not None else None
        if submitted is None or name not in FORWARDABLE_REPORTS:
            return  # a report of a task that has ended, or not one a task may send
        try:
            getattr(submitted.reporter, name)(*report.get("args", []))
        except Exception:  # a failed progress report must not take the worker down; it is logged
            logger.exception("Could not forward %s for %s", name, submitted.task)

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
        return outcomes

    def _take_submitted(self, finished: list[DaskFuture]) -> list[_Submitted]:
        """The runs of these futures that are still ours (not timed out, nor of a cancelled run)."""
        by_future = {id(submitted.future): submitted for submitted in self._running.values()}
        taken = [by_future[id(future)] for future in finished if id(future) in by_future]
        for submitted in taken:
            del self._running[submitted.task.task_id]
        return taken

    def _outcome(self, submitted: _Submitted) -> TaskOutcome:
        """The outcome the run returned, its events fired here; FAILED with the cause if it returned none."""
        task, future = submitted.task, submitted.future
        if future.status == "finished":
            remote: RemoteRun = future.result()
            for event, args in remote.events:
                task.trigger_event(event, *(task if isinstance(arg, TheTask) else arg for arg in args))
            return remote.outcome
        return _outcome_of_lost_run(task, future)

    def _cancel_overdue(self) -> list[TaskOutcome]:
        """Runs whose Dask worker did not report them timed out: cancelled and failed as timed out."""
        now = time.time()
        overdue = [
            s for s in self._running.values() if s.deadline and now >= s.deadline + TIMEOUT_GRACE_SECONDS
        ]
        outcomes = []
        for submitted in overdue:
            task = submitted.task
            del self._running[task.task_id]
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
        for submitted in self._running.values():
            submitted.future.cancel()
        self._running.clear()
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
