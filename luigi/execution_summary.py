"""The end-of-run report: which tasks ran, failed or stayed pending, and the ":)" one-line verdict.

Everything is derived from three pieces of worker bookkeeping: ``_add_task_history`` (every task status
the worker reported), ``_get_work_response_history`` (who else was running what) and ``_scheduled_tasks``.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from luigi import parameter, task_status
from luigi.task import Config

if TYPE_CHECKING:
    from luigi.task import Task

    TaskSets = dict[str, set[Task]]
else:
    TaskSets = dict

__all__ = ["LuigiRunResult", "LuigiStatusCode", "execution_summary", "summary"]

_HEADER = "===== Luigi Execution Summary ====="

# Every category _summary_dict computes, in reporting order.
_ORDERED_STATUSES = (
    "already_done",
    "completed",
    "ever_failed",
    "failed",
    "scheduling_error",
    "still_pending",
    "still_pending_ext",
    "run_by_other_worker",
    "upstream_failure",
    "upstream_missing_dependency",
    "upstream_run_by_other_worker",
    "upstream_scheduling_error",
    "not_run",
)

# The printed phrase of each reported group ("ever_failed" is internal: it only decides the verdict).
_PHRASES = {
    "already_done": "complete ones were encountered",
    "completed": "ran successfully",
    "failed": "failed",
    "scheduling_error": "failed scheduling",
    "still_pending": "were left pending, among these",
    "still_pending_ext": "were missing external dependencies",
    "run_by_other_worker": "were being run by another worker",
    "upstream_failure": "had failed dependencies",
    "upstream_missing_dependency": "had missing dependencies",
    "upstream_run_by_other_worker": "had dependencies that were being run by other worker",
    "upstream_scheduling_error": "had dependencies whose scheduling failed",
    "not_run": "was not granted run permission by the scheduler",
}

# Sub-groups printed indented under "were left pending, among these".
_PENDING_SUB_STATUSES = frozenset(_ORDERED_STATUSES[_ORDERED_STATUSES.index("still_pending_ext") :])

# The upstream_* category a pending task falls in when a dependency is in any of the given categories.
_UPSTREAM_RULES = (
    ("upstream_failure", ("ever_failed", "upstream_failure")),
    ("upstream_missing_dependency", ("still_pending_ext", "upstream_missing_dependency")),
    ("upstream_run_by_other_worker", ("run_by_other_worker", "upstream_run_by_other_worker")),
    ("upstream_scheduling_error", ("scheduling_error",)),
)

_MAX_WORKERS_LISTED = 4


class execution_summary(Config):
    """``[execution_summary]``: how many families to list per group (0 lists them all)."""

    summary_length = parameter.IntParameter(default=5)


class LuigiStatusCode(enum.Enum):
    """The verdict of a run; each value is the ``(smiley, reason)`` of the one-line summary."""

    SUCCESS = (":)", "there were no failed tasks or missing dependencies")
    SUCCESS_WITH_RETRY = (":)", "there were failed tasks but they all succeeded in a retry")
    FAILED = (":(", "there were failed tasks")
    FAILED_AND_SCHEDULING_FAILED = (":(", "there were failed tasks and tasks whose scheduling failed")
    SCHEDULING_FAILED = (":(", "there were tasks whose scheduling failed")
    NOT_RUN = (":|", "there were tasks that were not granted run permission by the scheduler")
    MISSING_EXT = (":|", "there were missing external dependencies")


class LuigiRunResult:
    """What ``build(..., detailed_summary=True)`` returns: the worker, the summary text and the verdict."""

    def __init__(self, worker: Any, worker_add_run_status: bool = True) -> None:
        self.worker = worker
        task_sets = _summary_dict(worker)
        self.summary_text = _wrap(_format_body(task_sets, worker))
        self.status = _decide_status(task_sets)
        self.one_line_summary = _one_line_summary(self.status)
        self.scheduling_succeeded = worker_add_run_status

    def __str__(self) -> str:
        return f"LuigiRunResult with status {self.status}"

    def __repr__(self) -> str:
        return (
            f"LuigiRunResult(status={self.status!r},worker={self.worker!r},"
            f"scheduling_succeeded={self.scheduling_succeeded!r})"
        )


def summary(worker: Any) -> str:
    """The full framed summary text for ``worker``'s run (what Luigi logs at the end)."""
    return _wrap(_format_body(_summary_dict(worker), worker))


# -- categorising ---------------------------------------------------------------------------------------


def _summary_dict(worker: Any) -> TaskSets:
    """Sort every task the worker saw into the categories of the summary (a task may be in several)."""
    task_sets = _partition_by_reported_status(worker._add_task_history)
    task_sets["run_by_other_worker"] = set().union(*_tasks_by_other_workers(worker).values())
    _classify_pending(task_sets)
    return task_sets


def _partition_by_reported_status(history: Sequence[tuple[Task, str, bool | None]]) -> TaskSets:
    """Categories that follow directly from the statuses the worker sent to the scheduler.

    A PENDING report with a falsy ``runnable`` (an external task, or the report of a run that yielded
    dependencies, sent with None) files the task under ``still_pending_ext``, a truthy one under
    ``still_pending_not_ext``: a task can be in both, and is then counted twice, as in Luigi.
    """
    by_status: dict[str, set[Task]] = {
        status: set()
        for status in (task_status.PENDING, task_status.DONE, task_status.FAILED, task_status.UNKNOWN)
    }
    pending = []
    for task, status, runnable in history:  # one pass: a task's hash is a call of Python code
        reported = by_status.get(status)
        if reported is not None:
            reported.add(task)
            if status == task_status.PENDING:
                pending.append((task, runnable))
    ever_pending, done = by_status[task_status.PENDING], by_status[task_status.DONE]
    sets: TaskSets = {name: set() for name in _ORDERED_STATUSES if name != "still_pending"}
    sets["completed"] = done & ever_pending
    sets["already_done"] = done - ever_pending
    sets["ever_failed"] = by_status[task_status.FAILED]
    sets["failed"] = sets["ever_failed"] - sets["completed"]
    sets["scheduling_error"] = by_status[task_status.UNKNOWN]
    settled = sets["ever_failed"] | sets["completed"]
    sets["still_pending_ext"] = {task for task, runnable in pending if not runnable and task not in settled}
    sets["still_pending_not_ext"] = {task for task, runnable in pending if runnable and task not in settled}
    return sets


def _tasks_by_other_workers(worker: Any) -> dict[str, set[Task]]:
    """Tasks of ours that get_work said another worker was running, keyed by that worker's id."""
    by_worker: dict[str, set[Task]] = defaultdict(set)
    for response in worker._get_work_response_history:
        if response.get("task_id") is not None:
            continue  # we were given work, so nothing was blocking us
        for running in response.get("running_tasks") or ():
            other_id = running.get("worker")
            task = worker._scheduled_tasks.get(running.get("task_id"))
            if task is not None and other_id != worker._id:
                by_worker[other_id].add(task)
    return by_worker


def _classify_pending(sets: TaskSets) -> None:
    """Explain each runnable-but-pending task by its dependencies (upstream_*), else as not_run.

    A depth-first walk over ``_requires()`` in post-order, so a task is judged after its dependencies;
    iterative, because real pipelines have dependency chains deeper than Python's recursion limit.
    """
    pending = sets["still_pending_not_ext"]
    visited: set[Task] = set()
    for root in pending:
        if root in visited:
            continue
        visited.add(root)
        stack = [_Visit(root)]
        while stack:
            visit = stack[-1]
            child = next((dep for dep in visit.unvisited if dep not in visited), None)
            if child is None:
                stack.pop()
                _judge_pending_task(sets, visit.task, visit.dependencies)
            else:
                visited.add(child)
                if child in pending:
                    stack.append(_Visit(child))


class _Visit:
    """A task on the depth-first stack: its dependencies and how far through them the walk is."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.dependencies: list[Task] = list(task._requires())
        self.unvisited = iter(self.dependencies)


def _judge_pending_task(sets: TaskSets, task: Task, dependencies: list[Task]) -> None:
    explained = False
    for category, causes in _UPSTREAM_RULES:
        if any(dep in sets[cause] for dep in dependencies for cause in causes):
            sets[category].add(task)
            explained = True
    if not explained and task not in sets["run_by_other_worker"]:
        sets["not_run"].add(task)


def _root_task(worker: Any) -> Task | None:
    """The first task the worker scheduled: the one the user asked for."""
    history = worker._add_task_history
    return history[0][0] if history else None


# -- the verdict ----------------------------------------------------------------------------------------


def _decide_status(sets: Mapping[str, set[Any]]) -> LuigiStatusCode:
    if sets["ever_failed"]:
        if not sets["failed"]:
            return LuigiStatusCode.SUCCESS_WITH_RETRY
        if sets["scheduling_error"]:
            return LuigiStatusCode.FAILED_AND_SCHEDULING_FAILED
        return LuigiStatusCode.FAILED
    if sets["scheduling_error"]:
        return LuigiStatusCode.SCHEDULING_FAILED
    if sets["not_run"]:
        return LuigiStatusCode.NOT_RUN
    if sets["still_pending_ext"]:
        return LuigiStatusCode.MISSING_EXT
    return LuigiStatusCode.SUCCESS


def _one_line_summary(status: LuigiStatusCode) -> str:
    smiley, reason = status.value
    return f"This progress looks {smiley} because {reason}"


# -- the text -------------------------------------------------------------------------------------------


def _wrap(body: str) -> str:
    return f"\n{_HEADER}\n\n{body}\n\n{_HEADER}\n"


def _format_body(sets: TaskSets, worker: Any) -> str:
    counted = ("already_done", "completed", "failed", "scheduling_error")
    pending_count = len(sets["still_pending_ext"]) + len(sets["still_pending_not_ext"])
    total = sum(len(sets[name]) for name in counted) + pending_count
    if total == 0:
        return "Did not schedule any tasks"
    text = f"Scheduled {total} tasks of which:\n"
    text += "".join(
        _format_group(name, sets, pending_count) for name in _ORDERED_STATUSES if name in _PHRASES
    )
    others = _tasks_by_other_workers(worker)
    if others:
        text += _format_other_workers(others)
    if not sets["completed"] and not sets["failed"]:
        text += ("" if others else "\n") + "Did not run any tasks"
    return text + "\n" + _one_line_summary(_decide_status(sets))


def _format_group(name: str, sets: TaskSets, pending_count: int) -> str:
    count = pending_count if name == "still_pending" else len(sets[name])
    if not count:
        return ""
    nested = name in _PENDING_SUB_STATUSES
    header = f"{'    ' if nested else ''}* {count} {_PHRASES[name]}:\n"
    if name == "still_pending":  # only a heading: its tasks are listed in the sub-groups below it
        return header
    return header + _format_families(sets[name], indent=8 if nested else 4) + "\n"


def _format_other_workers(others: Mapping[str, set[Any]]) -> str:
    lines = ["", "The other workers were:"]
    for index, (worker_id, tasks) in enumerate(others.items()):
        hidden = len(others) - index
        if index >= _MAX_WORKERS_LISTED and hidden > 1:
            lines.append(f"    and {hidden} other workers")
            break
        lines.append(f"    - {worker_id} ran {len(tasks)} tasks")
    return "\n".join(lines) + "\n\n"


def _format_families(tasks: Iterable[Task], indent: int) -> str:
    """One line per task family, sorted by family, capped at ``[execution_summary] summary_length``."""
    by_family: dict[str, list[Task]] = defaultdict(list)
    for task in tasks:
        by_family[task.task_family].append(task)
    limit = execution_summary().summary_length
    prefix = " " * indent
    lines: list[str] = []
    for family in sorted(by_family):
        if limit > 0 and len(lines) >= limit:
            lines.append(prefix + "...")
            break
        members = sorted(by_family[family], key=str)
        lines.append(f"{prefix}- {len(members)} {_describe_family(family, members)}")
    return "\n".join(lines)


def _describe_family(family: str, tasks: list[Task]) -> str:
    """The compact description of a family's tasks, e.g. ``MyTask(date=2024-01-01...2024-01-31)``."""
    params = tasks[0].get_params()
    if not params:
        return f"{family}()"
    if _is_too_long(tasks, params):
        return f"{family}(...)"
    if len(params) == 1:
        name, param = params[0]
        return f"{family}({name}={_describe_single_param(tasks, name, param)})"
    described = _describe_one_varying_param(family, tasks, params)
    if described is not None:
        return described
    if len(tasks) == 1:
        return str(tasks[0])
    if len(tasks) == 2:
        return f"{tasks[0]} and {tasks[1]}"
    return f"{tasks[0]} ..."


def _is_too_long(tasks: list[Task], params: list[tuple[str, Any]]) -> bool:
    names_length = sum(len(name) for name, _ in params)
    first_length = len(str(tasks[0]))
    if names_length > 60 or first_length > 200:
        return True
    return len(tasks) == 2 and len(params) > 1 and (names_length > 40 or first_length > 100)


def _describe_single_param(tasks: list[Task], name: str, param: Any) -> str:
    values = _value_set(tasks, name)
    if values is not None and len(values) > 3:
        bounds = _contiguous_bounds(values, param)
        if bounds is not None:
            return f"{param.serialize(bounds[0])}...{param.serialize(bounds[1])}"
    return _join_values([param.serialize(getattr(task, name)) for task in tasks])


def _join_values(serialized: list[str]) -> str:
    """Comma-join the values, cutting the list short with ``...`` once it gets long."""
    row = ""
    last = len(serialized) - 1
    for index, value in enumerate(serialized):
        if (len(row) >= 30 and index > 2 and index != last) or len(row) > 200:
            return row + "..."
        row += value + ("," if index < last else "")
    return row


def _describe_one_varying_param(family: str, tasks: list[Task], params: list[tuple[str, Any]]) -> str | None:
    """``Family(a=1, b=first...last)`` when only ``b`` differs and its values form a contiguous range."""
    varying = []
    for name, param in params:
        values = _value_set(tasks, name)
        if values is None:
            return None
        if len(values) > 1:
            varying.append((name, param, values))
    if len(varying) != 1 or len(varying[0][2]) <= 2:
        return None
    varying_name, varying_param, values = varying[0]
    bounds = _contiguous_bounds(values, varying_param)
    if bounds is None:
        return None
    shown = []
    for name, param in params:
        if name == varying_name:
            shown.append(f"{name}={param.serialize(bounds[0])}...{param.serialize(bounds[1])}")
        else:
            shown.append(f"{name}={param.serialize(getattr(tasks[0], name))}")
    return f"{family}({', '.join(shown)})"


def _value_set(tasks: list[Task], name: str) -> set[Any] | None:
    try:
        return {getattr(task, name) for task in tasks}
    except TypeError:  # unhashable values cannot be compared as a range; describe tasks one by one
        return None


def _contiguous_bounds(values: set[Any], param: Any) -> tuple[Any, Any] | None:
    """``(first, last)`` when the values are one unbroken run under ``param.next_in_enumeration``."""
    successors = {value: param.next_in_enumeration(value) for value in values}
    firsts = values - set(successors.values())
    beyond = set(successors.values()) - values
    if len(firsts) != 1 or len(beyond) != 1:
        return None
    (after_last,) = beyond
    last = next(value for value, successor in successors.items() if successor == after_last)
    return next(iter(firsts)), last
