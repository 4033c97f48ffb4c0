"""What every cluster executor's runner does the same way (``DaskRunner``, ``RayRunner``).

The worker still walks the graph, talks to the scheduler and pings; a ``ClusterRunner`` only moves each
task's run to the cluster, where ``luigi.worker.remote_run`` runs it as a local run would. Each task goes
by reference (``luigi.worker.remote_task``), or pickled with a warning when it cannot. While it runs, its
progress reports and its events come back on the run's channel into ``_wakeups``: reports go on to the
scheduler through the worker's status reporter, events are fired on the worker's own task object, so event
handlers registered in the worker process see them as the task fires them (the few that carry more than
plain data come with the outcome). They are applied in the order the run sent them (by their ``seq``),
whatever order the transport delivered them in, and all of them before the run's outcome. A task with a
timeout runs on the cluster's worker in a forked task slot, killed with everything it started when the
deadline passes; a run its cluster worker did not report by the deadline and a grace is cancelled here.
A cluster worker that dies mid-task fails the task (the
scheduler's retry rules apply); a run is reported DONE only from the outcome its own run returned.

A subclass supplies the cluster's transport: ``_submit``, ``_post_message``, ``_stop``, ``_result``,
``_close``; it puts ``("done", handle)`` and ``("report", report)`` into ``_wakeups`` from its threads.
"""

from __future__ import annotations

import logging
import queue
import threading
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
from luigi.worker.remote_run import EVENT, RemoteRun, TheTask
from luigi.worker.remote_task import ByReference, TaskPayload
from luigi.worker.task_process import (
    FORWARDABLE_REPORTS,
    TaskOutcome,
    TaskRunOptions,
    TaskStatusReporter,
    run_options,
)

logger = logging.getLogger("luigi-interface")

# After a task's deadline, how long its cluster worker has to report the timed-out run before it is cancelled.
TIMEOUT_GRACE_SECONDS = 10.0
# How long an ended run's outcome waits for the reports and events its task sent live, still on their way.
LIVE_EVENTS_GRACE_SECONDS = 5.0


@dataclass
class Submitted:
    """One run on the cluster, as the runner follows it."""

    task: Task
    run_key: str
    handle: Any  # the cluster's own handle of the run (a Dask future, a Ray object ref)
    reporter: TaskStatusReporter
    timeout: float | None
    deadline: float | None  # wall clock, as the cluster's worker keeps it
    applied: int = 0  # messages of the channel applied, in their order: the next to apply is ``seq`` applied
    early: dict[int, dict[str, Any]] = field(default_factory=dict)  # arrived before one sent earlier
    messages: Any = None  # the cluster's carrier of the run's scheduler messages, made at the first one


@dataclass
class LostRun:
    """A run that returned no outcome: ``worker_lost`` when its cluster worker died, else ``error`` says why
    the cluster could not run it (with ``remote_traceback``)."""

    error: BaseException
    worker_lost: bool
    remote_traceback: str = ""


class ClusterRunner:
    """A ``TaskRunner`` that runs each task on a cluster.

    The worker loop caps how many run at once (``--workers N``). ``scheduler`` receives the tasks' reports
    from this process; ``opened(task_id)`` is told when a task may take scheduler messages (at once: the
    cluster holds them for the run).
    """

    cluster = "the cluster"  # how messages name it: "Dask", "Ray"

    def __init__(
        self, scheduler: SchedulerAPI, options: TaskRunOptions, opened: Callable[[str], None]
    ) -> None:
        self._scheduler = scheduler
        # The cluster keeps no completion cache of ours, and the task runs outside this process.
        self._options = TaskRunOptions(
            worker_id=options.worker_id,
            check_unfulfilled_deps=options.check_unfulfilled_deps,
            check_complete_on_run=options.check_complete_on_run,
            task_process_context=options.task_process_context,
            in_child_process=True,
        )
        self._opened = opened
        self._wakeups: queue.SimpleQueue[tuple[str, Any]] = (
            queue.SimpleQueue()
        )  # filled by the cluster's threads
        self._running: dict[str, Submitted] = {}
        self._finished: list[Any] = []
        # Runs an operator cancelled, and why: cancelled by ``collect`` in the worker loop.
        self._cancelled: dict[str, str] = {}
        self._cancelled_lock = threading.Lock()
        self._by_reference = ByReference(self.cluster, f"the {self.cluster} workers")

    # -- what a cluster supplies ------------------------------------------------------------------------

    def _submit(
        self,
        payload: TaskPayload,
        options: TaskRunOptions,
        run_key: str,
        timeout: float | None,
        deadline: float | None,
    ) -> Any:
        """Submit the run; return its handle (put into ``_wakeups`` as ``("done", handle)`` at its end)."""
        raise NotImplementedError

    def _post_message(self, submitted: Submitted, message: dict[str, Any]) -> None:
        """Send a scheduler message to the run."""
        raise NotImplementedError

    def _stop(self, submitted: Submitted, reason: str | None) -> None:
        """Cancel the run; with a ``reason``, a run in a task slot is told to kill its slot."""
        raise NotImplementedError

    def _result(self, submitted: Submitted) -> RemoteRun | LostRun:
        """What the ended run returned, or why it returned nothing."""
        raise NotImplementedError

    def _close(self) -> None:
        """Let go of the cluster (``_submit`` connects again)."""
        raise NotImplementedError

    # -- the TaskRunner ---------------------------------------------------------------------------------

    def start(self, task: Task, timeout: float | None, trace_parent: str | None = None) -> None:
        """Submit ``task``'s run to the cluster."""
        task_id = task.task_id
        deadline = time.time() + timeout if timeout else None
        reporter = TaskStatusReporter(self._scheduler, task_id, self._options.worker_id)
        run_key = f"{task_id}-{uuid.uuid4().hex}"
        options = run_options(self._options, trace_parent)
        handle = self._submit(self._by_reference.payload(task), options, run_key, timeout, deadline)
        self._running[task_id] = Submitted(task, run_key, handle, reporter, timeout, deadline)
        if task.accepts_messages:
            self._opened(task_id)

    def capacity(self, worker_processes: int) -> int:
        """One task on the cluster for each of the worker's processes."""
        return max(1, worker_processes)

    def deliver(self, task_id: str, message: Message) -> bool:
        """Send a scheduler message to the run; False if the task does not run here or refuses messages."""
        submitted = self._running.get(task_id)
        if submitted is None or not submitted.task.accepts_messages:
            return False
        self._post_message(submitted, dict(message))
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
        """Apply, in the order the run sent them, its reports and live events; what is not of a running run
        is dropped."""
        submitted = self._running.get(str(report.get("task_id"))) if isinstance(report, dict) else None
        if submitted is None or report.get("run") != submitted.run_key:
            return  # of a task that has ended, or of an earlier run of it
        seq = report.get("seq")
        if not isinstance(seq, int) or seq < submitted.applied:
            return  # not one the channel numbered, or one applied already
        submitted.early[seq] = report
        while submitted.applied in submitted.early:
            self._apply_in_order(submitted, submitted.early.pop(submitted.applied))
            submitted.applied += 1

    def _apply_in_order(self, submitted: Submitted, report: dict[str, Any]) -> None:
        """Forward a report to the scheduler, or fire an event on the worker's task."""
        if report.get("kind") == EVENT:
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
                self._stop(self._forget(submitted), reason)
                logger.info("Cancelled the run of %s on the cluster: %s", task_id, reason)
                outcomes.append(TaskOutcome(task_id, FAILED, reason))
        return outcomes

    def _take_submitted(self, finished: list[Any]) -> list[Submitted]:
        """The runs of these handles that are still ours (not timed out, nor of a cancelled run)."""
        by_handle = {id(submitted.handle): submitted for submitted in self._running.values()}
        return [self._forget(by_handle[id(handle)]) for handle in finished if id(handle) in by_handle]

    def _forget(self, submitted: Submitted) -> Submitted:
        """Stop tracking a run (its reports are dropped from now on) and close its message carrier."""
        del self._running[submitted.task.task_id]
        if submitted.messages is not None:
            submitted.messages.close()
        return submitted

    def _outcome(self, submitted: Submitted) -> TaskOutcome:
        """The outcome the run returned, after its events; FAILED with the cause if it returned none."""
        task = submitted.task
        remote = self._result(submitted)
        if isinstance(remote, LostRun):
            return self._outcome_of_lost_run(task, remote)
        self._await_live_messages(submitted, remote.sent)
        for event, args in remote.events:
            task.trigger_event(event, *(task if isinstance(arg, TheTask) else arg for arg in args))
        return remote.outcome

    def _outcome_of_lost_run(self, task: Task, lost: LostRun) -> TaskOutcome:
        """FAILED for a run that returned no outcome: its cluster worker died, or the cluster could not
        run it."""
        if lost.worker_lost:
            lost_worker = f"its {self.cluster} worker was lost ({lost.error})"
            message = f"Worker task {task.task_id} died unexpectedly: {lost_worker}"
            logger.error(message)
            task.trigger_event(Event.PROCESS_FAILURE, task, message)
            return TaskOutcome(task.task_id, FAILED, message)
        message = f"{self.cluster} could not run {task.task_id}: {lost.error!r}\n{lost.remote_traceback}"
        logger.error(message)
        task.trigger_event(Event.FAILURE, task, lost.error)
        return TaskOutcome(task.task_id, FAILED, message)

    def _await_live_messages(self, submitted: Submitted, expected: int) -> None:
        """Take the channel's messages until the run's reports and live events have all been applied (or a
        grace passed)."""
        self._running[submitted.task.task_id] = submitted  # so that its late messages still apply
        give_up = time.monotonic() + LIVE_EVENTS_GRACE_SECONDS
        try:
            while submitted.applied < expected and time.monotonic() < give_up:
                try:
                    self._take(self._wakeups.get(timeout=max(0.0, give_up - time.monotonic())))
                except queue.Empty:
                    break
        finally:
            del self._running[submitted.task.task_id]
        if submitted.applied < expected:
            logger.warning(
                "%d report(s) or event(s) of %s did not arrive from the cluster",
                expected - submitted.applied,
                submitted.task,
            )

    def _cancel_overdue(self) -> list[TaskOutcome]:
        """Runs whose cluster worker did not report them timed out: cancelled and failed as timed out."""
        now = time.time()
        overdue = [
            s for s in self._running.values() if s.deadline and now >= s.deadline + TIMEOUT_GRACE_SECONDS
        ]
        outcomes = []
        for submitted in overdue:
            task = self._forget(submitted).task
            self._stop(submitted, None)
            message = (
                f"Worker task {task.task_id} timed out after {submitted.timeout} seconds and was cancelled."
            )
            logger.error(message)
            task.trigger_event(Event.TIMEOUT, task, message)
            outcomes.append(TaskOutcome(task.task_id, FAILED, message))
        return outcomes

    def shut_down(self) -> None:
        """Cancel what runs on the cluster and let go of it (``start`` connects again)."""
        for submitted in list(self._running.values()):
            self._stop(self._forget(submitted), None)
        self._finished.clear()
        self._close()
