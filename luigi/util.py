"""Decorators and helpers for reusing parameters between tasks.

``@inherits`` copies another task's parameters, ``@requires`` also makes it a requirement, ``@copies`` adds a
line-copying ``run()``, ``@delegates`` runs subtasks first; ``previous`` steps a dated task back one period.
"""

from __future__ import annotations

import datetime
import logging
from typing import Any

from luigi import parameter, task

logger = logging.getLogger("luigi-interface")

__all__ = [
    "common_params",
    "copies",
    "delegates",
    "get_previous_completed",
    "inherits",
    "previous",
    "requires",
]


def _check_decorator_args(positional: tuple[Any, ...], keyword: dict[str, Any], decorator: str) -> None:
    if not positional and not keyword:
        raise TypeError(f"@{decorator} needs at least one task class")
    if positional and keyword:
        raise TypeError(f"@{decorator} takes task classes either positionally or by keyword, not both")


class inherits:
    """Class decorator: give the task every parameter of the listed tasks that it does not already have.

    Positional use adds ``clone_parent(**kw)`` (the first task) and ``clone_parents(**kw)`` (a list);
    keyword use (``@inherits(a=TaskA)``) adds ``clone_parents(**kw)`` returning a dict by those names.
    """

    def __init__(self, *tasks_to_inherit: type[task.Task], **kw_tasks_to_inherit: type[task.Task]) -> None:
        _check_decorator_args(tasks_to_inherit, kw_tasks_to_inherit, "inherits")
        self.tasks_to_inherit = tasks_to_inherit
        self.kw_tasks_to_inherit = kw_tasks_to_inherit

    def __call__(self, task_that_inherits: type[task.Task]) -> type[task.Task]:
        for parent in self.tasks_to_inherit or tuple(self.kw_tasks_to_inherit.values()):
            for param_name, param_obj in parent.get_params():
                if not hasattr(task_that_inherits, param_name):
                    setattr(task_that_inherits, param_name, param_obj)
        parents = self.tasks_to_inherit
        kw_parents = self.kw_tasks_to_inherit
        if parents:

            def clone_parent(_self: task.Task, **kwargs: Any) -> task.Task:
                return _self.clone(cls=parents[0], **kwargs)

            def clone_parents(_self: task.Task, **kwargs: Any) -> Any:
                return [_self.clone(cls=parent, **kwargs) for parent in parents]

            task_that_inherits.clone_parent = clone_parent
        else:

            def clone_parents(_self: task.Task, **kwargs: Any) -> Any:
                return {name: _self.clone(cls=parent, **kwargs) for name, parent in kw_parents.items()}

        task_that_inherits.clone_parents = clone_parents
        return task_that_inherits


class requires:
    """Class decorator: ``@inherits`` the listed tasks and require them (one task, a list, or a dict)."""

    def __init__(self, *tasks_to_require: type[task.Task], **kw_tasks_to_require: type[task.Task]) -> None:
        _check_decorator_args(tasks_to_require, kw_tasks_to_require, "requires")
        self.tasks_to_require = tasks_to_require
        self.kw_tasks_to_require = kw_tasks_to_require

    def __call__(self, task_that_requires: type[task.Task]) -> type[task.Task]:
        decorated = inherits(*self.tasks_to_require, **self.kw_tasks_to_require)(task_that_requires)
        single = len(self.tasks_to_require) == 1

        def requires(_self: Any) -> Any:
            return _self.clone_parent() if single else _self.clone_parents()

        decorated.requires = requires  # type: ignore[method-assign,assignment]
        return decorated


class copies:
    """Class decorator: ``@requires`` one task and copy its output into this task's output, line by line."""

    def __init__(self, task_to_copy: type[task.Task]) -> None:
        self.requires_decorator = requires(task_to_copy)

    def __call__(self, task_that_copies: type[task.Task]) -> type[task.Task]:
        decorated = self.requires_decorator(task_that_copies)

        def run(_self: task.Task) -> None:
            destination: Any = _self.output()  # a single target with open(), as copying needs
            source = _self.input()
            with source.open("r") as reader, destination.open("w") as writer:
                for line in reader:
                    writer.write(line)

        decorated.run = run  # type: ignore[method-assign,assignment]
        return decorated


def delegates(task_that_delegates: type[task.Task]) -> type[task.Task]:
    """Class decorator for a task with ``subtasks()``: their deps become its deps; run() runs them first."""
    if not hasattr(task_that_delegates, "subtasks"):
        raise AttributeError(f'{task_that_delegates} needs to implement the method "subtasks"')

    @task._task_wraps(task_that_delegates)
    class Wrapped(task_that_delegates):  # type: ignore[valid-type,misc]
        def deps(self) -> list[task.Task]:
            subtask_deps = [subtask.deps() for subtask in task.flatten(self.subtasks())]
            return task.flatten(self.requires()) + task.flatten(subtask_deps)

        def run(self) -> Any:
            for subtask in task.flatten(self.subtasks()):
                subtask.run()
            return task_that_delegates.run(self)

    return Wrapped


def common_params(task_instance: task.Task, task_cls: type[task.Task]) -> dict[str, Any]:
    """The values of ``task_instance``'s parameters that ``task_cls`` also declares, by name."""
    if not isinstance(task_cls, task.Register):
        raise TypeError(f"task_cls must be a Task class (not an instance), got {task_cls!r}")
    instance_params = dict(task_instance.get_params())
    return {
        name: param.normalize(task_instance.param_kwargs[name])
        for name, param in task_cls.get_params()
        if name in instance_params
    }


def _shift_months(day: datetime.date, months: int) -> datetime.date:
    index = day.year * 12 + day.month - 1 + months
    return day.replace(year=index // 12, month=index % 12 + 1)


_TIME_UNITS: list[tuple[type[parameter.Parameter[Any]], datetime.timedelta]] = [
    (parameter.DateSecondParameter, datetime.timedelta(seconds=1)),
    (parameter.DateMinuteParameter, datetime.timedelta(minutes=1)),
    (parameter.DateHourParameter, datetime.timedelta(hours=1)),
    (parameter.DateParameter, datetime.timedelta(days=1)),
]


def _step_back(param: parameter.Parameter[Any], value: Any) -> Any:
    """``value`` one period earlier, or NotImplemented when ``param`` is not date-like."""
    if isinstance(param, parameter.DateIntervalParameter):
        return value.prev()
    interval = getattr(param, "interval", 1)
    if isinstance(param, parameter.YearParameter):
        return value.replace(year=value.year - interval)
    if isinstance(param, parameter.MonthParameter):
        return _shift_months(value, -interval)
    for param_type, unit in _TIME_UNITS:
        if isinstance(param, param_type):
            return value - unit * interval
    return NotImplemented


def previous(task_instance: task.Task) -> task.Task:
    """The same task one period earlier: its single date-like parameter stepped back by its interval.

    Raises:
        NotImplementedError: the task has no date-like parameter, or more than one.
    """
    stepped = {}
    for name, param in task_instance.get_params():
        earlier = _step_back(param, task_instance.param_kwargs[name])
        if earlier is not NotImplemented:
            stepped[name] = earlier
    if not stepped:
        raise NotImplementedError(f"{task_instance!r} has no date parameter - can't determine previous task")
    if len(stepped) > 1:
        raise NotImplementedError(
            f"{task_instance!r} has several date parameters ({', '.join(stepped)}) - "
            "can't determine previous task"
        )
    return task_instance.clone(**stepped)


def get_previous_completed(task_instance: task.Task, max_steps: int = 10) -> task.Task | None:
    """The nearest earlier instance (up to ``max_steps`` periods back) that is complete, or None."""
    candidate = task_instance
    for _ in range(max_steps):
        candidate = previous(candidate)
        logger.debug("Checking if %s is complete", candidate)
        if candidate.complete():
            return candidate
    return None
