"""Schedules run by ``luigid``: ``[schedule:<name>]`` sections, each starting ``luigi <command>`` on time.

``spec`` reads and checks the sections, ``timing`` decides which slot is due (pure, clock passed in),
``store`` keeps claims, runs and pause flags durable, ``runner`` runs one child process with a bounded
log, and ``service`` ties them to ``luigid``'s asyncio loop and answers the ``schedule_*`` RPC methods.
This module only re-exports.
"""

from __future__ import annotations

from luigi.schedules.service import ScheduleService, exit_meaning, schedules_directory
from luigi.schedules.spec import ScheduleConfigError, ScheduleSpec, read_schedules

__all__ = [
    "ScheduleConfigError",
    "ScheduleService",
    "ScheduleSpec",
    "exit_meaning",
    "read_schedules",
    "schedules_directory",
]
