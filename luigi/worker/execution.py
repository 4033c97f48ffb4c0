"""The execution seam: how the worker has its granted tasks run, and the one place a runner is chosen.

The worker loop talks to one ``TaskRunner``: it starts a granted task, passes scheduler messages to it,
waits, collects outcomes and shuts the runner down (as rq's ``execute_job`` hides fork, spawn and in-process
execution). ``RunnerChoice`` is that runner: it runs each task in the worker's own process
(``InProcessRunner``, below) or in a forked task slot (``SlotRunner``, for several tasks at once or a
timeout). Another runner (a cluster executor) plugs in by satisfying ``TaskRunner``.

Running in the worker's own process is the cheapest way: no process boundary, so a task's reports go
straight to the scheduler client and its scheduler messages into a queue it reads. Between two tasks a
serial worker would idle through a round trip to the scheduler; the ``AheadAsker``
(``luigi.worker.lookahead``) overlaps that round trip with short tasks. Only the in-process runner asks
ahead: a task granted ahead may still run in a slot, so it is told of those starts and of every outcome.
"""

from __future__ import annotations

import ctypes
import logging
import os
import queue
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from luigi.scheduler_api import SchedulerAPI
from luigi.task import Task
from luigi.task_status import DONE, FAILED
from luigi.worker import process_tree
from luigi.worker.lookahead import AheadAsker
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

    def take_granted_ahead(self) -> dict[str, Any] | None:
        """A ``get_work`` reply the runner obtained while its tasks ran (asking ahead), to act on next."""

    def granted_ahead(self) -> list[str]:
        """Tasks granted to this worker that the runner holds but has not started: current tasks too."""

    def shut_down(self) -> None:
        """Stop whatever still runs: the worker is stopping or its run has ended."""


class RunnerChoice:
    """The worker's runner: a task runs in this process unless it needs a task slot.

    A slot is needed for a timeout (only a child can be killed), several tasks at once, or when
    ``[worker] force_multiprocessing`` says so; ``make_slot_runner()`` builds the slot runner (a
    ``SlotRunner``) when the first such task starts. Asking ahead is the in-process runner's: it hears of
    every start and outcome, since a task granted ahead may be one that runs in a slot.
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

    def start(self, task: Task, timeout: float | None, trace_parent: str | None = None) -> None:
        """Run ``task`` in this process or in a slot, as ``needs_slot`` decides (a task cancelled before
        it started ends in this process, without running)."""
        if not self.needs_slot(timeout) or self.in_process.cancelled_before_start(task.task_id):
            self.in_process.start(task, timeout, trace_parent)
            return
        if self.in_slots is None:
            self.in_slots = self._make_slot_runner()
        self.in_process.starts_elsewhere(task.task_id)
        self.in_slots.start(task, timeout, trace_parent)

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
        """Outcomes from this process, then from the slots; the in-process runner hears of each."""
        outcomes = self.in_process.collect()
        if self.in_slots is not None:
            outcomes.extend(self.in_slots.collect())
        for outcome in outcomes:
            self.in_process.saw_outcome(outcome)
        return outcomes

    def cancel_run(self, task_id: str, reason: str) -> bool:
        """Kill the run of ``task_id`` in whichever runner runs it."""
        in_slots = self.in_slots
        if in_slots is not None and in_slots.cancel_run(task_id, reason):
            return True
        return self.in_process.cancel_run(task_id, reason)

    def take_granted_ahead(self) -> dict[str, Any] | None:
        """The next grant an ask ahead brought (only the in-process runner asks ahead)."""
        return self.in_process.take_granted_ahead()

    def granted_ahead(self) -> list[str]:
        """Tasks granted ahead and not started yet."""
        return self.in_process.granted_ahead()

    def put_back_granted_ahead(self, grant: dict[str, Any]) -> None:
        """Queue a grant made ahead again, first in line (see ``InProcessRunner``)."""
        self.in_process.put_back_granted_ahead(grant)

    def let_go(self, task_id: str) -> bool:
        """``task_id`` was handed to another worker: kill its run in a slot, or drop its grant made
        ahead; False when neither can be done (it runs in this process, or has ended)."""
        let_go = getattr(self.in_slots, "let_go", None)  # a ``SlotRunner``'s
        if let_go is not None and let_go(task_id):
            return True
        return self.in_process.forget_granted_ahead(task_id)

    def shut_down(self) -> None:
        """Retire idle slots and kill busy ones."""
        self.in_process.shut_down()
        if self.in_slots is not None:
            self.in_slots.shut_down()


class InProcessRunner:
    """A ``TaskRunner`` that runs each task to the end inside ``start``.

    ``opened(task_id)`` is called once the task can take scheduler messages, just before it runs;
    ``get_work_kwargs()`` are the worker's ``get_work`` arguments for an ask ahead, and ``taking_work()``
    whether it still takes new work (a worker phasing out asks for nothing more). Without ``ahead`` (the
    scheduler cannot be asked ahead, or ``[worker] lookahead`` is off) every task is asked for in turn.
    Each run's programs are tagged under ``worker_tag`` (``luigi.worker.process_tree``); what is left of
    them is killed at ``shut_down``. A run is interrupted by an exception raised into it: ``WorkerStopped``
    from a signal handler (``stop_now``), ``TaskCancelled`` from the keep-alive thread (``cancel_run``).
    """

    def __init__(
        self,
        scheduler: SchedulerAPI,
        options: TaskRunOptions,
        ahead: AheadAsker | None,
        get_work_kwargs: Callable[[], dict[str, Any]],
        taking_work: Callable[[], bool],
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
        self._cancel_at_start: dict[str, str] = {}  # granted ahead and cancelled: fails when it starts
        self._window_thread: int | None = None  # the thread inside the window, or None
        self._raised_into: int | None = None  # the thread ``cancel_run`` raised into, until the window ends
        self._previous_wake: Any = None  # WAKE_SIGNAL's handler before ours, once ours is installed
        self._wake_installed = False
        self._ahead = ahead
        self._get_work_kwargs = get_work_kwargs
        self._taking_work = taking_work
        self._opened = opened
        self._outcomes: deque[TaskOutcome] = deque()
        self._inboxes: dict[str, queue.Queue[SchedulerMessage]] = {}  # of tasks that take messages
        self._capture: OutputCapture | None = None  # holding the console from the first captured run

    def start(self, task: Task, timeout: float | None, trace_parent: str | None = None) -> None:
        """Ask ahead if worth it, then run ``task`` here and keep its outcome for ``collect``."""
        task_id = task.task_id
        inbox: queue.Queue[SchedulerMessage] | None = None
        if task.accepts_messages:
            inbox = self._inboxes[task_id] = queue.Queue()
        reporter = TaskStatusReporter(self._scheduler, task_id, self._options.worker_id, inbox)
        results = OutcomeBox()
        options = run_options(self._options, trace_parent)
        process = make_task_process(task, reporter, options, timeout, results)
        ahead = self._ahead
        if ahead is None:
            self._opened(task_id)
            self._outcomes.append(self._run_tagged(process, results, reporter))
            return
        # (a worker phasing out runs what it was granted, and asks for nothing more)
        ahead.before_start(task_id, self._taking_work(), self._get_work_kwargs)
        self._opened(task_id)
        started = time.monotonic()
        self._outcomes.append(self._run_tagged(process, results, reporter))
        ahead.ran(time.monotonic() - started)

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
            reason = self._cancel_at_start.pop(process.task.task_id, None)
            if reason is not None:
                self._interrupted = (process.task.task_id, reason)
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
        """End the window; an exception ``cancel_run`` raised that has not fired yet is dropped."""
        with self._window_lock:
            self._window_thread = None
            thread, self._raised_into = self._raised_into, None
            # Only after a raise: on CPython 3.11 each drop leaves the interpreter's eval breaker set, which
            # hangs the next profiler or debugger (cProfile, pdb, coverage) and slows every call a little.
            if thread is not None:
                _raise_in_thread(thread, None)

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
        another a blocking call ends first). A task granted ahead and not started yet fails as it starts.
        False if it neither runs here nor waits to."""
        with self._window_lock:
            tag, thread = self._running_tag, self._window_thread
            if self._running != task_id or tag is None:
                if task_id not in self.granted_ahead():
                    return False
                self._cancel_at_start[task_id] = reason
                return True
            if self._interrupted is not None:
                return True  # already being stopped or cancelled
            self._interrupted = (task_id, reason)
            process_tree.kill_tree(None, tag)
            if thread is not None:
                self._raised_into = thread
                _raise_in_thread(thread, TaskCancelled)
                if self._wake_installed and thread == threading.main_thread().ident:
                    signal.pthread_kill(thread, WAKE_SIGNAL)
        return True

    def starts_elsewhere(self, task_id: str) -> None:
        """Another runner starts ``task_id``: no ask ahead goes before it, so held reports go now."""
        if self._ahead is not None:
            self._ahead.before_start(task_id, False, self._get_work_kwargs)

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

    def saw_outcome(self, outcome: TaskOutcome) -> None:
        """A run ended, here or elsewhere: grants assuming its task are run only if it finished DONE."""
        if self._ahead is not None:
            self._ahead.finished(outcome.task_id, outcome.status == DONE)

    def take_granted_ahead(self) -> dict[str, Any] | None:
        """The next grant an ask ahead brought, if any (a cancel of a grant dropped unstarted is dropped)."""
        if self._ahead is None:
            return None
        grant = self._ahead.take()
        if self._cancel_at_start:
            waiting = {*self._ahead.queued(), grant.get("task_id") if grant is not None else None}
            with self._window_lock:
                for task_id in set(self._cancel_at_start) - waiting:
                    del self._cancel_at_start[task_id]
        return grant

    def cancelled_before_start(self, task_id: str) -> bool:
        """Whether ``task_id`` was granted ahead and cancelled: it fails here as it starts, never runs."""
        return task_id in self._cancel_at_start

    def granted_ahead(self) -> list[str]:
        """Tasks granted ahead that have not started yet."""
        return self._ahead.queued() if self._ahead is not None else []

    def put_back_granted_ahead(self, grant: dict[str, Any]) -> None:
        """A grant made ahead just taken is to start later: first in line again."""
        if self._ahead is not None:
            self._ahead.put_back(grant)

    def forget_granted_ahead(self, task_id: str) -> bool:
        """Drop an unstarted grant made ahead (handed to another worker); False if none is queued."""
        return self._ahead.forget(task_id) if self._ahead is not None else False

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


def _raise_in_thread(thread: int, exception: type[BaseException] | None) -> None:
    """Have ``exception`` raised in ``thread`` at its next Python instruction (None: drop a pending one)."""
    what = ctypes.py_object(exception) if exception is not None else None
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread), what)
