"""JSON shapes of tasks and graphs as the RPC API returns them (LUIGI_COMPAT f.2 "Serialized task")."""

from __future__ import annotations

import collections
import logging
import re
from collections.abc import Callable, Iterable
from typing import Any

from luigi.scheduler.model.records import TaskRecord
from luigi.scheduler.model.state import SchedulerState
from luigi.task_status import DISABLED, RUNNING, UNKNOWN

logger = logging.getLogger("luigi.scheduler")

_FAMILY_PREFIX = re.compile(r"([^(_]+)[(_]")


def serialize_task(
    task: TaskRecord, send_messages: bool, include_deps: bool = True, deps: Iterable[str] | None = None
) -> dict[str, Any]:
    """A task as the visualiser and API clients see it."""
    result: dict[str, Any] = {
        "display_name": task.pretty_id,
        "status": task.status,
        "workers": list(task.workers),
        "worker_running": task.worker_running,
        "time_running": task.time_running,
        "start_time": task.created,
        "last_updated": task.updated,
        "params": task.public_params,
        "name": task.family,
        "priority": task.priority,
        "resources": dict(task.resources),
        "resources_running": None if task.resources_running is None else dict(task.resources_running),
        "tracking_url": task.tracking_url,
        "status_message": task.status_message,
        "progress_percentage": task.progress_percentage,
    }
    if task.status == DISABLED:
        result["re_enable_able"] = task.scheduler_disable_time is not None
    if include_deps:
        result["deps"] = sorted(task.deps if deps is None else deps)
    if send_messages and task.status == RUNNING:
        result["accepts_messages"] = task.accepts_messages
    return result


def unknown_stub(task_id: str) -> dict[str, Any]:
    """What a graph shows for a dependency the scheduler knows nothing about."""
    match = _FAMILY_PREFIX.match(task_id)
    return {
        "deps": [],
        "status": UNKNOWN,
        "workers": [],
        "start_time": UNKNOWN,
        "params": {"task_id": task_id},
        "name": match.group(1) if match else UNKNOWN,
        "display_name": task_id,
        "priority": 0,
    }


def traverse_graph(
    state: SchedulerState,
    root_id: str,
    seen: set[str] | None = None,
    edges: Callable[[TaskRecord], Iterable[str]] | None = None,
    include_done: bool = True,
) -> dict[str, dict[str, Any]]:
    """Breadth-first from ``root_id`` over ``edges`` (dependencies by default), capped at max_graph_nodes."""
    if seen is None:
        seen = set()
    elif root_id in seen:
        return {}
    follow = edges or (lambda task: task.deps)
    send_messages = state.config.send_messages
    seen.add(root_id)
    serialized: dict[str, dict[str, Any]] = {}
    queue = collections.deque([root_id])
    while queue:
        task_id = queue.popleft()
        task = state.tasks.get(task_id)
        if task is None or not task.family:
            logger.debug("Missing task for id [%s]", task_id)
            serialized[task_id] = unknown_stub(task_id)
        else:
            neighbours = sorted(follow(task))
            if not include_done:
                neighbours = [n for n in neighbours if not state.is_done(n)]
            serialized[task_id] = serialize_task(task, send_messages, deps=neighbours)
            for neighbour in neighbours:
                if neighbour not in seen:
                    seen.add(neighbour)
                    queue.append(neighbour)
        if task_id != root_id:
            del serialized[task_id]["display_name"]
        if len(serialized) >= state.config.max_graph_nodes:
            break
    return serialized
