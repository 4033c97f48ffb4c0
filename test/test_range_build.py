"""Backfills end to end: building a RangeDaily runs exactly the missing days, from Python and the CLI."""

from __future__ import annotations

import json
import os
from datetime import date, datetime, timezone

from luigi import interface
from luigi.local_target import LocalTarget
from luigi.parameter import DateParameter, Parameter
from luigi.task import Task
from luigi.tools.range import RangeDaily

NOW = int(datetime(2024, 1, 10, 12, 30, tzinfo=timezone.utc).timestamp())


class DailyExport(Task):
    """Writes ``<root>/export-<day>.txt`` and notes each run in ``<root>/runs.log``."""

    root = Parameter()
    day = DateParameter()

    def output(self):
        return LocalTarget(os.path.join(self.root, f"export-{self.day}.txt"))

    def run(self):
        with open(os.path.join(self.root, "runs.log"), "a") as log:
            log.write(f"{self.day}\n")
        with self.output().open("w") as out:
            out.write("exported\n")


def existing_export(root, day: date) -> None:
    with open(os.path.join(root, f"export-{day}.txt"), "w") as out:
        out.write("exported earlier\n")


def runs(root) -> list[str]:
    """The days that ran, sorted: the order within one build is the scheduler's, not the range's."""
    log = os.path.join(root, "runs.log")
    if not os.path.exists(log):
        return []
    with open(log) as handle:
        return sorted(handle.read().split())


def test_building_a_range_daily_runs_exactly_the_missing_days(tmp_path):
    existing_export(tmp_path, date(2024, 1, 2))
    existing_export(tmp_path, date(2024, 1, 4))
    backfill = RangeDaily(
        of=DailyExport,
        of_params={"root": str(tmp_path)},
        start=date(2024, 1, 1),
        stop=date(2024, 1, 7),
        now=NOW,
    )
    assert interface.build([backfill], local_scheduler=True) is True
    assert runs(tmp_path) == ["2024-01-01", "2024-01-03", "2024-01-05", "2024-01-06"]
    assert all((tmp_path / f"export-2024-01-0{day}.txt").exists() for day in range(1, 7))


def test_building_a_complete_range_again_runs_nothing(tmp_path):
    for day in range(1, 4):
        existing_export(tmp_path, date(2024, 1, day))
    backfill = RangeDaily(
        of=DailyExport,
        of_params={"root": str(tmp_path)},
        start=date(2024, 1, 1),
        stop=date(2024, 1, 4),
        now=NOW,
    )
    assert interface.build([backfill], local_scheduler=True) is True
    assert runs(tmp_path) == []


def test_task_limit_bounds_how_many_days_one_build_runs(tmp_path):
    backfill = RangeDaily(
        of=DailyExport, of_params={"root": str(tmp_path)}, start=date(2024, 1, 1), task_limit=3, now=NOW
    )
    assert interface.build([backfill], local_scheduler=True) is True
    assert runs(tmp_path) == ["2024-01-01", "2024-01-02", "2024-01-03"]


def test_a_cron_style_command_line_backfills_the_missing_days(tmp_path):
    existing_export(tmp_path, date(2024, 1, 9))
    argv = ["RangeDaily", "--of", "DailyExport", "--of-params", json.dumps({"root": str(tmp_path)}),
            "--start", "2024-01-08", "--now", str(NOW), "--local-scheduler", "--no-lock"]  # fmt: skip
    assert interface.run(argv) is True
    assert runs(tmp_path) == ["2024-01-08", "2024-01-10"]
