"""What the scheduler's ``backfill_*`` RPC methods answer through: the backfills ``luigid`` runs, and how
far each has got as this scheduler's state shows it.

``luigid`` passes its ``luigi.schedules.backfill_service.BackfillService``; an in-process scheduler has
``NoBackfills``. ``range_progress`` is pure: it reads task records, writes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from luigi.scheduler.model.records import TaskRecord
from luigi.task_status import DONE, UNKNOWN

__all__ = ["BackfillDesk", "NoBackfills", "range_progress"]

_RANGE_FAMILIES = {"daily": "RangeDaily", "hourly": "RangeHourly"}


class BackfillDesk(Protocol):
    """The backfills behind ``backfill_start``, ``backfill_list``, ``backfill_cancel``, ``backfill_log``."""

    def backfill_start(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Record and start a backfill of ``arguments`` (``backfill_start``'s, by name)."""
        ...

    def backfill_list(
        self, progress: Callable[[list[dict[str, Any]]], dict[int, int]]
    ) -> list[dict[str, Any]]: ...

    def backfill_cancel(self, backfill_id: int) -> dict[str, Any]: ...

    def backfill_log(self, backfill_id: int) -> dict[str, Any]: ...


class NoBackfills:
    """No backfills: a scheduler in a worker's process runs no children."""

    def backfill_start(self, arguments: dict[str, Any]) -> dict[str, Any]:
        raise ValueError("this scheduler runs no backfills: start them on luigid (the central scheduler)")

    def backfill_list(
        self, progress: Callable[[list[dict[str, Any]]], dict[int, int]]
    ) -> list[dict[str, Any]]:
        return []

    def backfill_cancel(self, backfill_id: int) -> dict[str, Any]:
        raise ValueError(f"no backfill #{backfill_id}: this scheduler runs none")

    def backfill_log(self, backfill_id: int) -> dict[str, Any]:
        raise ValueError(f"no backfill #{backfill_id}: this scheduler runs none")


def range_progress(tasks: Mapping[str, TaskRecord], entries: list[dict[str, Any]]) -> dict[int, int]:
    """For each backfill in ``entries`` whose Range task the state holds, how many instances are done.

    A Range task requires only the instances that were missing when it was scheduled, so done is the
    range's size less those, plus those now DONE; a DONE Range task means all of them. A Range task that
    could not be scheduled (UNKNOWN) counts nothing.
    """
    wanted: dict[tuple[str, str, str, str] | None, dict[str, Any]] = {
        _range_key(entry): entry for entry in entries
    }
    found: dict[int, int] = {}
    if not wanted:
        return found
    for task in tasks.values():
        entry = wanted.get(_task_key(task))
        if entry is None or task.status == UNKNOWN or not _same_params(task, entry["params"]):
            continue  # UNKNOWN: its requires() failed, so its dependencies say nothing
        if task.status == DONE:
            done = entry["total"]
        else:
            deps = [tasks.get(dep) for dep in task.deps]
            done = (
                entry["total"] - len(deps) + sum(1 for dep in deps if dep is not None and dep.status == DONE)
            )
        found[entry["id"]] = max(found.get(entry["id"], 0), done)
    return found


def _range_key(entry: dict[str, Any]) -> tuple[str, str, str, str]:
    return (_RANGE_FAMILIES.get(entry["kind"], ""), entry["family"], entry["start"], entry["stop"])


def _task_key(task: TaskRecord) -> tuple[str, str, str, str] | None:
    if task.family not in _RANGE_FAMILIES.values():
        return None
    params = task.params
    return (task.family, str(params.get("of")), str(params.get("start")), str(params.get("stop")))


def _same_params(task: TaskRecord, wanted: dict[str, Any]) -> bool:
    raw = task.params.get("of_params") or "{}"
    try:
        given = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return False
    return bool(given == wanted)
