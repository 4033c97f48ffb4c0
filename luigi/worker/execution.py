"""The execution seam: how the worker has its granted tasks run, and the one place a runner is chosen.

The worker loop talks to one ``TaskRunner``: it starts a granted task, passes scheduler messages to it,
waits, collects outcomes and shuts the runner down (as rq's ``execute_job`` hides fork, spawn and in-process
execution). ``RunnerChoice`` is that runner: it runs each task in the worker's own process
(``InProcessRunner``, below) or in a forked task slot (``SlotRunner``, for several tasks at once or a
timeout). Another runner (a cluster executor) plugs in by satisfying ``TaskRunner``.

Running in the worker's own process is the cheapest way: no process boundary, so a task's reports go
straight to the scheduler client and its scheduler messages into a queue it reads. Runners only run: where
grants come from (asked in turn or ahead) and which of them the worker still holds is the worker's
``WorkSource`` (``luigi.worker.work_source``).
"""

from __future__ import annotations

import ctypes
import logging
import os
import queue
import signal
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from luigi.scheduler_api import SchedulerAPI
from luigi.task import Task
from luigi.task_status import FAILED
from luigi.worker import process_tree
from luigi.worker.messages import Message
from luigi.worker.output_capture import OutputCapture, captured_output
from luigi.worker.stopping import STOPPED_REASON
from luigi.worker.task_process import (
    OutcomeBox,
    SchedulerMessage,
    TaskOutcome,
    TaskProcess,
    TaskRunOptions,
    TaskStatusReporter,
    make_task_process,
    run_options,
)

logger = logging.getLogger("luigi-interface")


# Sent to the main thread when its task is cancelled, so that a blocking call (a ``time.sleep``, a wait on a
# program) returns at once and the exception raised into the task fires: ignored unless handled, so a stray
# one harms nothing, and Python programs seldom handle it.
WAKE_SIGNAL = signal.SIGURG


class WorkerStopped(BaseException):
    """Raised into a task running in the worker's own process when the worker must stop now."""


class TaskCancelled(BaseException):
    """Raised into a task running in the worker's own process whose run an operator cancelled."""


class TaskRunner(Protocol):
    """Runs the worker's granted tasks and hands back how each run ended.

    A runner is told when a task can take scheduler messages by the callback it was built with; the
    worker holds earlier messages until then (``luigi.worker.messages``).
    """

    def start(self, task: Task, timeout: float | None, trace_parent: str | None = None) -> None:
        """Begin running ``task`` (an in-process runner runs it to the end here); ``timeout`` in seconds;
        ``trace_parent``: the run's span ([otel]), which the run is given (``TaskRunOptions.trace_parent``).

        A task that cannot be started is not an error: its FAILED outcome is collected like any other.
        """

    def capacity(self, worker_processes: int) -> int:
        """How many started tasks the runner holds at a time for a worker of ``worker_processes``: those
        running, and any waiting for a process to free."""

    def deliver(self, task_id: str, message: Message) -> bool:
        """Pass a scheduler message to the running task; False if the task does not run here."""

    def wait(self, longest: float) -> None:
        """Block until an outcome is ready, ``longest`` seconds at most; at once if one is or none runs."""

    def collect(self) -> list[TaskOutcome]:
        """The outcomes of the runs that ended since the last call, oldest first."""

    def cancel_run(self, task_id: str, reason: str) -> bool:
        """Kill the run of ``task_id`` with every process it started; its outcome is FAILED with ``reason``.

        Called from the keep-alive thread (the scheduler's ``cancel_task`` message); False if the task
        does not run here.
        """

    def shut_down(self) -> None:
        """Stop whatever still runs: the worker is stopping or its run has ended."""


class RunnerChoice:
    """The worker's runner: a task runs in this process unless it needs a task slot.

    A slot is needed for a timeout (only a child can be killed), several tasks at once, or when
    ``[worker] force_multiprocessing`` says so; ``make_slot_runner()`` builds the slot runner (a
    ``SlotRunner``) when the first such task starts.
    """

    def __init__(
        self,
        in_process: InProcessRunner,
        make_slot_runner: Callable[[], TaskRunner],
        worker_processes: Callable[[], int],
        force_slots: bool,
    ) -> None:
        self.in_process = in_process
        self.in_slots: TaskRunner | None = None
        self._make_slot_runner = make_slot_runner
        self._worker_processes = worker_processes
        self._force_slots = force_slots

    def needs_slot(self, timeout: float | None) -> bool:
        """Whether a task with this ``timeout`` runs in a task slot rather than in this process."""
        return timeout is not None or self._worker_processes() > 1 or self._force_slots

    def runs_here(self, timeout: float | None) -> bool:
        """Whether a task with this ``timeout`` runs to its end in this process, inside ``start``."""
        return not self.needs_slot(timeout)

    def start(self, task: Task, timeout: float | None, trace_parent: str | None = None) -> None:
        """Run ``task`` in this process or in a slot, as ``needs_slot`` decides."""
        if not self.needs_slot(timeout):
            self.in_process.start(task, timeout, trace_parent)
            return
        if self.in_slots is None:
            self.in_slots = self._make_slot_runner()
        self.in_slots.start(task, timeout, trace_parent)

    def capacity(self, worker_processes: int) -> int:
        """The slot runner's when every task runs in a slot (``SlotRunner.capacity``), else one at a time
        here (a serial worker's task with a timeout still runs in a slot, never beside one run here)."""
        in_slots = self.in_slots
        if in_slots is not None and (worker_processes > 1 or self._force_slots):
            return in_slots.capacity(worker_processes)
        return max(1, worker_processes)

    def deliver(self, task_id: str, message: Message) -> bool:
        """Pass a scheduler message to whichever runner runs ``task_id``."""
        in_slots = self.in_slots
        if in_slots is not None and in_slots.deliver(task_id, message):
            return True
        return self.in_process.deliver(task_id, message)

    def wait(self, longest: float) -> None:
        """Wait for the slots unless an in-process outcome is ready (nothing runs in this process now)."""
        if self.in_slots is not None and not self.in_process.has_outcomes():
            self.in_slots.wait(longest)

    def collect(self) -> list[TaskOutcome]:
        """Outcomes from this process, then from the slots."""
        outcomes = self.in_process.collect()
        if self.in_slots is not None:
            outcomes.extend(self.in_slots.collect())
        return outcomes

    def cancel_run(self, task_id: str, reason: str) -> bool:
        """Kill the run of ``task_id`` in whichever runner runs it."""
        in_slots = self.in_slots
        if in_slots is not None and in_slots.cancel_run(task_id, reason):
            return True
        return self.in_process.cancel_run(task_id, reason)

    def shut_down(self) -> None:
        """Retire idle slots and kill busy ones."""
        self.in_process.shut_down()
        if self.in_slots is not None:
            self.in_slots.shut_down()


class InProcessRunner:
    """A ``TaskRunner`` that runs each task to the end inside ``start``.

    ``opened(task_id)`` is called once the task can take scheduler messages, just before it runs.
    Each run's programs are tagged under ``worker_tag`` (``luigi.worker.process_tree``); what is left of
    them is killed at ``shut_down``. A run is interrupted by an exception raised into it: ``WorkerStopped``
    from a signal handler (``stop_now``), ``TaskCancelled`` from the keep-alive thread (``cancel_run``).
    """

    def __init__(
        self,
        scheduler: SchedulerAPI,
        options: TaskRunOptions,
        opened: Callable[[str], None],
        worker_tag: str | None = None,
    ) -> None:
        self._scheduler = scheduler
        self._options = options
        self._worker_tag = worker_tag or process_tree.worker_tag()
        self._runs = 0
        self._running: str | None = None  # the task whose run() is on the stack now
        self._running_tag: str | None = None  # the tag of that run's programs
        self._interrupted: tuple[str, str] | None = None  # the task ``stop_now``/``cancel_run`` ended, why
        # ``cancel_run`` raises into the thread running a task only while the run is in its task's code
        # (the window): never into the worker's own code before or after it.
        self._window_lock = threading.Lock()
        self._window_thread: int | None = None  # the thread inside the window, or None
        self._raised = False  # cancel_run raised into the window's thread
        self._previous_wake: Any = None  # WAKE_SIGNAL's handler before ours, once ours is installed
        self._wake_installed = False
        self._opened = opened
        self._outcomes: deque[TaskOutcome] = deque()
        self._inboxes: dict[str, queue.Queue[SchedulerMessage]] = {}  # of tasks that take messages
        self._capture: OutputCapture | None = None  # holding the console from the first captured run

    def start(self, task: Task, timeout: float | None, trace_parent: str | None = None) -> None:
        """Run ``task`` here and keep its outcome for ``collect``."""
        task_id = task.task_id
        inbox: queue.Queue[SchedulerMessage] | None = None
        if task.accepts_messages:
            inbox = self._inboxes[task_id] = queue.Queue()
        reporter = TaskStatusReporter(self._scheduler, task_id, self._options.worker_id, inbox)
        results = OutcomeBox()
        options = run_options(self._options, trace_parent)
        process = make_task_process(task, reporter, options, timeout, results)
        self._opened(task_id)
        self._outcomes.append(self._run_tagged(process, results, reporter))

    def _run_tagged(
        self, process: TaskProcess, results: OutcomeBox, reporter: TaskStatusReporter
    ) -> TaskOutcome:
        """Run with this run's tag in the environment, so the programs the task starts can be found;
        a run ``stop_now`` interrupted is FAILED with ``STOPPED_REASON``, its programs killed."""
        self._runs += 1
        task_id = process.task.task_id
        tag = process_tree.run_tag(self._worker_tag, self._runs)
        previous = os.environ.get(process_tree.TAG_VARIABLE)
        os.environ[process_tree.TAG_VARIABLE] = tag
        try:
            self._running, self._running_tag = task_id, tag
            log_tail = self._run_captured(process, reporter)
            outcome = results.take(task_id)
            outcome.log_tail = log_tail
        except (WorkerStopped, TaskCancelled):  # raised outside what TaskProcess catches (its handlers)
            self._close_window()
            outcome = TaskOutcome(task_id)
        finally:
            self._running = self._running_tag = None
            if previous is None:
                os.environ.pop(process_tree.TAG_VARIABLE, None)
            else:
                os.environ[process_tree.TAG_VARIABLE] = previous
        interrupted, self._interrupted = self._interrupted, None
        if interrupted is not None and interrupted[0] == task_id:
            process_tree.kill_tree(None, tag)
            outcome.status, outcome.expl, outcome.new_deps = FAILED, interrupted[1], []
        return outcome

    def _run_in_window(self, process: TaskProcess) -> None:
        """``process.run()`` inside the window in which ``cancel_run`` may raise into this thread."""
        with self._window_lock:
            if self._interrupted is not None:  # cancelled before its run got here: it does not start
                raise TaskCancelled(self._interrupted[1])
            self._window_thread = threading.get_ident()
            self._install_wake_handler()
        try:
            process.run()
        finally:
            self._close_window()

    def _install_wake_handler(self) -> None:
        """Handle WAKE_SIGNAL (doing nothing) from the first run in the main thread to ``shut_down``: a
        handled signal interrupts a blocking call, an ignored one would not."""
        if self._wake_installed or threading.current_thread() is not threading.main_thread():
            return
        self._previous_wake = signal.signal(WAKE_SIGNAL, _wake)
        self._wake_installed = True

    def _restore_wake_handler(self) -> None:
        if self._wake_installed and threading.current_thread() is threading.main_thread():
            signal.signal(
                WAKE_SIGNAL, self._previous_wake if self._previous_wake is not None else signal.SIG_DFL
            )
            self._wake_installed = False

    def _close_window(self) -> None:
        """End the window; an exception ``cancel_run`` raised that has not fired yet fires here and is
        dropped. (Dropping it with ``PyThreadState_SetAsyncExc(thread, NULL)`` would leave CPython 3.11's
        pending flag set for good, and the next profiler or tracer, coverage's included, then spins.)"""
        try:
            with self._window_lock:
                self._window_thread = None
                raised, self._raised = self._raised, False
            if raised:
                _let_pending_fire()
        except TaskCancelled:
            pass

    def _run_captured(self, process: TaskProcess, reporter: TaskStatusReporter) -> dict[str, Any] | None:
        """Run the task here, its output kept as the run's log when the scheduler keeps logs; returns the
        log's last chunk, which goes with the run's final status."""
        if self._options.task_log_max_bytes <= 0:
            self._run_in_window(process)
            return None
        if self._capture is None:
            self._capture = OutputCapture.current()
            self._capture.hold_console()
        options = self._options
        with captured_output(
            reporter.append_task_log, options.task_log_max_bytes, process.task, options.task_log_redact
        ) as log:
            self._run_in_window(process)
        return log.tail if log is not None else None

    def stop_now(self) -> None:
        """Interrupt the task running in this process, if any (called from a signal handler)."""
        if self._running is not None:
            self._interrupted = (self._running, STOPPED_REASON)
            raise WorkerStopped(STOPPED_REASON)

    def cancel_run(self, task_id: str, reason: str) -> bool:
        """Kill the programs of ``task_id``'s run here, then raise ``TaskCancelled`` into its task's code
        (at its next Python instruction; in the main thread WAKE_SIGNAL cuts a blocking call short, in
        another a blocking call ends first). False if it does not run here."""
        with self._window_lock:
            tag, thread = self._running_tag, self._window_thread
            if self._running != task_id or tag is None:
                return False
            if self._interrupted is not None:
                return True  # already being stopped or cancelled
            self._interrupted = (task_id, reason)
            process_tree.kill_tree(None, tag)
            if thread is not None:
                _raise_in_thread(thread, TaskCancelled)
                self._raised = True
                if self._wake_installed and thread == threading.main_thread().ident:
                    signal.pthread_kill(thread, WAKE_SIGNAL)
        return True

    def deliver(self, task_id: str, message: Message) -> bool:
        """Queue a scheduler message for the task, which reads it while it runs; False if not run here."""
        inbox = self._inboxes.get(task_id)
        if inbox is None:
            return False
        inbox.put(SchedulerMessage(self._scheduler, **message))
        return True

    def wait(self, longest: float) -> None:
        """Nothing to wait for: a task started here has ended by the time ``start`` returns."""

    def has_outcomes(self) -> bool:
        """Whether a run here ended and its outcome has not been collected."""
        return bool(self._outcomes)

    def collect(self) -> list[TaskOutcome]:
        """The outcomes of the tasks run here since the last call."""
        if not self._outcomes:
            return []
        outcomes = list(self._outcomes)
        self._outcomes.clear()
        for outcome in outcomes:
            self._inboxes.pop(outcome.task_id, None)
        return outcomes

    def shut_down(self) -> None:
        """Kill what the tasks run here left running; undelivered messages are dropped with their tasks."""
        self._inboxes.clear()
        self._restore_wake_handler()
        if self._capture is not None:
            self._capture.release_console()
            self._capture = None
        if self._runs:
            process_tree.kill_tree(None, self._worker_tag, prefix=True)
            self._runs = 0


def _wake(signum: int, frame: Any) -> None:
    """WAKE_SIGNAL's handler: nothing to do; being run is what lets the pending exception fire."""


def _raise_in_thread(thread: int, exception: type[BaseException]) -> None:
    """Have ``exception`` raised in ``thread`` at its next Python instruction."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread), ctypes.py_object(exception))


def _let_pending_fire() -> None:
    """Give an exception raised into this thread its chance to fire: the interpreter checks for one at
    backward jumps, so a short loop is enough."""
    for _ in range(100):
        pass
