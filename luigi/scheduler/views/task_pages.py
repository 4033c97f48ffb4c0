"""One page of the visualiser's task list: filtered, sorted and sliced by the scheduler.

The common views cost only the page they return: every task, or one status, in the default order
(most severe status first, then by when the task reached it) is a slice of the status index. Views
that need a scan (a family, a search, an upstream status, another sort order) keep their ordered ids
for ``refresh_interval`` seconds, so ten pages polling the same view cost one scan, not ten. Past
``max_shown_tasks`` matches only the count is returned and the user is asked to narrow the view.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from luigi.scheduler.model.records import TaskRecord
from luigi.scheduler.model.state import STATUSES, SchedulerState
from luigi.scheduler.views.census import MAX_AGE, Census, Fingerprint, fingerprint, refresh_interval
from luigi.scheduler.views.search import NameIndex
from luigi.scheduler.views.serialize import serialize_task
from luigi.scheduler.views.upstream import UPSTREAM_SEVERITY_ORDER
from luigi.task_status import BATCH_RUNNING, DISABLED, DONE, FAILED, PENDING, RUNNING, UNKNOWN

# The default order: what needs attention first.
STATUS_ORDER = (FAILED, DISABLED, RUNNING, BATCH_RUNNING, PENDING, UNKNOWN, DONE)
_STATUS_RANK = {status: rank for rank, status in enumerate(STATUS_ORDER)}
UPSTREAM_STATUSES = tuple(status for status in UPSTREAM_SEVERITY_ORDER if status)
SORT_KEYS = ("", "status", "family", "params", "priority", "time_running", "worker")
MAX_PAGE_SIZE = 1000
_CACHED_VIEWS = 16


@dataclass(frozen=True)
class PageQuery:
    """What the visualiser asked for (checked by ``from_kwargs``)."""

    status: str = ""
    upstream_status: str = ""
    family: str = ""
    search: str = ""
    sort_by: str = ""
    sort_desc: bool = False
    offset: int = 0
    page_size: int = 50

    def __post_init__(self) -> None:
        _check_choice("status", self.status, ("", *STATUSES))
        _check_choice("upstream_status", self.upstream_status, ("", *UPSTREAM_STATUSES))
        _check_choice("sort_by", self.sort_by, SORT_KEYS)
        if self.offset < 0:
            raise ValueError(f"task_page: offset must be 0 or more, got {self.offset}")
        if not 1 <= self.page_size <= MAX_PAGE_SIZE:
            raise ValueError(
                f"task_page: page_size must be between 1 and {MAX_PAGE_SIZE}, got {self.page_size}"
            )

    @property
    def needs_scan(self) -> bool:
        """Whether the ids must be collected and ordered, rather than read off the status index."""
        return bool(
            self.family or self.search.strip() or self.upstream_status or self.sort_by not in ("", "status")
        )

    @property
    def view_key(self) -> tuple[Any, ...]:
        """Identifies the ordered list of ids (everything but the slice)."""
        return (self.status, self.upstream_status, self.family, self.search, self.sort_by, self.sort_desc)


@dataclass
class _OrderedIds:
    as_of: float
    fingerprint: Fingerprint
    ids: list[str]


class TaskPages:
    """Answers ``task_page`` for one scheduler state, caching the ordered ids of scanned views."""

    def __init__(self, state: SchedulerState, census: Census, names: NameIndex) -> None:
        self._state = state
        self._census = census
        self._names = names
        self._views: collections.OrderedDict[tuple[Any, ...], _OrderedIds] = collections.OrderedDict()

    def page(self, query: PageQuery, max_shown_tasks: int | None = None) -> dict[str, Any]:
        """The ``task_page`` answer: total matches and the tasks of the requested slice."""
        cap = max_shown_tasks or self._state.config.max_shown_tasks
        answer: dict[str, Any] = {
            "offset": query.offset,
            "page_size": query.page_size,
            "max_shown_tasks": cap,
            "too_many": False,
            "counting": False,
        }
        if query.upstream_status and self._census.result is None:
            self._census.advance()
            if self._census.result is None:
                return {**answer, "total": None, "counting": True, "tasks": []}
        if query.needs_scan:
            ids = self._scanned_ids(query, cap)
            total = len(ids)
            window: Iterable[str] = ids[query.offset : query.offset + query.page_size]
            tasks = [t for t in map(self._state.tasks.get, window) if t is not None]
        else:
            sources = self._status_sources(query)
            total = sum(len(source) for source in sources)
            chain = itertools.chain.from_iterable(source.values() for source in sources)
            tasks = list(itertools.islice(chain, query.offset, query.offset + query.page_size))
        if total > cap:
            return {**answer, "total": total, "too_many": True, "tasks": []}
        return {**answer, "total": total, "tasks": [self._row(task) for task in tasks]}

    def _status_sources(self, query: PageQuery) -> list[dict[str, TaskRecord]]:
        by_status = self._state.by_status
        if query.status:
            return [by_status[query.status]]
        order = reversed(STATUS_ORDER) if query.sort_desc else STATUS_ORDER
        return [by_status[status] for status in order]

    def _scanned_ids(self, query: PageQuery, cap: int) -> list[str]:
        """The view's ids in order (in no particular order past ``cap``: only their number is used)."""
        state = self._state
        key = (*query.view_key, cap)
        cached = self._views.get(key)
        now = state.clock()
        if cached is not None and self._still_good(cached, now):
            self._views.move_to_end(key)
            return cached.ids
        matches = list(self._matching(query))
        ordered = _ordered(matches, query) if len(matches) <= cap else matches
        ids = [task.id for task in ordered]
        self._views[key] = _OrderedIds(now, fingerprint(state), ids)
        while len(self._views) > _CACHED_VIEWS:
            self._views.popitem(last=False)
        return ids

    def _still_good(self, cached: _OrderedIds, now: float) -> bool:
        """Young enough for the graph's size, or nothing seems to have changed since."""
        age = now - cached.as_of
        if age < 0 or age >= MAX_AGE:
            return False
        return age < refresh_interval(
            len(self._state.tasks), minimum=0.0
        ) or cached.fingerprint == fingerprint(self._state)

    def _matching(self, query: PageQuery) -> Iterable[TaskRecord]:
        state = self._state
        candidates: Iterable[TaskRecord]
        terms = [term.lower() for term in query.search.split()]
        if terms:  # the index finds the few tasks a search names; the filters below check them
            candidates = self._names.matching(terms)
            if query.upstream_status:
                result = self._census.result
                upstream = result.upstream_of if result is not None else {}
                candidates = (
                    t
                    for t in candidates
                    if t.status == PENDING and upstream.get(t.id) == query.upstream_status
                )
            if query.family:
                candidates = (t for t in candidates if t.family == query.family)
            if query.status:
                candidates = (t for t in candidates if t.status == query.status)
            return candidates
        if query.upstream_status:
            result = self._census.result
            upstream = result.upstream_of if result is not None else {}
            found = (state.tasks.get(i) for i, s in upstream.items() if s == query.upstream_status)
            candidates = (t for t in found if t is not None and t.status == PENDING)
        elif query.family:
            candidates = (state.tasks[i] for i in state.by_family.get(query.family, ()) if i in state.tasks)
        elif query.status:
            candidates = state.by_status[query.status].values()
        else:
            candidates = state.tasks.values()
        if query.status and (query.family or query.upstream_status):
            candidates = (t for t in candidates if t.status == query.status)
        if query.family and query.upstream_status:
            candidates = (t for t in candidates if t.family == query.family)
        return candidates

    def _row(self, task: TaskRecord) -> dict[str, Any]:
        row = serialize_task(task, self._state.config.send_messages, include_deps=False)
        row["task_id"] = task.id
        result = self._census.result
        if task.status == PENDING and result is not None and task.id in result.upstream_of:
            row["upstream_status"] = result.upstream_of[task.id]
        return row


def _ordered(tasks: list[TaskRecord], query: PageQuery) -> list[TaskRecord]:
    """``tasks`` in the query's order; tasks without a value for the key (not running...) go last.

    Keys are single values and ties keep the default order (sorts are stable): tuple keys would make
    sorting 100,000 tasks several times slower.
    """
    by_default = sorted(tasks, key=_updated)
    by_default.sort(key=_status_rank)
    if query.sort_by in ("", "status"):
        if query.sort_desc:
            by_default.sort(key=_status_rank, reverse=True)
        return by_default
    key, has_value = _SORT_KEYS[query.sort_by]
    valued = [t for t in by_default if has_value(t)] if has_value is not None else by_default
    missing = [t for t in by_default if not has_value(t)] if has_value is not None else []
    valued.sort(key=key, reverse=query.sort_desc)
    return valued + missing


def _updated(task: TaskRecord) -> float:
    return task.updated


def _status_rank(task: TaskRecord) -> int:
    return _STATUS_RANK.get(task.status, len(STATUS_ORDER))


def _params_text(task: TaskRecord) -> str:
    return task.pretty_id[len(task.family) + 1 :]


def _is_running(task: TaskRecord) -> bool:
    return task.status == RUNNING and task.time_running is not None


def _running_for(task: TaskRecord) -> float:
    # Ascending is "shortest running first": the most recent start time first.
    return -(task.time_running or 0.0)


def _worker(task: TaskRecord) -> str:
    return task.worker_running or task.last_worker or ""


def _has_worker(task: TaskRecord) -> bool:
    return bool(task.worker_running or task.workers)


# sort_by -> (key, which tasks have a value: None when all do)
_SORT_KEYS: dict[str, tuple[Callable[[TaskRecord], Any], Callable[[TaskRecord], bool] | None]] = {
    "family": (lambda t: t.family, None),
    "params": (_params_text, None),
    "priority": (lambda t: t.priority, None),
    "time_running": (_running_for, _is_running),
    "worker": (_worker, _has_worker),
}


def _check_choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        choices = ", ".join(repr(a) for a in allowed if a)
        raise ValueError(f"task_page: {name} must be one of {choices} (or empty), got {value!r}")
