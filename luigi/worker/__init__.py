"""The worker: walks the task graph into the scheduler (``add``), then runs what it is granted (``run``).

``Worker.add`` checks ``complete()`` once per task and tells the scheduler each task's status and
dependencies. ``Worker.run`` is a loop of named steps: ask for work, start the granted task (in this process,
or in a child process, a task slot, when several run at once or a timeout applies), collect outcomes and
report them.
"""

from __future__ import annotations

import collections
import json
import logging
import queue
import random
import signal
import socket
import sys
import time  # looked up as ``luigi.worker.time`` so tests can patch the worker's clock and sleep
import traceback
from collections.abc import Callable, Iterable
from typing import Any

from luigi import notifications
from luigi.event import Event
from luigi.parameter import ParameterException
from luigi.rpc import RemoteScheduler
from luigi.rpc.retry import checked_ride_out
from luigi.task import Task
from luigi.task_register import TaskClassException, load_task
from luigi.task_status import DISABLED, DONE, FAILED, PENDING, RUNNING, UNKNOWN
from luigi.worker import identity
from luigi.worker.child_pool import ChildPool
from luigi.worker.completion import CompletionChecker, CompletionCheckError, check_complete
from luigi.worker.config import worker
from luigi.worker.keep_alive import KeepAliveThread, serialized, should_stay_alive
from luigi.worker.lookahead import AheadAsker, Lookahead
from luigi.worker.messages import MessageRouter
from luigi.worker.task_process import (
    SchedulerMessage,
    TaskException,
    TaskOutcome,
    TaskProcess,
    TaskRunOptions,
    TaskStatusReporter,
    is_external,
)
from luigi.worker.work_grant import WORKER_STATE_ACTIVE, WORKER_STATE_DISABLED, WorkGrant

__all__ = [
    "WORKER_STATE_ACTIVE",
    "WORKER_STATE_DISABLED",
    "CompletionCheckError",
    "KeepAliveThread",
    "SchedulerMessage",
    "TaskException",
    "TaskProcess",
    "TaskStatusReporter",
    "Worker",
    "WorkGrant",
    "check_complete",
    "time",
    "worker",
]

logger = logging.getLogger("luigi-interface")

# json.dumps(expl, default=str) without building an encoder for every outcome.
_EXPL_ENCODER = json.JSONEncoder(default=str)

# What building a task from its family and serialized parameters may raise (unknown family, bad value).
_TASK_LOAD_ERRORS = (TaskClassException, ParameterException, ImportError, ValueError, TypeError)


def _retry_policy_dict(task: Task) -> dict[str, Any]:
    return {
        "retry_count": task.retry_count,
        "disable_hard_timeout": task.disable_hard_timeout,
        "disable_window": task.disable_window,
    }


class Worker:
    """Schedules tasks with a scheduler and runs the ones it grants; use as a context manager.

    Keyword arguments override ``[worker]`` options (e.g. ``Worker(keep_alive=True, timeout=60)``).
    """

    def __init__(
        self,
        scheduler: Any = None,
        worker_id: str | None = None,
        worker_processes: int = 1,
        assistant: bool = False,
        **kwargs: Any,
    ) -> None:
        if scheduler is None:
            from luigi.scheduler import Scheduler

            scheduler = Scheduler()
        self._config = worker(**kwargs)
        self._scheduler = scheduler
        self._rpc = serialized(scheduler)
        ride_out = checked_ride_out(self._config.scheduler_unreachable_timeout)
        if isinstance(scheduler, RemoteScheduler):  # the client rides out a scheduler restart itself
            scheduler.unreachable_timeout = ride_out
        self.worker_processes = int(worker_processes)
        self._assistant = assistant
        self.host = socket.gethostname()
        self._worker_info = identity.worker_info(self.worker_processes, self.host)
        self._id: str = worker_id or self._config.id or identity.worker_id(self._worker_info)
        self._first_task: str | None = None
        self.add_succeeded = True
        self.run_succeeded = True
        self.unfulfilled_counts: collections.Counter[str] = collections.Counter()
        # Read by luigi.execution_summary:
        self._scheduled_tasks: dict[str, Task] = {}
        self._add_task_history: list[tuple[Task, str, bool]] = []
        self._get_work_response_history: list[dict[str, Any]] = []

        self._batch_running_tasks: dict[str, list[Task]] = {}
        self._batch_families_sent: set[str] = set()
        self._running_tasks: dict[str, TaskProcess] = {}
        self._messages = MessageRouter(self._deliver_message)
        self._children = ChildPool()
        self._outcomes: collections.deque[TaskOutcome] = collections.deque()
        self._walked: set[str] = set()  # task ids add() has reported since the last run()
        self._completion_cache: dict[str, bool] | None = {} if self._config.cache_task_completion else None
        self._stop_requesting_work = False
        lookahead = Lookahead(self._config.lookahead and hasattr(scheduler, "ask_ahead"))
        self._ahead = AheadAsker(self._rpc, lookahead, lambda: self._rpc.flush())
        self._idle_since: float | None = None
        self._keep_alive_thread: KeepAliveThread | None = None
        self._previous_sigusr1: Any = None
        self._install_shutdown_handler()

    # -- lifecycle ----------------------------------------------------------------------------------

    def __enter__(self) -> Worker:
        """Start pinging the scheduler so it knows this worker (and its running tasks) are alive."""
        self._keep_alive_thread = KeepAliveThread(
            self._rpc, self._id, self._config.ping_interval, self._handle_rpc_message
        )
        self._keep_alive_thread.start()
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, tb: Any) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop pinging, kill task processes still running, and give SIGUSR1 back to its old handler."""
        if self._keep_alive_thread is not None:
            self._keep_alive_thread.stop()
            self._keep_alive_thread.join(timeout=10)  # a ping may hang on an unreachable scheduler
            self._keep_alive_thread = None
        self._children.shut_down()
        self._restore_shutdown_handler()

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

    def handle_interrupt(self, signum: int, frame: Any) -> None:
        """SIGUSR1: finish the running tasks but take no new work (``luigi --take-lock`` sends it)."""
        logger.info("Worker %s received signal %s: it will stop asking for new work", self._id, signum)
        self._start_phasing_out()

    def _start_phasing_out(self) -> None:
        self._stop_requesting_work = True

    # -- messages from the scheduler ----------------------------------------------------------------

    def _handle_rpc_message(self, message: dict[str, Any]) -> None:
        """Call the handler a ping reply names; only the two handlers below may be invoked remotely."""
        name = message.get("name") if isinstance(message, dict) else None
        kwargs = message.get("kwargs") if isinstance(message, dict) else None
        handlers: dict[str, Callable[..., None]] = {
            "set_worker_processes": self.set_worker_processes,
            "dispatch_scheduler_message": self.dispatch_scheduler_message,
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

    def _deliver_message(self, message: dict[str, Any]) -> None:
        """Give a message to its running task: through its slot's pipe, or its in-process queue."""
        task_id, message_id = message["task_id"], message["message_id"]
        process = self._running_tasks.get(task_id)
        if process is None or not process.task.accepts_messages:
            logger.warning(
                "Dropping scheduler message %s: task %s is not running here or refuses messages",
                message_id,
                task_id,
            )
            return
        slot = self._children.slot_running(task_id)
        if slot is not None:
            if not slot.deliver_message(message):
                logger.warning("Could not pass scheduler message %s to task %s", message_id, task_id)
        elif process.status_reporter.scheduler_messages is not None:
            process.status_reporter.scheduler_messages.put(SchedulerMessage(self._rpc, **message))
        else:
            logger.warning("Dropping scheduler message %s: task %s has just finished", message_id, task_id)

    # -- add: telling the scheduler about the graph ---------------------------------------------------

    def add(self, task: Task, multiprocess: bool = False, processes: int = 0) -> bool:
        """Report ``task`` and everything it needs to the scheduler; False if some scheduling failed.

        ``multiprocess`` checks ``complete()`` of many tasks at once, in ``processes`` threads.
        """
        if not isinstance(task, Task):
            raise TaskException(f"Worker.add() needs a Task instance, got {task!r} ({type(task).__name__})")
        if self._first_task is None:
            self._first_task = task.task_id
        self.add_succeeded = True
        try:
            self._walk([task], self._walked, parallel=multiprocess, processes=processes)
        except (KeyboardInterrupt, TaskException):
            raise
        except Exception as exc:  # a bug or a broken scheduler: say which task it hit, then re-raise
            self.add_succeeded = False
            formatted = traceback.format_exc()
            logger.error("Uncaught exception in luigi while scheduling %s", task, exc_info=True)
            task.trigger_event(Event.BROKEN_TASK, task, exc)
            self._send_email(
                f"Luigi: Framework error while scheduling {task}. Host: {self.host}",
                "Luigi framework error",
                task,
                formatted,
            )
            raise
        return self.add_succeeded

    def _walk(
        self, roots: Iterable[Task], seen: set[str], parallel: bool = False, processes: int = 0
    ) -> None:
        """Breadth-first over ``requires()``, reporting each task not in ``seen`` once."""
        checker = CompletionChecker(self._completion_cache, parallel=parallel, processes=processes)
        try:
            for root in roots:
                if root.task_id not in seen:
                    seen.add(root.task_id)
                    checker.submit(root)
            while checker.outstanding:
                task, answer = checker.next_result()
                for dep in self._schedule_one(task, answer):
                    if dep.task_id not in seen:
                        seen.add(dep.task_id)
                        checker.submit(dep)
        finally:
            checker.close()

    def _schedule_one(self, task: Task, answer: bool | CompletionCheckError) -> list[Task]:
        """Report one task's status and dependencies to the scheduler; returns the dependencies to walk."""
        status, runnable, deps = self._judge(task, answer)
        if task.disabled:
            status = DISABLED
        for dep in deps or ():
            task.trigger_event(Event.DEPENDENCY_DISCOVERED, task, dep)
        self._scheduled_tasks[task.task_id] = task
        self._send_add_task(
            task.task_id,
            status,
            runnable,
            deps=[dep.task_id for dep in deps] if deps is not None else None,
            priority=task.priority,
            resources=task.process_resources(),
            params=task.to_str_params(),
            family=task.task_family,
            module=task.task_module,
            batchable=task.batchable,
            retry_policy_dict=_retry_policy_dict(task),
            accepts_messages=task.accepts_messages,
            assistant=self._assistant,
        )
        return deps or []

    def _judge(self, task: Task, answer: bool | CompletionCheckError) -> tuple[str, bool, list[Task] | None]:
        """(status, runnable, dependencies) by the table of COMPAT f.3, firing the matching events."""
        limit = self._config.task_limit
        if limit is not None and len(self._scheduled_tasks) >= limit:
            logger.warning(
                "Will not run %s or any dependencies due to exceeded task-limit of %d", task, limit
            )
            return UNKNOWN, False, None
        if isinstance(answer, CompletionCheckError):
            self._report_scheduling_error(task, "complete()", answer.trace)
            task.trigger_event(Event.DEPENDENCY_MISSING, task)
            return UNKNOWN, False, None
        if answer:
            task.trigger_event(Event.DEPENDENCY_PRESENT, task)
            return DONE, False, None
        if is_external(task):
            task.trigger_event(Event.DEPENDENCY_MISSING, task)
            logger.warning(
                "Data for %s does not exist (yet?). The task is an external data dependency, so it cannot be "
                "run from this luigi process.",
                task,
            )
            return PENDING, self._config.retry_external_tasks, None
        deps = self._dependencies_of(task)
        return (PENDING, True, deps) if deps is not None else (UNKNOWN, False, None)

    def _dependencies_of(self, task: Task) -> list[Task] | None:
        """``task.deps()``, or None after reporting why it failed; a non-task dependency is an error."""
        try:
            deps = task.deps()
        except Exception as exc:  # user code: the task cannot be scheduled, and the user is told why
            self._report_scheduling_error(task, "deps()", traceback.format_exc())
            task.trigger_event(Event.BROKEN_TASK, task, exc)
            return None
        for dep in deps:
            if not isinstance(dep, Task):
                raise TaskException(
                    f"requires() of {task} must return Task objects, but it returned {dep!r} "
                    f"({type(dep).__name__})"
                )
        if task.batchable and task.task_family not in self._batch_families_sent:
            self._rpc.add_task_batcher(
                worker=self._id,
                task_family=task.task_family,
                batched_args=task.batch_param_names(),
                max_batch_size=task.max_batch_size,
            )
            self._batch_families_sent.add(task.task_family)
        return deps

    def _report_scheduling_error(self, task: Task, method: str, formatted: str) -> None:
        self.add_succeeded = False
        headline = f"Will not run {task} or any dependencies due to error in {method} method"
        logger.warning("%s:\n%s", headline, formatted)
        self._send_email(f"Luigi: {task} failed scheduling. Host: {self.host}", headline, task, formatted)

    def _send_add_task(self, task_id: str, status: str, runnable: bool, **fields: Any) -> None:
        """``add_task`` to the scheduler, recording it in ``_add_task_history`` for the summary."""
        task = self._scheduled_tasks.get(task_id)
        members = self._batch_running_tasks.pop(task_id, None)
        if members is not None:
            self._add_task_history.extend((member, status, True) for member in members)
        elif task is not None:
            self._add_task_history.append((task, status, runnable))
        if task is not None:
            fields["owners"] = task._owner_list()
            if fields.get("params") is not None:
                fields["param_visibilities"] = task._get_param_visibilities()
        self._rpc.add_task(
            worker=self._id,
            task_id=task_id,
            status=status,
            runnable=runnable,
            **fields,
        )
        logger.info("Informed scheduler that task   %s   has status   %s", task_id, status)

    def _send_email(self, subject: str, headline: str, task: Task, formatted_exception: str | None) -> None:
        """A failure e-mail through ``luigi.notifications`` (looked up per call so tests can patch it)."""
        if not self._config.send_failure_email:
            return
        command = " ".join(sys.argv)
        message = notifications.format_task_error(headline, task, command, formatted_exception)
        notifications.send_error_email(subject, message, task._owner_list())

    # -- run: the loop ------------------------------------------------------------------------------

    def run(self) -> bool:
        """Run granted tasks until none is left for this worker; True if every one succeeded."""
        logger.info("Running Worker with %d processes", self.worker_processes)
        self.run_succeeded = True
        self._announce_to_scheduler()
        try:
            while True:
                self._collect_while_full()
                grant = self._get_work()
                if grant.worker_state == WORKER_STATE_DISABLED:
                    self._start_phasing_out()
                if grant.task_id is not None:
                    self._idle_since = None
                    self._start_task(grant.task_id)
                elif self._running_tasks:
                    self._collect_outcomes(block=True)
                elif self._stay_alive(grant):
                    self._sleep_before_asking_again()
                else:
                    break
            while self._running_tasks:
                self._collect_outcomes(block=True)
        finally:
            self._walked.clear()
            self._children.shut_down()
        return self.run_succeeded

    def _announce_to_scheduler(self) -> None:
        info = {**self._worker_info, "first_task": self._first_task, "assistant": self._assistant}
        self._rpc.add_worker(self._id, info)

    def _collect_while_full(self) -> None:
        while len(self._running_tasks) >= max(1, self.worker_processes):
            if not self._outcomes:
                logger.debug("%d running tasks, waiting for next task to finish", len(self._running_tasks))
            self._collect_outcomes(block=True)

    def _get_work(self) -> WorkGrant:
        """Ask the scheduler for a task (nothing once stopping, but a task granted ahead is ours to run),
        loading tasks we did not schedule."""
        reply = self._ahead.take()
        if reply is None:
            if self._stop_requesting_work:
                return WorkGrant.nothing(WORKER_STATE_DISABLED)
            reply = self._rpc.get_work(**self._get_work_kwargs())
        grant = WorkGrant.from_reply(reply)
        if grant.batch_id is not None and grant.batch_task_ids:
            self._take_batch(grant)
        elif grant.task_id is not None and grant.task_id not in self._scheduled_tasks:
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
            "current_tasks": [*self._running_tasks, *self._ahead.queued()],
        }

    def _load_foreign_task(self, grant: WorkGrant) -> None:
        """A task scheduled by another worker (we are an assistant): build it from its family and params."""
        logger.info("Did not schedule %s, will load it dynamically", grant.task_id)
        try:
            self._scheduled_tasks[str(grant.task_id)] = load_task(
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
        members = [self._scheduled_tasks[i] for i in grant.batch_task_ids if i in self._scheduled_tasks]
        self._scheduled_tasks[task.task_id] = task
        self._batch_running_tasks[task.task_id] = members
        self._rpc.add_task(
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
        """Fail tasks we were granted but cannot build (called while handling the error)."""
        message = f"Cannot find task(s) sent by scheduler: {', '.join(task_ids)}"
        logger.exception(message)
        self.run_succeeded = False
        expl = notifications.wrap_traceback(traceback.format_exc())
        for task_id in task_ids:
            self._send_add_task(task_id, FAILED, False, expl=json.dumps(expl))
        if self._config.send_failure_email:
            notifications.send_error_email(f"Luigi: {message}", expl)

    def _stay_alive(self, grant: WorkGrant) -> bool:
        """With ``keep_alive``, whether to wait for more work rather than exit."""
        if self._idle_since is None:
            self._idle_since = time.time()
        if self._stop_requesting_work:
            return False
        return should_stay_alive(self._config, grant, self._assistant, time.time() - self._idle_since)

    def _sleep_before_asking_again(self) -> None:
        interval = self._config.wait_interval + random.uniform(0, self._config.wait_jitter)
        logger.debug("Sleeping for %f seconds", interval)
        time.sleep(interval)

    # -- running one task ---------------------------------------------------------------------------

    def _start_task(self, task_id: str) -> None:
        """Run the granted task: in this process when it may, else in a task slot (a child process)."""
        task = self._scheduled_tasks[task_id]
        timeout = task.worker_timeout if task.worker_timeout is not None else self._config.timeout
        fork = bool(timeout) or self.worker_processes > 1 or self._config.force_multiprocessing
        in_process_messages: queue.Queue[Any] | None = None
        if task.accepts_messages and not fork:
            in_process_messages = queue.Queue()
        process = TaskProcess(
            task,
            TaskStatusReporter(self._rpc, task_id, self._id, in_process_messages),
            TaskRunOptions(
                worker_id=self._id,
                check_unfulfilled_deps=self._config.check_unfulfilled_deps,
                check_complete_on_run=self._config.check_complete_on_run,
                completion_cache=self._completion_cache,
                task_process_context=self._config.task_process_context,
                in_child_process=fork,
            ),
            timeout=timeout or None,
        )
        self._running_tasks[task_id] = process
        asks_ahead = not fork and not self._stop_requesting_work  # (stopping: run what was granted only)
        self._ahead.before_start(task_id, asks_ahead, self._get_work_kwargs)
        if not fork:
            self._messages.open(task_id)
            started = time.monotonic()
            self._outcomes.append(process.run())
            self._ahead.ran(time.monotonic() - started)
            return
        deadline = time.time() + timeout if timeout else None
        try:
            self._children.start(process, deadline, self._scheduled_tasks, self._completion_cache)
        except OSError as exc:  # e.g. fork() refused for lack of memory: this task fails, the worker goes on
            logger.error("Could not start a process for %s: %s", task, exc)
            self._outcomes.append(
                TaskOutcome(task_id, FAILED, f"Could not start a process for {task}: {exc}")
            )
        else:
            self._messages.open(task_id)

    def _collect_outcomes(self, block: bool) -> None:
        """Handle finished tasks; with ``block``, wait (at most ``wait_interval``) for one to finish."""
        if block and not self._outcomes and self._children:
            self._children.wait(max(self._config.wait_interval, 0.0), time.time())
        self._outcomes.extend(self._children.collect(time.time()))
        while self._outcomes:
            self._handle_outcome(self._outcomes.popleft())

    def _handle_outcome(self, outcome: TaskOutcome) -> None:
        """Report one finished run to the scheduler, adding dynamic dependencies and rescheduling."""
        task = self._scheduled_tasks.get(outcome.task_id)
        if task is None or self._running_tasks.pop(outcome.task_id, None) is None:
            return  # not a task we are running (a stale report)
        self._messages.close(outcome.task_id)
        self._ahead.finished(outcome.task_id, outcome.status == DONE)
        new_dep_ids = self._add_dynamic_dependencies(task, outcome) if outcome.new_deps else []
        if outcome.status == FAILED and not (is_external(task) and self._config.retry_external_tasks):
            self._send_email(
                f"Luigi: {task} FAILED. Host: {self.host}",
                "A task failed when running. Most likely run() raised an exception.",
                task,
                str(outcome.expl),
            )
        if outcome.status == DONE and self._completion_cache is not None:
            self._completion_cache[task.task_id] = True
        self._send_add_task(
            task.task_id,
            outcome.status,
            True,
            expl=_EXPL_ENCODER.encode(outcome.expl),
            resources=task.process_resources(),
            params=task.to_str_params(),
            family=task.task_family,
            module=task.task_module,
            new_deps=new_dep_ids,
            assistant=self._assistant,
            retry_policy_dict=_retry_policy_dict(task),
        )
        if outcome.missing:
            self._reschedule_if_allowed(task, outcome.missing)
        self.run_succeeded &= outcome.status == DONE or bool(new_dep_ids)

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
        self._walk(new_tasks, set())
        return [dep.task_id for dep in new_tasks]

    def _reschedule_if_allowed(self, task: Task, missing: list[str]) -> None:
        """Re-add a task whose dependencies were incomplete at run time, ``max_reschedules`` times at most."""
        reschedule = True
        for dep_id in missing:
            self.unfulfilled_counts[dep_id] += 1
            if self.unfulfilled_counts[dep_id] > self._config.max_reschedules:
                reschedule = False
        if reschedule:
            self._walk([task], set())
