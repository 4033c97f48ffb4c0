"""A task and what surrounds it, for the visualiser: its detail with direct neighbours, and its graph.

``detail_of`` answers ``task_detail``: one panel in one call (cost: the task's own edges).
``GraphViews`` answers ``graph_view``: the task's dependency graph (or, inverted, its dependents) when
it has at most ``max_nodes`` tasks, and otherwise one entry per family with the edges between
families, so a browser never receives more than it can draw. Walks over big graphs are reused for
``refresh_interval`` seconds.
"""

from __future__ import annotations

import collections
import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from luigi.scheduler.model.records import TaskRecord
from luigi.scheduler.model.state import SchedulerState
from luigi.scheduler.views.census import MAX_AGE, Census, refresh_interval
from luigi.scheduler.views.serialize import serialize_task, unknown_stub
from luigi.task_status import BATCH_RUNNING, DISABLED, DONE, FAILED, PENDING, RUNNING, UNKNOWN

_NEIGHBOUR_ORDER = {
    s: r for r, s in enumerate((FAILED, DISABLED, RUNNING, BATCH_RUNNING, PENDING, UNKNOWN, DONE))
}
MAX_NEIGHBOURS = 1000
_CACHED_GRAPHS = 8


def detail_of(state: SchedulerState, census: Census, task_id: str, max_neighbours: int) -> dict[str, Any]:
    """The ``task_detail`` answer: the task, its error text and its direct neighbours ({} if unknown)."""
    if not 0 <= max_neighbours <= MAX_NEIGHBOURS:
        raise ValueError(
            f"task_detail: max_neighbours must be between 0 and {MAX_NEIGHBOURS}, got {max_neighbours}"
        )
    task = state.tasks.get(task_id)
    if task is None:
        return {}
    serialized = serialize_task(task, state.config.send_messages, include_deps=False)
    serialized.update(task_id=task.id, module=task.module)
    result = census.result
    if task.status == PENDING and result is not None and task.id in result.upstream_of:
        serialized["upstream_status"] = result.upstream_of[task.id]
    if task.status == FAILED and task.retry is not None and state.config.retry_delay >= 0:
        number = max(1, len(task.failure_times))  # as ``rules.policy.retry_number`` counts it
        serialized["retry"] = {"number": number, "of": task.retry_policy.retry_count, "at": task.retry}
    dependents = state.dependents.get(task_id, set())
    return {
        "task": serialized,
        "error": task.expl if task.expl not in (None, "") else None,
        "upstream": _neighbours(state, task.deps, max_neighbours),
        "num_upstream": len(task.deps),
        "downstream": _neighbours(state, dependents, max_neighbours),
        "num_downstream": len(dependents),
    }


def _neighbours(state: SchedulerState, ids: Iterable[str], limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` of ``ids``, most severe status first, each as a short summary."""

    def rank(task_id: str) -> tuple[int, str]:
        task = state.tasks.get(task_id)
        return (_NEIGHBOUR_ORDER.get(task.status if task is not None else UNKNOWN, 99), task_id)

    chosen = heapq.nsmallest(limit, ids, key=rank)
    return [_summary(state.tasks.get(task_id), task_id) for task_id in chosen]


def _summary(task: TaskRecord | None, task_id: str) -> dict[str, Any]:
    if task is None or not task.family:
        stub = unknown_stub(task_id)
        return {"task_id": task_id, "status": UNKNOWN, "name": stub["name"], "display_name": task_id}
    return {"task_id": task_id, "status": task.status, "name": task.family, "display_name": task.pretty_id}


@dataclass
class _Walk:
    as_of: float
    ids: list[str]
    neighbours: dict[str, list[str]]
    truncated: bool


class GraphViews:
    """Answers ``graph_view`` for one scheduler state (see the module docstring)."""

    def __init__(self, state: SchedulerState) -> None:
        self._state = state
        self._walks: collections.OrderedDict[tuple[str, bool, bool], _Walk] = collections.OrderedDict()

    def graph(self, task_id: str, inverse: bool, include_done: bool, max_nodes: int) -> dict[str, Any]:
        """The task's graph: every task when at most ``max_nodes``, per family otherwise ({} if unknown)."""
        if max_nodes < 0:
            raise ValueError(f"graph_view: max_nodes must be 0 or more, got {max_nodes}")
        state = self._state
        if task_id not in state.tasks:
            return {}
        walk = self._walk(task_id, inverse, include_done)
        answer: dict[str, Any] = {
            "task_id": task_id,
            "inverse": inverse,
            "include_done": include_done,
            "num_nodes": len(walk.ids),
            "truncated": walk.truncated,
        }
        if len(walk.ids) <= max_nodes:
            answer.update(collapsed=False, nodes=self._nodes(walk))
        else:
            answer.update(collapsed=True, **self._families(walk, inverse))
            answer["root_family"] = state.tasks[task_id].family
        return answer

    def _walk(self, task_id: str, inverse: bool, include_done: bool) -> _Walk:
        state = self._state
        key = (task_id, inverse, include_done)
        now = state.clock()
        cached = self._walks.get(key)
        if cached is not None and 0 <= now - cached.as_of < min(
            MAX_AGE, refresh_interval(len(cached.ids), 0.0)
        ):
            self._walks.move_to_end(key)
            return cached
        dependents = state.dependents
        follow: Callable[[TaskRecord], Iterable[str]] = (
            (lambda task: dependents.get(task.id, ())) if inverse else (lambda task: task.deps)
        )
        walk = _breadth_first(state, task_id, follow, include_done, now)
        self._walks[key] = walk
        while len(self._walks) > _CACHED_GRAPHS:
            self._walks.popitem(last=False)
        return walk

    def _nodes(self, walk: _Walk) -> dict[str, Any]:
        """Each task as a graph needs it: family, public parameters, status and its edges.

        The rest of a serialized task is one ``task_detail`` call away; leaving it out makes a graph of
        2,000 tasks several times cheaper to build and to send.
        """
        state = self._state
        nodes: dict[str, Any] = {}
        for task_id in walk.ids:
            task = state.tasks.get(task_id)
            if task is None or not task.family:
                stub = unknown_stub(task_id)
                nodes[task_id] = {
                    "name": stub["name"],
                    "status": UNKNOWN,
                    "params": stub["params"],
                    "deps": [],
                }
            else:
                nodes[task_id] = {
                    "name": task.family,
                    "status": task.status,
                    "params": task.public_params,
                    "deps": walk.neighbours.get(task_id, []),
                }
        return nodes

    def _families(self, walk: _Walk, inverse: bool) -> dict[str, Any]:
        """Status counts per family, and edges between families as [dependency, dependent, count]."""
        state = self._state
        family_of = {task_id: _family(state, task_id) for task_id in walk.ids}
        families: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        for task_id, family in family_of.items():
            task = state.tasks.get(task_id)
            families[family][task.status if task is not None else UNKNOWN] += 1
        edges: collections.Counter[tuple[str, str]] = collections.Counter()
        for task_id, neighbours in walk.neighbours.items():
            for other in neighbours:
                pair = (family_of[task_id], family_of.get(other, UNKNOWN))
                edges[(pair[0], pair[1]) if inverse else (pair[1], pair[0])] += 1
        return {
            "families": {family: dict(counts) for family, counts in sorted(families.items())},
            "edges": [[a, b, n] for (a, b), n in sorted(edges.items())],
        }


def _breadth_first(
    state: SchedulerState,
    root_id: str,
    follow: Callable[[TaskRecord], Iterable[str]],
    include_done: bool,
    now: float,
) -> _Walk:
    """Luigi's graph walk (as ``dep_graph`` does it), capped at ``max_graph_nodes``, without serializing."""
    cap = state.config.max_graph_nodes
    seen = {root_id}
    order: list[str] = []
    neighbours: dict[str, list[str]] = {}
    queue = collections.deque([root_id])
    truncated = False
    while queue:
        task_id = queue.popleft()
        order.append(task_id)
        task = state.tasks.get(task_id)
        if task is not None and task.family:
            found = sorted(follow(task))
            if not include_done:
                found = [n for n in found if not state.is_done(n)]
            neighbours[task_id] = found
            for other in found:
                if other not in seen:
                    seen.add(other)
                    queue.append(other)
        if len(order) >= cap:
            truncated = bool(queue)
            break
    kept = set(order)
    for task_id, found in neighbours.items():
        neighbours[task_id] = [n for n in found if n in kept]
    return _Walk(now, order, neighbours, truncated)


def _family(state: SchedulerState, task_id: str) -> str:
    task = state.tasks.get(task_id)
    if task is not None and task.family:
        return task.family
    return str(unknown_stub(task_id)["name"])
