"""Running one task: dependency checks, ``run()`` with dynamic dependencies, events, and the outcome.

``TaskProcess`` has Luigi's constructor and is a ``multiprocessing.Process``; its ``run()`` does the work
in the current process and ends by putting ``(task_id, status, expl, missing, new_deps)`` on its result
queue. Our task runners (``luigi.worker.execution``, ``luigi.worker.slots``) never ``start()`` one: they
build it with ``make_task_process``, which goes through ``luigi.worker.ContextManagedTaskProcess`` as
Luigi's worker does (a test patching that name sees every run), and call ``run()`` in the worker's own
process or inside a task slot. While ``run()`` executes, the task gets the status reporter's callables
(``TaskProcess.forward_reporter_attributes``); the reporter talks to the scheduler directly in-process and
through the worker from a child.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import logging
import multiprocessing
import os
import sys
import time
import traceback
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, overload

from luigi.event import Event
from luigi.scheduler_api import SchedulerAPI
from luigi.task import DynamicRequirements, flatten
from luigi.task_status import DONE, FAILED, PENDING
from luigi.worker import process_tree
from luigi.worker.completion import check_complete

logger = logging.getLogger("luigi-interface")

EXTERNAL_DATA_MISSING = "Task is an external data dependency and data does not exist (yet?)."


class TaskException(Exception):
    """A task broke the worker's contract (e.g. requires() returned something that is not a task)."""


def is_external(task: Any) -> bool:
    """External tasks have ``run = None`` or ``NotImplemented``: the worker checks them, never runs them."""
    run = task.run
    return run is None or run is NotImplemented


def worker_time() -> Any:
    """``time`` as ``luigi.worker.time``: a test patching that name moves the clock of every run."""
    return getattr(sys.modules.get("luigi.worker"), "time", time)


@dataclass
class TaskOutcome:
    """What running a task produced: its status, the expl for the scheduler, and what it still needs.

    ``missing`` lists ids of dependencies that were incomplete at run time; ``new_deps`` lists dynamic
    dependencies as ``(module, family, serialized params)`` so they cross a process boundary as plain data.
    """

    task_id: str
    status: str = FAILED
    expl: Any = ""
    missing: list[str] = field(default_factory=list)
    new_deps: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    log_tail: dict[str, Any] | None = None  # the run's last log chunk, for its final add_task (ours)

    def as_tuple(self) -> tuple[str, str, Any, list[str], list[tuple[str, str, dict[str, str]]]]:
        """Luigi's result tuple ``(task_id, status, expl, missing, new_deps)``."""
        return (self.task_id, self.status, self.expl, self.missing, self.new_deps)

    @classmethod
    def from_tuple(cls, result: Any) -> TaskOutcome:
        """The outcome a ``TaskProcess.run()`` put on its result queue (a 5-tuple, as Luigi's)."""
        task_id, status, expl, missing, new_deps = result  # ours put lists: they are taken as they are
        return cls(task_id, status, expl, missing, new_deps)

    def to_message(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "status": self.status,
            "expl": self.expl,
            "missing": self.missing,
            "new_deps": [list(dep) for dep in self.new_deps],
            "log_tail": self.log_tail,
        }

    @classmethod
    def from_message(cls, message: dict[str, Any]) -> TaskOutcome:
        return cls(
            task_id=str(message["task_id"]),
            status=str(message["status"]),
            expl=message.get("expl", ""),
            missing=[str(task_id) for task_id in message.get("missing", [])],
            new_deps=[
                (module, family, dict(params)) for module, family, params in message.get("new_deps", [])
            ],
            log_tail=message.get("log_tail"),
        )


class MessageResponder(Protocol):
    """Where a task's answer to a scheduler message goes: the scheduler, or the pipe to the worker."""

    def add_scheduler_message_response(self, task_id: str, message_id: str, response: Any) -> None: ...


class SchedulerMessage:
    """A message the scheduler relayed to a running task; ``respond()`` sends the answer back."""

    def __init__(
        self, scheduler: MessageResponder, task_id: str, message_id: str, content: Any, **payload: Any
    ) -> None:
        self._scheduler = scheduler
        self._task_id = task_id
        self._message_id = message_id
        self.content = content
        self.payload = payload

    @property
    def task_id(self) -> str:
        return self._task_id

    @property
    def message_id(self) -> str:
        return self._message_id

    def respond(self, response: Any) -> None:
        self._scheduler.add_scheduler_message_response(self._task_id, self._message_id, response)

    def __str__(self) -> str:
        return str(self.content)

    def __eq__(self, other: object) -> bool:
        return bool(self.content == other)

    __hash__ = None  # type: ignore[assignment]


class TaskStatusReporter:
    """Sends a running task's progress reports to the scheduler (used in the worker's own process)."""

    def __init__(
        self, scheduler: SchedulerAPI, task_id: str, worker_id: str, scheduler_messages: Any = None
    ) -> None:
        self._scheduler = scheduler
        self._task_id = task_id
        self._worker_id = worker_id
        self.scheduler_messages = scheduler_messages

    def update_tracking_url(self, tracking_url: str) -> None:
        self._scheduler.add_task(
            task_id=self._task_id, worker=self._worker_id, status="RUNNING", tracking_url=tracking_url
        )

    def update_status_message(self, message: str) -> None:
        self._scheduler.set_task_status_message(self._task_id, message)

    def update_progress_percentage(self, percentage: float) -> None:
        self._scheduler.set_task_progress_percentage(self._task_id, percentage)

    def decrease_running_resources(self, decrease_resources: dict[str, int]) -> None:
        self._scheduler.decrease_running_task_resources(self._task_id, decrease_resources)

    def report_task_statistics(self, statistics: Any) -> None:
        self._scheduler.report_task_statistics(self._task_id, statistics)

    def add_scheduler_message_response(self, task_id: str, message_id: str, response: Any) -> None:
        self._scheduler.add_scheduler_message_response(task_id, message_id, response)

    def append_task_log(self, run: str, offset: int, chunk: str, ended: bool) -> None:
        self._scheduler.append_task_log(self._task_id, self._worker_id, run, offset, chunk, ended)


# The reporter methods a child process may ask its parent to call (nothing else is honoured).
FORWARDABLE_REPORTS = frozenset(
    {
        "update_tracking_url",
        "update_status_message",
        "update_progress_percentage",
        "decrease_running_resources",
        "report_task_statistics",
        "add_scheduler_message_response",
        "append_task_log",
    }
)


@dataclass
class TaskRunOptions:
    """The worker settings that shape one task run."""

    worker_id: str
    check_unfulfilled_deps: bool = True
    check_complete_on_run: bool = False
    completion_cache: dict[str, bool] | None = None
    task_process_context: str | None = None
    in_child_process: bool = False
    task_log_max_bytes: int = 0  # of each run's output to capture and ship to the scheduler (0: none)
    task_log_redact: tuple[str, ...] = ()  # patterns masked in that output ([task_log], log_redaction)
    trace_parent: str | None = None  # W3C traceparent of this run's span ([otel]; None: not traced)


def run_options(options: TaskRunOptions, trace_parent: str | None) -> TaskRunOptions:
    """A runner's ``options`` for one run: the same object unless the run is traced ([otel])."""
    return options if trace_parent is None else dataclasses.replace(options, trace_parent=trace_parent)


class OutcomeBox:
    """The result queue of a run in the worker's own process: keeps what ``TaskProcess.run()`` puts."""

    def __init__(self) -> None:
        self._result: Any = None

    def put(self, result: Any, block: bool = True, timeout: float | None = None) -> None:
        self._result = result

    def take(self, task_id: str) -> TaskOutcome:
        """The outcome put for ``task_id``; FAILED when the run put nothing usable (a replaced ``run()``)."""
        try:
            return TaskOutcome.from_tuple(self._result)
        except (TypeError, ValueError):
            return TaskOutcome(task_id, FAILED, f"The run of {task_id} put no result on its result queue")


class TaskProcess(multiprocessing.Process):
    """One task's run, with Luigi's constructor; ``run()`` does the work here and puts the result tuple.

    ``status_reporter`` is what the task's injected callables call (``forward_reporter_attributes`` maps
    reporter attributes to task attributes); a ``[worker] task_process_context`` class is instantiated with
    this object around the run (``ContextManagedTaskProcess``). ``run()`` also returns the ``TaskOutcome``.
    """

    # (hook users patch) reporter attribute -> task attribute, set on the task only while run() executes.
    forward_reporter_attributes: ClassVar[dict[str, str]] = {
        "update_tracking_url": "set_tracking_url",
        "update_status_message": "set_status_message",
        "update_progress_percentage": "set_progress_percentage",
        "decrease_running_resources": "decrease_running_resources",
        "scheduler_messages": "scheduler_messages",
    }
    context: str | None = None  # dotted path of the context manager class (ContextManagedTaskProcess)
    task_log_max_bytes = 0  # of the run's output a task slot captures (ours; make_task_process sets it)
    task_log_redact: tuple[str, ...] = ()  # the patterns masked in it (ours, set alike)
    trace_parent: str | None = None  # the run's span, as a W3C traceparent (ours; make_task_process sets it)

    @overload
    def __init__(
        self,
        task: Any,
        worker_id: str,
        result_queue: Any,
        status_reporter: Any,
        use_multiprocessing: bool = False,
        worker_timeout: float | None = 0,
        check_unfulfilled_deps: bool = True,
        check_complete_on_run: bool = False,
        task_completion_cache: dict[str, bool] | None = None,
    ) -> None: ...

    @overload
    def __init__(
        self, task: Any, worker_id: Any, result_queue: TaskRunOptions, *, timeout: float | None = None
    ) -> None: ...

    def __init__(
        self,
        task: Any,
        worker_id: Any,
        result_queue: Any,
        status_reporter: Any = None,
        use_multiprocessing: bool = False,
        worker_timeout: float | None = 0,
        check_unfulfilled_deps: bool = True,
        check_complete_on_run: bool = False,
        task_completion_cache: dict[str, bool] | None = None,
        timeout: float | None = None,
    ) -> None:
        # multiprocessing.Process.__init__ is left to the first use of its state (see __getattr__): our
        # runners never start() a TaskProcess, and that call would be a tenth of a short task's cost.
        self.task = task
        if isinstance(result_queue, TaskRunOptions):
            # (task, status_reporter, options, timeout=): the shape luigi.worker.dask_runner still calls
            options = result_queue
            self.status_reporter, self.result_queue, self.context = (
                worker_id,
                None,
                options.task_process_context,
            )
            worker_id, use_multiprocessing, worker_timeout = (
                options.worker_id,
                options.in_child_process,
                timeout,
            )
            check_unfulfilled_deps = options.check_unfulfilled_deps
            check_complete_on_run = options.check_complete_on_run
            task_completion_cache = options.completion_cache
            self.task_log_max_bytes = options.task_log_max_bytes
            self.task_log_redact = options.task_log_redact
            self.trace_parent = options.trace_parent
        else:
            self.status_reporter = status_reporter
            self.result_queue = result_queue
            if task.worker_timeout is not None:
                worker_timeout = task.worker_timeout
        self.worker_id = worker_id
        self.worker_timeout = worker_timeout or 0
        self.timeout_time = worker_time().time() + self.worker_timeout if self.worker_timeout else None
        self.use_multiprocessing = use_multiprocessing or self.timeout_time is not None
        self.check_unfulfilled_deps = check_unfulfilled_deps
        self.check_complete_on_run = check_complete_on_run
        self.task_completion_cache = task_completion_cache

    if not TYPE_CHECKING:  # mypy keeps checking every other attribute of a TaskProcess

        def __getattr__(self, name: str) -> Any:
            """Make ``multiprocessing.Process``'s own state on its first use (``start()``, ``name``...)."""
            if name.startswith("__") or "_popen" in self.__dict__:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            multiprocessing.Process.__init__(self)
            return getattr(self, name)

    @property
    def timeout(self) -> float | None:
        """Seconds the run may take (None: no limit)."""
        return self.worker_timeout or None

    @property
    def options(self) -> TaskRunOptions:
        """This run's settings, as a task slot is told them."""
        return TaskRunOptions(
            self.worker_id,
            self.check_unfulfilled_deps,
            self.check_complete_on_run,
            self.task_completion_cache,
            self.context,
            self.use_multiprocessing,
            self.task_log_max_bytes,
            self.task_log_redact,
            self.trace_parent,
        )

    def run(self) -> TaskOutcome:  # type: ignore[override]  # Process.run returns None; ours the outcome too
        """Run the task here (inside the context manager, if any); put the result on ``result_queue``."""
        if self.trace_parent is None:
            return self._run_and_put()
        from luigi.otel import run_in_trace

        with run_in_trace(self.trace_parent):
            return self._run_and_put()

    def _run_and_put(self) -> TaskOutcome:
        outcome = TaskOutcome(self.task.task_id)
        try:
            if self.context:
                with self._process_context():
                    self._run_into(outcome)
            else:
                self._run_into(outcome)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # whatever the task raised, SystemExit included, is a task failure
            outcome.status = FAILED
            outcome.new_deps = []
            outcome.expl = self._explain_failure(exc)
        if self.result_queue is not None:
            self.result_queue.put(outcome.as_tuple())
        return outcome

    def terminate(self) -> None:
        """Stop a started run with SIGTERM after killing every process its task started (as Luigi's does).

        Otherwise a task's programs would outlive it, re-parented to init (a timed-out task's, say).
        """
        if self.pid is not None:
            process_tree.kill_descendants(self.pid)
        super().terminate()

    @contextlib.contextmanager
    def _process_context(self) -> Iterator[None]:
        module_name, _, class_name = str(self.context).rpartition(".")
        context_cls = getattr(importlib.import_module(module_name), class_name)
        with context_cls(self):
            yield

    def _run_into(self, outcome: TaskOutcome) -> None:
        task = self.task
        announce = logger.isEnabledFor(logging.INFO)  # os.getpid() is a system call: only for a shown line
        if announce:
            logger.info("[pid %s] Worker %s running   %s", os.getpid(), self.worker_id, task)
        self._verify_dependencies(outcome)
        task.trigger_event(Event.START, task)
        clock = worker_time()
        started = clock.time()
        if is_external(task):
            self._check_external(outcome)
        else:
            forwarded = self._forward_reporter_attributes()
            try:
                outcome.new_deps = self._run_collecting_new_deps()
            finally:
                attributes = task.__dict__
                for task_attribute in forwarded.values():
                    attributes[task_attribute] = None
            outcome.status = PENDING if outcome.new_deps else self._status_after_run()
        if outcome.new_deps:
            logger.info("[pid %s] Worker %s new requirements      %s", os.getpid(), self.worker_id, task)
        elif outcome.status == DONE:
            task.trigger_event(Event.PROCESSING_TIME, task, clock.time() - started)
            outcome.expl = task.on_success()
            if announce:
                logger.info("[pid %s] Worker %s done      %s", os.getpid(), self.worker_id, task)
            task.trigger_event(Event.SUCCESS, task)

    def _forward_reporter_attributes(self) -> dict[str, str]:
        """Give the task the reporter's callables (and message queue); returns the table it followed.

        Read from ``forward_reporter_attributes`` at each run, so a test patching it changes what is set.
        """
        reporter, attributes = self.status_reporter, self.task.__dict__  # plain attributes, set for each task
        forwarded = self.forward_reporter_attributes
        for reporter_attribute, task_attribute in forwarded.items():
            attributes[task_attribute] = getattr(reporter, reporter_attribute)
        return forwarded

    def _is_complete(self, task: Any) -> bool:
        return check_complete(task, self.task_completion_cache)

    def _verify_dependencies(self, outcome: TaskOutcome) -> None:
        """Raise if a dependency is incomplete at run time, listing it (and its missing outputs)."""
        if not self.check_unfulfilled_deps or is_external(self.task):
            return
        described = []
        for dep in self.task.deps():
            if self._is_complete(dep):
                continue
            outcome.missing.append(dep.task_id)
            absent = [str(target) for target in flatten(dep.output()) if not target.exists()]
            described.append(f"{dep.task_id} ({', '.join(absent)})" if absent else dep.task_id)
        if described:
            noun = "dependency" if len(described) == 1 else "dependencies"
            raise RuntimeError(f"Unfulfilled {noun} at run time: {', '.join(described)}")

    def _check_external(self, outcome: TaskOutcome) -> None:
        if self._is_complete(self.task):
            outcome.status = DONE
        else:
            outcome.status = FAILED
            outcome.expl = EXTERNAL_DATA_MISSING

    def _status_after_run(self) -> str:
        if not self.check_complete_on_run:
            if self.task_completion_cache is not None:
                self.task_completion_cache[self.task.task_id] = True
            return DONE
        if self._is_complete(self.task):
            return DONE
        raise TaskException("Task finished running, but complete() is still returning false.")

    def _run_collecting_new_deps(self) -> list[tuple[str, str, dict[str, str]]]:
        """Run the task; for a generator, feed it the outputs of complete yielded requirements.

        Returns the first yielded requirements that are not complete yet (the task runs again later).
        """
        result = self.task.run()
        if not isinstance(result, types.GeneratorType):
            return []
        to_send = None
        while True:
            try:
                yielded = next(result) if to_send is None else result.send(to_send)
            except StopIteration:
                return []
            requirements = (
                yielded if isinstance(yielded, DynamicRequirements) else DynamicRequirements(yielded)
            )
            if not requirements.complete(self._is_complete):
                return [
                    (dep.task_module, dep.task_family, dep.to_str_params())
                    for dep in requirements.flat_requirements
                ]
            to_send = requirements.paths

    def _explain_failure(self, exc: BaseException) -> Any:
        """Log the failure, fire FAILURE, and return the task's ``on_failure`` explanation."""
        task = self.task
        logger.exception("[pid %s] Worker %s failed    %s", os.getpid(), self.worker_id, task)
        task.trigger_event(Event.FAILURE, task, exc)
        try:
            return task.on_failure(exc)
        except KeyboardInterrupt:
            raise
        except BaseException:  # a broken on_failure must still yield an explanation for the scheduler
            logger.exception("on_failure of %s raised", task)
            return f"Runtime error:\n{traceback.format_exc()}"


class ContextManagedTaskProcess(TaskProcess):
    """A ``TaskProcess`` whose run happens inside ``with <context class>(task_process):``.

    ``context`` is the dotted path of ``[worker] task_process_context`` (None: no context manager).
    """

    def __init__(self, context: str | None, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.context = context


def make_task_process(
    task: Any, status_reporter: Any, options: TaskRunOptions, timeout: float | None, result_queue: Any
) -> TaskProcess:
    """The ``TaskProcess`` for one run, built by ``luigi.worker.ContextManagedTaskProcess`` looked up now.

    As Luigi's worker builds it for every run, so a test that patches that name sees (and shapes) each run.
    """
    process_cls = getattr(
        sys.modules.get("luigi.worker"), "ContextManagedTaskProcess", ContextManagedTaskProcess
    )
    process: TaskProcess = process_cls(
        options.task_process_context,
        task,
        options.worker_id,
        result_queue,
        status_reporter,
        use_multiprocessing=options.in_child_process,
        worker_timeout=timeout or 0,
        check_unfulfilled_deps=options.check_unfulfilled_deps,
        check_complete_on_run=options.check_complete_on_run,
        task_completion_cache=options.completion_cache,
    )
    process.task_log_max_bytes = options.task_log_max_bytes
    process.task_log_redact = options.task_log_redact
    process.trace_parent = options.trace_parent
    return process
