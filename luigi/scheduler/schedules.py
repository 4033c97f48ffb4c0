"""What the scheduler's ``schedule_*`` RPC methods answer through: the schedules ``luigid`` runs.

``luigid`` passes its ``luigi.schedules.ScheduleService``; an in-process scheduler has ``NoSchedules``,
which lists none and names the fix for the others. The scheduler itself starts no process.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["NoSchedules", "ScheduleDesk"]


class ScheduleDesk(Protocol):
    """The schedules behind the ``schedule_*`` RPC methods (list, log, pause, resume, trigger)."""

    def schedule_list(self) -> list[dict[str, Any]]: ...

    def schedule_log(self, name: str, run: int) -> dict[str, Any]: ...

    def schedule_pause(self, name: str) -> dict[str, Any]: ...

    def schedule_resume(self, name: str) -> dict[str, Any]: ...

    def schedule_trigger(self, name: str) -> dict[str, Any]: ...

    def schedule_late_totals(self) -> dict[str, int]:
        """How many runs of each schedule were late, ever (not an RPC method: ``/metrics`` reads it)."""
        ...


class NoSchedules:
    """No schedules: a scheduler in a worker's process, or a ``luigid`` configured with none."""

    def schedule_list(self) -> list[dict[str, Any]]:
        return []

    def schedule_log(self, name: str, run: int) -> dict[str, Any]:
        raise _none(name)

    def schedule_pause(self, name: str) -> dict[str, Any]:
        raise _none(name)

    def schedule_resume(self, name: str) -> dict[str, Any]:
        raise _none(name)

    def schedule_trigger(self, name: str) -> dict[str, Any]:
        raise _none(name)

    def schedule_late_totals(self) -> dict[str, int]:
        return {}


def _none(name: str) -> ValueError:
    return ValueError(
        f"no schedule named {name!r}: this scheduler runs none "
        "(declare [schedule:<name>] sections in luigid's configuration)"
    )
