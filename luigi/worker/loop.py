"""The worker: walks the task graph into the scheduler (``add``), then runs what it is granted (``run``).

``Worker.add`` hands the walk to ``luigi.worker.graph_walk``. ``Worker.run`` is a loop of named steps: make
room, ask for work, start the granted task, wait for a running one, idle or stop; outcomes are reported as
they are collected. How a task runs (in this process, or in a forked task slot) is the runner's business:
the loop talks to it only through the ``TaskRunner`` protocol of ``luigi.worker.execution``. Where grants
come from (asked in turn, or ahead with leases kept) is its ``WorkSource``'s (``luigi.worker.work_source``).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import logging
import random
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any

from luigi import notifications
from luigi.rpc import RPCError
from luigi.rpc.recognise import is_our_client
from luigi.rpc.retry import checked_ride_out
from luigi.scheduler_api import SchedulerAPI
from luigi.task import Task
from luigi.task_register import load_task
from luigi.task_status import DONE, FAILED, RUNNING
from luigi.worker import identity, log_redaction, process_tree
from luigi.worker.config import EXECUTOR_DASK, EXECUTOR_LOCAL, EXECUTOR_RAY, dask, worker
from luigi.worker.config import ray as ray_section
from luigi.worker.execution import InProcessRunner, RunnerChoice, TaskRunner
from luigi.worker.get_work_reply import WORKER_STATE_DISABLED, WorkGrant
from luigi.worker.graph_walk import FailureEmails, GraphWalk, TaskLedger, retry_policy_dict, validate_task
from luigi.worker.keep_alive import KeepAliveThread, serialized, should_stay_alive
from luigi.worker.leases import STOPPED as HANDED_OVER
from luigi.worker.lookahead import AheadAsker, Lookahead
from luigi.worker.messages import Message, MessageRouter
from luigi.worker.progress import ProgressLine, progress_line_for_terminal, progress_of
from luigi.worker.stopping import STOPPED_REASON, GracefulStop
from luigi.worker.task_process import (
    OutcomeBox,
    TaskOutcome,
    TaskProcess,
    TaskRunOptions,
    TaskStatusReporter,
    is_external,
    make_task_process,
)
from luigi.worker.work_source import AskAheadSource, DirectSource, WorkSource

if TYPE_CHECKING:
    from luigi.rpc.client import RemoteScheduler
    from luigi.worker.tracing import RunSpans

logger = logging.getLogger("luigi-interface")

# json.dumps(expl, default=str) without building an encoder for every outcome.
_EXPL_ENCODER = json.JSONEncoder(default=str)

# Building a task from the module, family and parameters another process sent runs users' code (the
# module's import, parameter parsing, the task's __init__): whatever that raises (an unknown family, a
# module that does not import, a bad value) fails that task instead of stopping the worker.
_TASK_LOAD_ERRORS = (Exception,)


def _progress_enabled() -> bool:
    """``[core] progress`` (default true): the live progress line on a terminal; false keeps logs alone."""
    from luigi.configuration import get_config

    return bool(get_config().getboolean("core", "progress", True))


def _time() -> Any:
    """``time`` as ``luigi.worker.time``: patching it there reaches the idle loop's clock and sleep."""
    return getattr(sys.modules.get("luigi.worker"), "time", time)


class Worker:
    """Schedules tasks with a scheduler and runs the ones it grants; use as a context manager.

    Keyword arguments override ``[worker]`` options (e.g. ``Worker(keep_alive=True, timeout=60)``).
    """

    def __init__(
        self,
        scheduler: SchedulerAPI | None = None,
        worker_id: str | None = None,
        worker_processes: int = 1,
        assistant: bool = False,
        **kwargs: Any,
    ) -> None:
        if scheduler is None:
            from luigi.scheduler import Scheduler

            scheduler = Scheduler()
        self._config = worker(**kwargs)
        _check_wait_settings(self._config)
        self._task_log_redact = log_redaction.configured_patterns()  # a bad pattern stops the worker here
        self._scheduler = scheduler
        # Decided once: only our RPC client rides out a restart, holds reports, asks ahead and keeps leases
        # (and locks its own calls: anything else is shared with the keep-alive thread behind a lock).
        remote = self._remote = scheduler if is_our_client(scheduler) else None
        self._rpc = remote if remote is not None else serialized(scheduler)
        if remote is not None:
            remote.unreachable_timeout = checked_ride_out(self._config.scheduler_unreachable_timeout)
        self.worker_processes = int(worker_processes)
        self._assistant = assistant
        self.host = socket.gethostname()
        self._worker_info = identity.worker_info(self.worker_processes, self.host)
        self._id: str = worker_id or self._config.id or identity.worker_id(self._worker_info)
        self._first_task: str | None = None
        self.run_succeeded = True
        self.unfulfilled_counts: collections.Counter[str] = collections.Counter()
        self._completion_cache: dict[str, bool] | None = {} if self._config.cache_task_completion else None
        self._ledger = TaskLedger(self._rpc, remote.after_delivery if remote is not None else None)
        self._emails = FailureEmails(self._config.send_failure_email, self.host)
        self._graph = GraphWalk(
            self._rpc,
            lambda **fields: self._add_task(**fields),  # late-bound: a test may replace worker._add_task
            self._ledger,
            self._emails,
            self._config,
            self._completion_cache,
            self._id,
            assistant,
        )
        # Read by luigi.execution_summary:
        self._scheduled_tasks = self._ledger.tasks
        self._add_task_history = self._ledger.history
        self._get_work_response_history: list[dict[str, Any]] = []

        self._running_tasks: dict[str, Task] = {}  # started here, outcome not handled yet
        self._progress: ProgressLine | None = None  # drawn on a terminal while run() runs
        self._messages = MessageRouter(self._deliver_message)
        self._stop_requesting_work = False
        self._run_options: list[TaskRunOptions] = []  # their task_log_* fields are set by run()
        self._process_tag = process_tree.worker_tag()  # every task run here is tagged under it
        self._in_process: InProcessRunner | None = None
        self._choice: RunnerChoice | None = None
        self._runner: TaskRunner = self._build_runner()
        self._source: WorkSource = self._build_source(remote)
        self._spans = _run_spans(self._id)  # [otel]: a span per task run, or None (untraced)
        self._stop = GracefulStop(self._config.shutdown_grace, self._start_phasing_out, self._stop_now)
        self._idle_since: float | None = None
        self._keep_alive_thread: KeepAliveThread | None = None
        self._previous_sigusr1: Any = None
        self._install_shutdown_handler()

    def _build_runner(self) -> TaskRunner:
        """The runner of this worker's tasks: a ``RunnerChoice`` between this process and task slots, or
        a ``DaskRunner`` with ``[worker] executor = dask``, a ``RayRunner`` with ``executor = ray``.

        The one place runners are made; another runner (or a subclass's) plugs in here.
        """
        config = self._config
        options = TaskRunOptions(
            worker_id=self._id,
            check_unfulfilled_deps=config.check_unfulfilled_deps,
            check_complete_on_run=config.check_complete_on_run,
            completion_cache=self._completion_cache,
            task_process_context=config.task_process_context,
        )
        self._run_options.append(options)
        # The cluster and slot runners are imported when chosen: a serial run in this process needs none.
        if config.executor == EXECUTOR_DASK:
            from luigi.worker.dask_runner import DaskRunner

            cluster = dask()
            return DaskRunner(
                self._rpc, options, cluster.scheduler_address, cluster.connect_timeout, self._messages.open
            )
        if config.executor == EXECUTOR_RAY:
            from luigi.worker.ray_runner import RayRunner

            return RayRunner(self._rpc, options, ray_section().address, self._messages.open)
        tag = self._process_tag
        in_process = self._in_process = InProcessRunner(self._rpc, options, self._messages.open, tag)
        slot_options = dataclasses.replace(options, in_child_process=True)

        def slots() -> TaskRunner:
            from luigi.worker.slots import SlotRunner

            return SlotRunner(
                self._rpc, slot_options, self._ledger.tasks, self._messages.open, tag, self._processes_now
            )

        self._run_options.append(slot_options)
        self._choice = RunnerChoice(
            in_process,
            slots,
            lambda: self.worker_processes,
            config.force_multiprocessing,
        )
        return self._choice

    def _build_source(self, remote: RemoteScheduler | None) -> WorkSource:
        """Where grants come from: our RPC client (``remote``) asks ahead and keeps leases; the in-process
        scheduler, and any scheduler that is not our client, is asked in turn (``DirectSource``).

        Asking ahead pays only before a task that runs in this process, so it needs the ``RunnerChoice``.
        """
        if remote is None:
            return DirectSource()
        choice = self._choice
        asks_ahead = self._config.lookahead and choice is not None
        return AskAheadSource(
            self._rpc,
            self._id,
            self._config.ping_interval,
            AheadAsker(remote, Lookahead(asks_ahead), self._flush_held_reports),
            choice.runs_here if choice is not None else _runs_elsewhere,
            self._taking_work,
            self._get_work_kwargs,
            self._stop_handed_over_run,
            self._forget_run,
        )

    def _processes_now(self) -> int:
        """``worker_processes``, read when a slot runner needs it: the scheduler may change it."""
        return self.worker_processes

    def _flush_held_reports(self) -> None:
        self._rpc.flush()

    @property
    def add_succeeded(self) -> bool:
        """Whether every task the last ``add`` reached could be scheduled."""
        return self._graph.succeeded

    # -- lifecycle ----------------------------------------------------------------------------------

    def __enter__(self) -> Worker:
        """Start pinging the scheduler so it knows this worker (and its running tasks) are alive."""
        self._keep_alive_thread = KeepAliveThread(
            self._rpc, self._id, self._config.ping_interval, self._handle_rpc_message, self._source
        )
        self._keep_alive_thread.start()
        return self

    def __exit__(self, exc_type: object, exc_value: object, tb: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop pinging, kill task processes still running, and give SIGUSR1 back to its old handler."""
        if self._keep_alive_thread is not None:
            self._keep_alive_thread.stop()
            self._keep_alive_thread.join(timeout=10)  # a ping may hang on an unreachable scheduler
            self._keep_alive_thread = None
        self._runner.shut_down()
        self._restore_shutdown_handler()
        if self._spans is not None:
            self._spans.close()
            self._spans = None

    def _install_shutdown_handler(self) -> None:
        if self._config.no_install_shutdown_handler or not hasattr(signal, "SIGUSR1"):
            return
        try:
            self._previous_sigusr1 = signal.signal(signal.SIGUSR1, self.handle_interrupt)
        except ValueError:  # not the main thread: signals cannot be handled here
            self._previous_sigusr1 = None

    def _restore_shutdown_handler(self) -> None:
        if self._previous_sigusr1 is None:
            return
        try:
            if signal.getsignal(signal.SIGUSR1) == self.handle_interrupt:
                signal.signal(signal.SIGUSR1, self._previous_sigusr1)
        except ValueError:
            pass
        self._previous_sigusr1 = None

    def handle_interrupt(self, signum: int, frame: FrameType | None) -> None:
        """SIGUSR1: finish the running tasks but take no new work (``luigi --take-lock`` sends it)."""
        logger.info("Worker %s received signal %s: it will stop asking for new work", self._id, signum)
        self._start_phasing_out()

    def _start_phasing_out(self) -> None:
        self._stop_requesting_work = True

    def _taking_work(self) -> bool:
        return not self._stop_requesting_work

    def _stop_now(self) -> None:
        """The grace is over or a second signal came: interrupt a task running in this process, and stop
        riding out an unreachable scheduler (a call gives up after its ordinary attempts)."""
        if self._remote is not None:
            self._remote.unreachable_timeout = 0.0
        if self._in_process is not None:
            self._in_process.stop_now()

    def _kill_running_tasks(self) -> None:
        """Kill what still runs (with its process trees) and report it FAILED: the worker is stopping."""
        self._collect_outcomes(block=False)
        if not self._running_tasks:
            return
        self._runner.shut_down()
        for task_id in list(self._running_tasks):
            logger.error("Task %s was still running when the worker stopped: killed", task_id)
            self._handle_outcome(TaskOutcome(task_id, FAILED, STOPPED_REASON))

    # -- messages from the scheduler ----------------------------------------------------------------

    def _handle_rpc_message(self, message: dict[str, Any]) -> None:
        """Call the handler a ping reply names; only the handlers below may be invoked remotely."""
        name = message.get("name") if isinstance(message, dict) else None
        kwargs = message.get("kwargs") if isinstance(message, dict) else None
        handlers: dict[str, Callable[..., None]] = {
            "set_worker_processes": self.set_worker_processes,
            "dispatch_scheduler_message": self.dispatch_scheduler_message,
            "cancel_task": self.cancel_task,
        }
        if name not in handlers or not isinstance(kwargs, dict):
            logger.error("Worker %s has no handler for scheduler message %r", self._id, message)
            return
        logger.info("Worker %s got message %s", self._id, name)
        handlers[name](**kwargs)

    def set_worker_processes(self, n: int) -> None:
        """Change how many tasks run at once (the scheduler's ``set_worker_processes`` message)."""
        self.worker_processes = max(1, int(n))
        self._rpc.add_worker(self._id, {"workers": self.worker_processes})

    def dispatch_scheduler_message(self, task_id: str, message_id: str, content: Any, **kwargs: Any) -> None:
        """Hand a scheduler message to the task it is for (held until that task has started here)."""
        self._messages.dispatch(
            {**kwargs, "task_id": str(task_id), "message_id": message_id, "content": content}
        )

    def cancel_task(self, task_id: str, reason: str) -> None:
        """Kill the run of a task an operator cancelled (the scheduler's ``cancel_task`` message), with
        every process it started; the run is reported FAILED with ``reason``."""
        started = self._runner.cancel_run(task_id, reason)
        if not started and not self._source.cancel_before_start(task_id, reason):  # (fails as it starts)
            logger.warning("Not cancelling %s: it does not run in worker %s", task_id, self._id)
            return
        logger.info("Cancelling the run of %s: %s", task_id, reason)

    def _deliver_message(self, message: Message) -> None:
        """Give a message to its running task, through the runner that runs it."""
        task_id, message_id = message["task_id"], message["message_id"]
        task = self._running_tasks.get(task_id)
        if task is None or not task.accepts_messages:
            logger.warning(
                "Dropping scheduler message %s: task %s is not running here or refuses messages",
                message_id,
                task_id,
            )
        elif not self._runner.deliver(task_id, message):
            logger.warning("Dropping scheduler message %s: task %s has just finished", message_id, task_id)

    # -- add: telling the scheduler about the graph ---------------------------------------------------

    def add(self, task: Task, multiprocess: bool = False, processes: int = 0) -> bool:
        """Report ``task`` and everything it needs to the scheduler; False if some scheduling failed.

        ``multiprocess`` checks ``complete()`` of many tasks at once, in ``processes`` threads.
        """
        validate_task(task)
        if self._first_task is None:
            self._first_task = task.task_id
        return self._graph.add(task, parallel=multiprocess, processes=processes)

    def _add_task(self, **fields: Any) -> None:
        """Every ``add_task`` this worker sends goes through here, recorded in ``_add_task_history``."""
        self._ledger.send_add_task(**fields)

    # -- run: the loop ------------------------------------------------------------------------------

    def run(self) -> bool:
        """Run granted tasks until none is left for this worker; True if every one succeeded."""
        logger.info("Running Worker with %d processes", self.worker_processes)
        self.run_succeeded = True
        self._announce_to_scheduler()
        self._source.begin_run(pinged=self._keep_alive_thread is not None)
        self._capture_task_logs_if_kept()
        self._progress = progress_line_for_terminal(_progress_enabled())
        try:
            with (
                self._stop.handling_signals(not self._config.no_install_shutdown_handler),
                self._progress or contextlib.nullcontext(),
            ):
                while self._run_step():
                    pass
                while self._running_tasks:
                    self._collect_outcomes(block=True)
        finally:
            self._progress = None
            self._graph.forget_reported()
            self._runner.shut_down()
        return self.run_succeeded

    def _capture_task_logs_if_kept(self) -> None:
        """Capture and ship each run's output (``[worker] task_log_max_bytes``) if the scheduler keeps it."""
        limit = self._config.task_log_max_bytes if self._scheduler_keeps_task_logs() else 0
        for options in self._run_options:
            options.task_log_max_bytes = limit
            options.task_log_redact = self._task_log_redact

    def _scheduler_keeps_task_logs(self) -> bool:
        if self._config.task_log_max_bytes <= 0 or self._config.executor != EXECUTOR_LOCAL:
            return False  # off; or tasks run on a cluster's workers, whose output is not captured
        try:
            return bool(self._rpc.scheduler_features().get("task_logs"))
        except RPCError:  # a Luigi luigid has no such method: it keeps no logs
            return False

    def _show_progress(self, force: bool = False) -> None:
        """Redraw the terminal's progress line, if there is one (see ``luigi.worker.progress``)."""
        line = self._progress
        if line is not None:
            line.show(progress_of(self._ledger.history, len(self._running_tasks), line.elapsed()), force)

    def _run_step(self) -> bool:
        """Make room, ask for work, then start it, wait for a running task or idle; False: nothing is left."""
        self._collect_while_full()
        grant = self._get_work()
        if grant.worker_state == WORKER_STATE_DISABLED:
            self._start_phasing_out()
        if grant.task_id is not None:
            self._idle_since = None
            self._run_task(grant.task_id)
        elif self._running_tasks:
            self._collect_outcomes(block=True)
        elif self._stay_alive(grant):
            self._sleep_before_asking_again()
        else:
            return False
        return True

    def _announce_to_scheduler(self) -> None:
        info = {**self._worker_info, "first_task": self._first_task, "assistant": self._assistant}
        self._rpc.add_worker(self._id, info)

    def _collect_while_full(self) -> None:
        while len(self._running_tasks) >= self._runner.capacity(self.worker_processes):
            self._collect_outcomes(block=True)

    # -- asking for work ----------------------------------------------------------------------------

    def _get_work(self) -> WorkGrant:
        """Ask the scheduler for a task (nothing once stopping, but a task granted ahead is ours to run),
        loading tasks we did not schedule."""
        self._note_new_owners(self._source.release_handed_over())
        reply = self._source.next_grant()
        if reply is None:
            if self._stop_requesting_work:
                return WorkGrant.nothing(WORKER_STATE_DISABLED)
            if self.worker_processes > 0:
                reply = self._rpc.get_work(**self._get_work_kwargs())
            else:  # a worker with no processes only watches whether its tasks are still pending
                logger.debug("Checking if tasks are still pending")
                reply = self._rpc.count_pending(worker=self._id)
        grant = WorkGrant.from_reply(reply)
        if grant.batch_id is not None and grant.batch_task_ids:
            self._take_batch(grant)
        elif grant.task_id is not None and grant.task_id not in self._ledger.tasks:
            self._load_foreign_task(grant)
        self._get_work_response_history.append(
            {"task_id": grant.task_id, "running_tasks": grant.running_tasks}
        )
        if grant.task_id is None and not self._stop_requesting_work:
            grant.log_no_work(tasks_running_here=bool(self._running_tasks))
        return grant

    def _get_work_kwargs(self) -> dict[str, Any]:
        return {
            "worker": self._id,
            "host": self.host,
            "assistant": self._assistant,
            "current_tasks": [*self._running_tasks, *self._source.unstarted()],
        }

    def _load_foreign_task(self, grant: WorkGrant) -> None:
        """A task scheduled by another worker (we are an assistant): build it from its family and params."""
        logger.info("Did not schedule %s, will load it dynamically", grant.task_id)
        try:
            self._ledger.tasks[str(grant.task_id)] = load_task(
                grant.task_module, grant.task_family, grant.task_params
            )
        except _TASK_LOAD_ERRORS:
            self._handle_task_load_error([str(grant.task_id)])
            grant.task_id = None

    def _take_batch(self, grant: WorkGrant) -> None:
        """Build the combined task of a batch and tell the scheduler we run it under the batch id."""
        try:
            task = load_task(grant.task_module, grant.task_family, grant.task_params)
        except _TASK_LOAD_ERRORS:
            self._handle_task_load_error(grant.batch_task_ids)
            return
        tasks = self._ledger.tasks
        members = [tasks[i] for i in grant.batch_task_ids if i in tasks]
        tasks[task.task_id] = task
        self._ledger.batches[task.task_id] = members
        self._rpc.add_task(  # not through _add_task: as Luigi, the batch's start is no summary event
            worker=self._id,
            task_id=task.task_id,
            status=RUNNING,
            runnable=True,
            batch_id=grant.batch_id,
            family=task.task_family,
            module=task.task_module,
            params=task.to_str_params(),
            priority=task.priority,
            resources=task.process_resources(),
        )
        grant.task_id = task.task_id

    def _handle_task_load_error(self, task_ids: list[str]) -> None:
        """Fail tasks we were granted but cannot build (called while handling the error), explained by the
        traceback's text."""
        message = f"Cannot find task(s) sent by scheduler: {', '.join(task_ids)}"
        logger.exception(message)
        self.run_succeeded = False
        expl = notifications.wrap_traceback(traceback.format_exc())
        for task_id in task_ids:
            self._add_task(
                worker=self._id,
                task_id=task_id,
                status=FAILED,
                runnable=False,
                expl=expl,
                assistant=self._assistant,  # an assistant that reports a task is no stakeholder of it
            )
        if self._config.send_failure_email:
            notifications.send_error_email(f"Luigi: {message}", expl)

    def _stay_alive(self, grant: WorkGrant) -> bool:
        """With ``keep_alive``, whether to wait for more work rather than exit."""
        # The monotonic clock, not ``luigi.worker.time``: a test patching that counts the calls of runs.
        if self._idle_since is None:
            self._idle_since = time.monotonic()
        if self._stop_requesting_work:
            return False
        idle_seconds = time.monotonic() - self._idle_since
        return should_stay_alive(self._config, grant, self._assistant, idle_seconds)

    def _sleep_before_asking_again(self) -> None:
        interval = self._config.wait_interval + random.uniform(0, self._config.wait_jitter)
        logger.debug("Sleeping for %f seconds", interval)
        _time().sleep(interval)

    # -- running tasks and reporting how they ended -------------------------------------------------

    def _run_task(self, task_id: str) -> None:
        """Luigi's name for starting a granted task (the loop calls it, so a test may wrap it)."""
        self._start_task(task_id)

    def _handle_next_task(self) -> None:
        """Luigi's name for waiting for (at most ``wait_interval``) and reporting finished runs."""
        self._collect_outcomes(block=True)

    def _sleeper(self) -> Iterator[None]:
        """Luigi's idle-loop generator: each step sleeps ``wait_interval`` plus up to ``wait_jitter``."""
        while True:
            self._sleep_before_asking_again()
            yield

    def _create_task_process(self, task: Task) -> TaskProcess:
        """The ``TaskProcess`` a run of ``task`` gets (a view: the runners build theirs the same way)."""
        timeout = task.worker_timeout if task.worker_timeout is not None else self._config.timeout
        in_slot = self._config.force_multiprocessing or self.worker_processes > 1
        reporter = TaskStatusReporter(self._rpc, task.task_id, self._id)
        options = dataclasses.replace(self._run_options[0], in_child_process=in_slot)
        return make_task_process(task, reporter, options, timeout, OutcomeBox())

    def _start_task(self, task_id: str) -> None:
        """Have the runner run the granted task, within its ``worker_timeout`` (or ``[worker] timeout``)."""
        task = self._ledger.tasks[task_id]
        timeout = task.worker_timeout if task.worker_timeout is not None else self._config.timeout
        self._running_tasks[task_id] = task
        cancelled = self._source.before_start(task_id, timeout or None)
        if cancelled is not None:  # while its grant waited: it fails without running
            self._handle_outcome(TaskOutcome(task_id, FAILED, cancelled))
            return
        if self._spans is None:
            self._runner.start(task, timeout or None)
        else:
            self._runner.start(task, timeout or None, self._spans.started(task))
        self._source.after_start()
        self._show_progress()

    def _collect_outcomes(self, block: bool) -> None:
        """Handle finished tasks; with ``block``, wait (at most ``wait_interval``) for one to finish."""
        if block:
            self._runner.wait(self._stop.remaining(max(self._config.wait_interval, 0.0)))
        self._note_new_owners(self._source.release_handed_over())
        for outcome in self._runner.collect():
            self._handle_outcome(outcome)
        if block and self._running_tasks and self._stop.is_due():
            self._kill_running_tasks()

    def _handle_outcome(self, outcome: TaskOutcome) -> None:
        """Report one finished run to the scheduler, adding dynamic dependencies and rescheduling."""
        if self._spans is not None:
            self._spans.ended(outcome)
        task = self._ledger.tasks.get(outcome.task_id)
        if self._note_new_owners(self._source.ended(outcome)) or task is None:
            return
        if self._running_tasks.pop(outcome.task_id, None) is None:
            return  # not a task we are running (a stale report)
        self._messages.close(outcome.task_id)
        new_dep_ids = self._add_dynamic_dependencies(task, outcome) if outcome.new_deps else []
        if outcome.status == FAILED and not (is_external(task) and self._config.retry_external_tasks):
            self._emails.send(
                f"Luigi: {task} FAILED. Host: {self.host}",
                "A task failed when running. Most likely run() raised an exception.",
                task,
                str(outcome.expl),
            )
        if outcome.status == DONE and self._completion_cache is not None:
            self._completion_cache[task.task_id] = True
        self._add_task(
            worker=self._id,
            task_id=task.task_id,
            status=outcome.status,
            runnable=None,  # as Luigi: the summary files a task still pending after its run as "ext" too
            expl=_EXPL_ENCODER.encode(outcome.expl),
            resources=task.process_resources(),
            params=task.to_str_params(),
            family=task.task_family,
            module=task.task_module,
            new_deps=new_dep_ids,
            assistant=self._assistant,
            retry_policy_dict=retry_policy_dict(task),
            **({"task_log": outcome.log_tail} if outcome.log_tail is not None else {}),
        )
        if outcome.missing:
            self._reschedule_if_allowed(task, outcome.missing)
        self.run_succeeded &= outcome.status == DONE or bool(new_dep_ids)
        self._show_progress(force=not self._running_tasks)

    def _stop_handed_over_run(self, task_id: str) -> bool:
        """Kill a run handed to another worker (its outcome is not reported: the loop forgets the run);
        False if it cannot be killed (it ran in this process)."""
        return self._runner.cancel_run(task_id, HANDED_OVER)

    def _forget_run(self, task_id: str) -> None:
        """The run of ``task_id`` was handed to another worker: it is not ours to report any more."""
        self._running_tasks.pop(task_id, None)
        self._messages.close(task_id)

    def _note_new_owners(self, owners: dict[str, str | None]) -> bool:
        """File tasks handed over to a known worker in the summary as run by it; True if any was handed."""
        for task_id, owner in owners.items():
            if owner is not None:
                running = [{"task_id": task_id, "worker": owner}]
                self._get_work_response_history.append({"task_id": None, "running_tasks": running})
        return bool(owners)

    def _add_dynamic_dependencies(self, task: Task, outcome: TaskOutcome) -> list[str]:
        """Build the yielded tasks and walk them into the scheduler; returns their ids.

        A dependency that cannot be built (unknown family, bad parameter) fails the task instead.
        """
        try:
            new_tasks = [load_task(module, family, params) for module, family, params in outcome.new_deps]
        except _TASK_LOAD_ERRORS as exc:
            outcome.status = FAILED
            outcome.expl = f"Could not build the dynamic dependencies yielded by {task}: {exc}"
            logger.error(outcome.expl)
            return []
        self._graph.walk(new_tasks, set())
        return [dep.task_id for dep in new_tasks]

    def _reschedule_if_allowed(self, task: Task, missing: list[str]) -> None:
        """Re-add a task whose dependencies were incomplete at run time, ``max_reschedules`` times at most."""
        reschedule = True
        for dep_id in missing:
            self.unfulfilled_counts[dep_id] += 1
            if self.unfulfilled_counts[dep_id] > self._config.max_reschedules:
                reschedule = False
        if reschedule:
            self._graph.walk([task], set())


def _runs_elsewhere(timeout: float | None) -> bool:
    """No task runs in the worker's own process (a runner other than the ``RunnerChoice``)."""
    return False


# Luigi's lower bound for ``[worker] wait_interval`` (seconds).
_SHORTEST_WAIT_INTERVAL = 1e-5


def _run_spans(worker_id: str) -> RunSpans | None:
    """The worker's spans when ``[otel] endpoint`` is set; nothing of OpenTelemetry is imported otherwise."""
    from luigi import otel

    if not otel.endpoint():
        return None
    from luigi.worker.tracing import RunSpans

    return RunSpans.configured(worker_id)


def _check_wait_settings(config: worker) -> None:
    """Luigi's checks of the idle loop's settings, raised as AssertionError (not stripped by ``-O``)."""
    if config.wait_interval < _SHORTEST_WAIT_INTERVAL:
        raise AssertionError("[worker] wait_interval must be positive")
    if config.wait_jitter < 0.0:
        raise AssertionError("[worker] wait_jitter must be equal or greater than zero")
