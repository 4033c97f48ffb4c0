"""A daily report over an external daily log, backfilled from cron with RangeDaily.

    # make the (external) input for a few days, then backfill every missing report:
    python -m examples.daily_report make-logs 2024-01-01 2024-01-07
    luigi --module examples.daily_report RangeDaily --of DailyReport \\
        --start 2024-01-01 --stop 2024-01-08 --days-back 5000 --local-scheduler

As in Luigi, ``RangeDaily`` only looks ``--days-back`` days (default 100) behind today, so a backfill of
old dates says how far back to reach; a daily cron line over recent days needs no such flag.
"""

from __future__ import annotations

import datetime
import json
import random
import sys

import luigi
from examples._paths import output_path


class DailyLog(luigi.ExternalTask):
    """A day's access log, written by some other system: the pipeline only checks that it exists."""

    date = luigi.DateParameter()

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(output_path("daily", "logs", f"{self.date:%Y-%m-%d}.log"))


class DailyReport(luigi.Task):
    """Counts requests per status code for one day, as JSON."""

    date = luigi.DateParameter()

    def requires(self) -> DailyLog:
        return DailyLog(date=self.date)

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(output_path("daily", "reports", f"{self.date:%Y-%m-%d}.json"))

    def run(self) -> None:
        by_status: dict[str, int] = {}
        with self.input().open("r") as log:
            for line in log:
                status = line.split()[1]
                by_status[status] = by_status.get(status, 0) + 1
        with self.output().open("w") as out:
            json.dump({"date": str(self.date), "requests": by_status}, out, sort_keys=True)


def make_logs(first: datetime.date, last: datetime.date) -> None:
    """Writes a fake access log for every day from first to last, inclusive."""
    day = first
    while day <= last:
        rng = random.Random(day.toordinal())
        with DailyLog(date=day).output().open("w") as log:
            for i in range(100):
                log.write(f"/page/{i % 7} {rng.choice(['200', '200', '200', '404', '500'])}\n")
        day += datetime.timedelta(days=1)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "make-logs":
        sys.exit("usage: python -m examples.daily_report make-logs FIRST_DATE LAST_DATE")
    make_logs(datetime.date.fromisoformat(sys.argv[2]), datetime.date.fromisoformat(sys.argv[3]))
