"""The scheduler's read-only RPC methods: Luigi's graph, list and search calls, and the visualiser's views.

A mixin of ``Scheduler`` (``core``), kept apart so that the facade of the changing calls stays short; each
method is thin over ``views``.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from luigi.scheduler.model.state import SchedulerState
from luigi.scheduler.views import queries
from luigi.scheduler.views.census import Census
from luigi.scheduler.views.neighbourhood import GraphViews, detail_of
from luigi.scheduler.views.search import NameIndex
from luigi.scheduler.views.serialize import traverse_graph
from luigi.scheduler.views.task_pages import PageQuery, TaskPages


class ReadMethods:
    """Luigi's read-only RPC methods and the visualiser's (``task_counts``, ``task_page``, ...)."""

    _state: SchedulerState

    if TYPE_CHECKING:

        def prune(self) -> None: ...

    # The visualiser's views, made at their first use: a pipeline run without a visualiser needs none.
    @functools.cached_property
    def _census(self) -> Census:
        return Census(self._state)

    @functools.cached_property
    def _names(self) -> NameIndex:
        return NameIndex(self._state)

    @functools.cached_property
    def _pages(self) -> TaskPages:
        return TaskPages(self._state, self._census, self._names)

    @functools.cached_property
    def _graphs(self) -> GraphViews:
        return GraphViews(self._state)

    # -- views ---------------------------------------------------------------------------------------------

    def graph(self, **kwargs: Any) -> dict[str, Any]:
        """Every task with its dependencies."""
        self.prune()
        serialized: dict[str, Any] = {}
        seen: set[str] = set()
        for task_id in list(self._state.tasks):
            serialized.update(traverse_graph(self._state, task_id, seen))
        return serialized

    def dep_graph(self, task_id: str, include_done: bool = True, **kwargs: Any) -> dict[str, Any]:
        """The task and everything it depends on, breadth first (at most ``max_graph_nodes``)."""
        self.prune()
        if task_id not in self._state.tasks:
            return {}
        return traverse_graph(self._state, task_id, include_done=include_done)

    def inverse_dep_graph(self, task_id: str, include_done: bool = True, **kwargs: Any) -> dict[str, Any]:
        """The task and everything that depends on it, breadth first."""
        self.prune()
        if task_id not in self._state.tasks:
            return {}
        dependents = self._state.dependents
        return traverse_graph(
            self._state, task_id, edges=lambda task: dependents.get(task.id, ()), include_done=include_done
        )

    def task_list(
        self,
        status: str = "",
        upstream_status: str = "",
        limit: bool = True,
        search: str | None = None,
        max_shown_tasks: int | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Tasks filtered by status, upstream status and search terms; ``{"num_tasks": N}`` past the limit.

        Without ``search``, a status holding more tasks than the limit answers at once, before pruning.
        """
        if not search:
            too_many = _over_the_limit(self._state, status, upstream_status, limit, max_shown_tasks)
            if too_many is not None:
                return too_many
        self.prune()
        return queries.task_list(
            self._state, status, upstream_status, limit, search, max_shown_tasks, self._names
        )

    def resource_list(self) -> list[dict[str, Any]]:
        """Configured resources with their capacity, use and consumers."""
        self.prune()
        return queries.resource_list(self._state)

    def task_search(self, task_str: str, **kwargs: Any) -> dict[str, Any]:
        """Tasks whose id contains ``task_str``, grouped by status."""
        self.prune()
        return queries.task_search(self._state, task_str)

    def fetch_error(self, task_id: str, **kwargs: Any) -> dict[str, Any]:
        """The explanation a task failed with, and what identifies it."""
        return queries.fetch_error(self._state, task_id)

    # -- the visualiser's views (not Luigi's RPC methods; see luigi/scheduler/census.py) -------------

    def task_counts(self) -> dict[str, Any]:
        """Tasks per status and family, and pending tasks per upstream status (counted in slices)."""
        self.prune()
        self._census.advance()
        return self._census.counts()

    def task_page(
        self,
        status: str = "",
        upstream_status: str = "",
        family: str = "",
        search: str | None = "",
        sort_by: str = "",
        sort_desc: bool = False,
        offset: int = 0,
        page_size: int = 50,
        max_shown_tasks: int | None = None,
    ) -> dict[str, Any]:
        """One page of the task list, filtered, sorted and counted by the scheduler."""
        self.prune()
        query = PageQuery(
            status, upstream_status, family, search or "", sort_by, sort_desc, offset, page_size
        )
        return self._pages.page(query, max_shown_tasks)

    def task_detail(self, task_id: str, max_neighbours: int = 100) -> dict[str, Any]:
        """One task with its error and its direct neighbours (``{}`` for an unknown task)."""
        return detail_of(self._state, self._census, task_id, max_neighbours)

    def graph_view(
        self, task_id: str, inverse: bool = False, include_done: bool = True, max_nodes: int = 2000
    ) -> dict[str, Any]:
        """The task's dependency graph (or dependents), per family when it has more than ``max_nodes``."""
        self.prune()
        return self._graphs.graph(task_id, inverse, include_done, max_nodes)


def _over_the_limit(
    state: SchedulerState, status: str, upstream_status: str, limit: bool, max_shown_tasks: int | None
) -> dict[str, int] | None:
    """``{"num_tasks": N}`` when ``status`` alone holds more tasks than ``task_list`` shows, else None."""
    cap = max_shown_tasks or state.config.max_shown_tasks
    count = len(state.by_status.get(status, {})) if status else len(state.tasks)
    if limit and count > cap:
        return {"num_tasks": -1 if upstream_status else count}
    return None
