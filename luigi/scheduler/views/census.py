"""The visualiser's counts: tasks per status, per family and per upstream status, computed in slices.

Counts per status and per family come straight from the state's indexes (exact, O(statuses +
families)). Counts per family *and* status, and the upstream status of every PENDING task, need a
walk over the graph; at 100,000 tasks that walk takes a few hundred milliseconds, which must not
stall ``get_work``. So a ``Census`` does it a slice at a time (``SLICE_WORK`` steps per call of
``advance``) and publishes a result once a pass is complete. A new pass starts only when the last
result is older than ``refresh_interval`` (longer for bigger graphs) and something changed, so the
work per second is bounded however many pages ask.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any

from luigi.scheduler.model.state import STATUSES, SchedulerState
from luigi.scheduler.views.upstream import STATUS_TO_UPSTREAM_MAP, UPSTREAM_SEVERITY_ORDER
from luigi.task_status import DONE, PENDING

SLICE_WORK = 4000  # steps per advance() call: a few milliseconds of Python
TASKS_PER_SECOND_OF_INTERVAL = 10_000  # 100,000 tasks: a new pass at most every 10 s
MIN_INTERVAL = 1.0
MAX_AGE = 60.0  # recount even when nothing seemed to change (a change the fingerprint misses)

_SEVERITY = {status: rank for rank, status in enumerate(UPSTREAM_SEVERITY_ORDER)}
_IN_PROGRESS = "\0"  # on the current walk; a cycle reads it as ''

Fingerprint = tuple[Any, ...]


def refresh_interval(num_tasks: int, minimum: float = MIN_INTERVAL) -> float:
    """Seconds a computed view of ``num_tasks`` tasks stays good enough to serve again."""
    return max(minimum, num_tasks / TASKS_PER_SECOND_OF_INTERVAL)


def fingerprint(state: SchedulerState) -> Fingerprint:
    """A cheap summary that changes with almost every change of the task graph."""
    return (len(state.tasks), state.disabled_version, *(len(state.by_status[s]) for s in STATUSES))


@dataclass
class CensusResult:
    """One complete pass: what was true (near enough) at ``as_of``."""

    as_of: float
    fingerprint: Fingerprint
    family_statuses: dict[str, dict[str, int]]
    upstream_of: dict[str, str]  # PENDING task id -> its upstream status (tasks with none left out)
    upstream_counts: dict[str, int] = field(default_factory=dict)


class Census:
    """Counts for the visualiser, refreshed a slice at a time (see the module docstring)."""

    def __init__(self, state: SchedulerState) -> None:
        self._state = state
        self._result: CensusResult | None = None
        self._pass: _Pass | None = None

    @property
    def result(self) -> CensusResult | None:
        """The last complete pass, or None before the first one completes."""
        return self._result

    @property
    def updating(self) -> bool:
        """Whether a pass is under way (the result will change soon)."""
        return self._pass is not None

    def advance(self, budget: int | None = None) -> None:
        """Do up to ``budget`` (default ``SLICE_WORK``) steps of the current pass; start one when stale."""
        if self._pass is None:
            if not self._due():
                return
            self._pass = _Pass(self._state, fingerprint(self._state), self._state.clock())
        if self._pass.run(SLICE_WORK if budget is None else budget):
            self._result = self._pass.result()
            self._pass = None

    def _due(self) -> bool:
        result = self._result
        if result is None:
            return True
        age = self._state.clock() - result.as_of
        if age >= MAX_AGE or age < 0:  # a clock set backwards must not freeze the counts
            return True
        if fingerprint(self._state) == result.fingerprint:
            return False
        return age >= refresh_interval(len(self._state.tasks))

    def counts(self) -> dict[str, Any]:
        """The ``task_counts`` answer: exact counts from the indexes plus the census's, if any."""
        state = self._state
        result = self._result
        return {
            "total": len(state.tasks),
            "statuses": {status: len(state.by_status[status]) for status in STATUSES},
            "families": {family: len(ids) for family, ids in sorted(state.by_family.items())},
            "upstream": dict(result.upstream_counts) if result is not None else None,
            "family_statuses": result.family_statuses if result is not None else None,
            "census": {
                "ready": result is not None,
                "updating": self.updating,
                "as_of": result.as_of if result is not None else None,
            },
        }


class _Pass:
    """One resumable walk: count families and statuses, then resolve each PENDING task's upstream."""

    def __init__(self, state: SchedulerState, print_: Fingerprint, started: float) -> None:
        self.state = state
        self.fingerprint = print_
        self.started = started
        self.ids = list(state.tasks)
        self.cursor = 0
        self.family_statuses: dict[str, collections.Counter[str]] = collections.defaultdict(
            collections.Counter
        )
        self.pending: list[str] = []
        self.pending_cursor = 0
        self.table: dict[str, str] = {}
        self.stack: list[str] = []
        self.current: str | None = None  # the PENDING task whose walk is on the stack
        self.upstream_of: dict[str, str] = {}
        self.upstream_counts: collections.Counter[str] = collections.Counter()

    def run(self, budget: int) -> bool:
        """Work for about ``budget`` steps; True once the pass is complete."""
        budget = self._count(budget)
        while budget > 0:
            if self.stack:
                budget = self._walk(budget)
                continue
            if self.current is not None:  # its walk just finished: its value is final
                self._record(self.current)
                self.current = None
            if self.pending_cursor >= len(self.pending):
                return True
            self.current = self.pending[self.pending_cursor]
            self.pending_cursor += 1
            budget -= 1
            if self.current not in self.table:
                self.stack.append(self.current)
        return False

    def _record(self, task_id: str) -> None:
        value = self.table.get(task_id, "")
        if value and value != _IN_PROGRESS:
            self.upstream_of[task_id] = value
            self.upstream_counts[value] += 1

    def _count(self, budget: int) -> int:
        tasks = self.state.tasks
        end = min(len(self.ids), self.cursor + max(budget, 0))
        for task_id in self.ids[self.cursor : end]:
            task = tasks.get(task_id)
            if task is None:
                continue  # removed since the pass began
            self.family_statuses[task.family][task.status] += 1
            if task.status == PENDING:
                self.pending.append(task_id)
        budget -= end - self.cursor
        self.cursor = end
        return budget

    def _walk(self, budget: int) -> int:
        """Resolve the upstream status of what is on the stack (Luigi's memoised walk, resumable)."""
        tasks, table, stack = self.state.tasks, self.table, self.stack
        while stack and budget > 0:
            current = stack[-1]
            budget -= 1
            task = tasks.get(current)
            if task is None or task.status == DONE:
                table.setdefault(current, "")
                stack.pop()
            elif table.get(current, _IN_PROGRESS) != _IN_PROGRESS:
                stack.pop()
            elif task.status != PENDING or not task.deps:
                table[current] = STATUS_TO_UPSTREAM_MAP.get(task.status, "")
                stack.pop()
            elif current not in table:  # first visit: resolve the dependencies first
                table[current] = _IN_PROGRESS
                stack.extend(dep for dep in task.deps if dep not in table)
                budget -= len(task.deps)
            else:
                table[current] = max((_resolved(table, dep) for dep in task.deps), key=_SEVERITY.__getitem__)
                budget -= len(task.deps)
                stack.pop()
        return budget

    def result(self) -> CensusResult:
        return CensusResult(
            as_of=self.started,
            fingerprint=self.fingerprint,
            family_statuses={family: dict(counts) for family, counts in sorted(self.family_statuses.items())},
            upstream_of=self.upstream_of,
            upstream_counts=dict(self.upstream_counts),
        )


def _resolved(table: dict[str, str], task_id: str) -> str:
    value = table.get(task_id, "")
    return "" if value == _IN_PROGRESS else value
