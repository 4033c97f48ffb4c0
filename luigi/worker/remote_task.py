"""Shipping a task to another machine by reference: its module, family and serialized parameters.

A cluster executor (Dask, Ray) or a batch job must not pickle the task object: whatever unpickles it (the
Dask scheduler, which never has the users' modules) would need every module the task's class touches.
Instead the luigi worker sends a ``TaskReference``, plain data that only ``luigi`` is needed to read, and
the process that runs the task rebuilds it as a worker rebuilds a task it is given: import the module,
look the family up in the registry, parse each parameter from its serialized string. Before sending, the
worker checks that this round trip gives the same task back (``check_rebuildable``); a task that fails
the check (defined in ``__main__`` or inside a function, or with a parameter that does not survive
serialization) is shipped by the executor's own serialization instead, with a warning saying why.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass
from typing import Any

from luigi.task import Task
from luigi.task_register import load_task

logger = logging.getLogger("luigi-interface")


class TaskNotRebuildableError(ValueError):
    """The task cannot be rebuilt elsewhere from its module, family and serialized parameters."""


def serialized_params(task: Task) -> dict[str, str]:
    """Every parameter value of ``task`` serialized, private and insignificant ones included."""
    params = dict(task.get_params())
    return {name: params[name].serialize(value) for name, value in task.param_kwargs.items()}


def check_rebuildable(task: Task, params: dict[str, str], elsewhere: str = "the batch job") -> None:
    """Raise TaskNotRebuildableError unless importing the module and parsing ``params`` gives ``task``
    (``elsewhere`` names who would rebuild it, for the message)."""
    cls = type(task)
    where = f"{task.task_family} (class {cls.__qualname__} in module {cls.__module__})"
    if cls.__module__ == "__main__":
        raise TaskNotRebuildableError(
            f"{where} is defined in the script being run, which {elsewhere} cannot import: "
            "move it into a module on the Python path"
        )
    found: Any = importlib.import_module(cls.__module__)
    for part in cls.__qualname__.split("."):
        found = getattr(found, part, None)
    if found is not cls:
        raise TaskNotRebuildableError(
            f"{where} is not reachable by name from its module (defined inside a function?), so {elsewhere} "
            "cannot import it: define it at the top level of a module"
        )
    check_parameters_survive(task, params, where, elsewhere)


def check_parameters_survive(
    task: Task, params: dict[str, str], where: str, elsewhere: str = "the batch job"
) -> None:
    """Raise TaskNotRebuildableError unless parsing ``params`` gives back every parameter of ``task``."""
    rebuilt = type(task).from_str_params(params).param_kwargs
    changed = sorted(name for name, value in task.param_kwargs.items() if rebuilt.get(name) != value)
    if changed:
        raise TaskNotRebuildableError(
            f"{where}: parameter(s) {', '.join(changed)} do not survive serialization, so {elsewhere} "
            "would run a different task: use parameter types whose parse(serialize(value)) gives the value "
            "back"
        )


@dataclass(frozen=True)
class TaskReference:
    """A task named by its module, family and serialized parameters: plain data, rebuilt where it runs."""

    module: str
    family: str
    params: dict[str, str]
    task_id: str  # of the task it names, for messages written before it is rebuilt

    def rebuild(self) -> Task:
        """The task, rebuilt in this process; TaskNotRebuildableError naming the cause if it cannot be."""
        try:
            task: Task = load_task(self.module, self.family, self.params)
        except Exception as exc:  # an import error, a missing family, a bad value: one message says which
            raise TaskNotRebuildableError(
                f"Cannot rebuild {self.task_id} here from module {self.module!r}, family {self.family!r}: "
                f"{type(exc).__name__}: {exc} (the task's module must be importable on every process "
                "that runs tasks)"
            ) from exc
        return task


# What a cluster executor submits for one task: a reference, or the task itself when it cannot be one.
TaskPayload = TaskReference | Task


def task_of(payload: TaskPayload) -> Task:
    """The task a payload stands for, rebuilt here if it came by reference."""
    return payload.rebuild() if isinstance(payload, TaskReference) else payload


class ByReference:
    """Makes each task's payload for an executor: a ``TaskReference`` when the task can be rebuilt by name,
    else the task itself (left to the executor's serialization), with one warning per class saying why."""

    def __init__(self, executor: str, elsewhere: str) -> None:
        self._executor = executor  # e.g. "Dask", in the warning
        self._elsewhere = elsewhere  # e.g. "the Dask workers", who rebuild the task
        self._warned: set[type] = set()

    def payload(self, task: Task) -> TaskPayload:
        """What to submit for ``task``."""
        params = serialized_params(task)
        try:
            check_rebuildable(task, params, self._elsewhere)
        except (TaskNotRebuildableError, ImportError) as why:
            self._warn(task, why)
            return task
        return TaskReference(type(task).__module__, task.task_family, params, task.task_id)

    def _warn(self, task: Task, why: Exception) -> None:
        if type(task) in self._warned:
            return
        self._warned.add(type(task))
        logger.warning(
            "%s goes to %s by %s's own serialization (pickled), not by reference: %s. Every process that "
            "unpickles it needs what it references.",
            task.task_family,
            self._elsewhere,
            self._executor,
            why,
        )
