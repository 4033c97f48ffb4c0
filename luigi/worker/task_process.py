"""Running one task: dependency checks, ``run()`` with dynamic dependencies, events, and the outcome.

``TaskProcess.run()`` executes the task in the current process and returns a ``TaskOutcome``; a task
runner (``luigi.worker.execution``) calls it directly (in-process) or has a task slot run it in a child
process (``luigi.worker.slots``). While ``run()`` executes, the task gets ``set_tracking_url`` & co. bound
to a status reporter, which talks to the scheduler directly in-process and through the worker from a child.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import time
import traceback
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from luigi.event import Event
from luigi.scheduler_api import SchedulerAPI
from luigi.task import REPORTER_ATTRIBUTES, DynamicRequirements, flatten
from luigi.task_status import DONE, FAILED, PENDING
from luigi.worker.completion import check_complete

logger = logging.getLogger("luigi-interface")

EXTERNAL_DATA_MISSING = "Task is an external data dependency and data does not exist (yet?)."


class TaskException(Exception):
    """A task broke the worker's contract (e.g. requires() returned something that is not a task)."""


def is_external(task: Any) -> bool:
    """External tasks have ``run = None``: the worker only checks them, never runs them."""
    return task.run is None


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

    def to_message(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "status": self.status,
            "expl": self.expl,
            "missing": self.missing,
            "new_deps": [list(dep) for dep in self.new_deps],
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


class TaskProcess:
    """One task's execution; ``run()`` does the work in the current process and returns the outcome.

    ``status_reporter`` is what the task's injected callables call; a ``task_process_context`` class is
    instantiated with this object (it may use ``status_reporter.report_task_statistics``).
    """

    def __init__(
        self, task: Any, status_reporter: Any, options: TaskRunOptions, timeout: float | None = None
    ) -> None:
        self.task = task
        self.status_reporter = status_reporter
        self.options = options
        self.worker_id = options.worker_id
        self.timeout = timeout
        self.use_multiprocessing = options.in_child_process

    def run(self) -> TaskOutcome:
        """Run the task (inside the configured context manager) and describe how it went."""
        outcome = TaskOutcome(self.task.task_id)
        try:
            if self.options.task_process_context:
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
        return outcome

    @contextlib.contextmanager
    def _process_context(self) -> Iterator[None]:
        path = str(self.options.task_process_context)
        module_name, _, class_name = path.rpartition(".")
        context_cls = getattr(importlib.import_module(module_name), class_name)
        with context_cls(self):
            yield

    def _run_into(self, outcome: TaskOutcome) -> None:
        task = self.task
        logger.info("[pid %s] Worker %s running   %s", os.getpid(), self.worker_id, task)
        self._verify_dependencies(outcome)
        task.trigger_event(Event.START, task)
        started = time.time()
        if is_external(task):
            self._check_external(outcome)
        else:
            saved = self._inject_reporting_callables()
            try:
                outcome.new_deps = self._run_collecting_new_deps()
            finally:
                self._restore_reporting_callables(saved)
            outcome.status = PENDING if outcome.new_deps else self._status_after_run()
        if outcome.new_deps:
            logger.info("[pid %s] Worker %s new requirements      %s", os.getpid(), self.worker_id, task)
        elif outcome.status == DONE:
            task.trigger_event(Event.PROCESSING_TIME, task, time.time() - started)
            outcome.expl = task.on_success()
            logger.info("[pid %s] Worker %s done      %s", os.getpid(), self.worker_id, task)
            task.trigger_event(Event.SUCCESS, task)

    def _is_complete(self, task: Any) -> bool:
        return check_complete(task, self.options.completion_cache)

    def _verify_dependencies(self, outcome: TaskOutcome) -> None:
        """Raise if a dependency is incomplete at run time, listing it (and its missing outputs)."""
        if not self.options.check_unfulfilled_deps or is_external(self.task):
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
        if not self.options.check_complete_on_run:
            if self.options.completion_cache is not None:
                self.options.completion_cache[self.task.task_id] = True
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

    def _inject_reporting_callables(self) -> dict[str, Any]:
        """Bind the task's progress callables to the status reporter; returns what they replaced.

        A pair of calls rather than a context manager: this runs for every task, and is cheaper so.
        """
        reporter = self.status_reporter
        injected = {
            "set_tracking_url": reporter.update_tracking_url,
            "set_status_message": reporter.update_status_message,
            "set_progress_percentage": reporter.update_progress_percentage,
            "decrease_running_resources": reporter.decrease_running_resources,
            "scheduler_messages": reporter.scheduler_messages,
        }
        attributes = self.task.__dict__
        saved = {name: attributes[name] for name in injected if name in attributes}
        attributes.update(injected)
        return saved

    def _restore_reporting_callables(self, saved: dict[str, Any]) -> None:
        """Undo ``_inject_reporting_callables`` once ``run()`` has returned or raised."""
        attributes = self.task.__dict__
        for name in REPORTER_ATTRIBUTES:  # the names _inject_reporting_callables sets, in the same order
            if name in saved:
                attributes[name] = saved[name]
            else:
                attributes.pop(name, None)

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
