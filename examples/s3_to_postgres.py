"""From S3 to PostgreSQL: daily CSV objects loaded into a table, then a report queried from it.

    luigi --module examples.s3_to_postgres SalesReport --start 2024-01-01 --stop 2024-01-04

Each day's ``s3://<bucket>/sales/<day>.csv`` (lines ``region,amount``) is an external input; ``LoadSales``
copies it into the ``sales`` table once (the marker table remembers it, so a rerun loads nothing twice);
``SalesReport`` sums the amounts per region over the days into a local TSV. The settings come from
``[warehouse]`` (host, port, database, user, password, bucket) and ``[s3]`` (credentials, and
``endpoint_url`` for MinIO or a test server). ``python -m examples.s3_to_postgres upload 2024-01-01
2024-01-03`` puts sample objects in the bucket. Needs ``pip install 'luigi[s3,postgres]'``.
"""

from __future__ import annotations

import csv
import datetime
import io
import random
import sys
from collections.abc import Iterator

import luigi
from examples._paths import output_path
from luigi.contrib.postgres import CopyToTable, PostgresTarget
from luigi.contrib.s3 import S3Client, S3Target

REGIONS = ("north", "south", "east", "west")


class warehouse(luigi.Config):  # noqa: N801 - a config section is named as Luigi names them
    """``[warehouse]``: where the CSV objects are and the database they are loaded into."""

    bucket = luigi.Parameter(default="sales-data")
    host = luigi.Parameter(default="localhost")
    port = luigi.IntParameter(default=5432)
    database = luigi.Parameter(default="warehouse")
    user = luigi.Parameter(default="luigi")
    password = luigi.Parameter(default="", visibility=luigi.parameter.ParameterVisibility.PRIVATE)


def sales_key(day: datetime.date) -> str:
    return f"s3://{warehouse().bucket}/sales/{day:%Y-%m-%d}.csv"


class SalesCsv(luigi.ExternalTask):
    """One day's sales, written to S3 by another system."""

    day = luigi.DateParameter()

    def output(self) -> S3Target:
        return S3Target(sales_key(self.day))


class LoadSales(CopyToTable):
    """Copy one day's CSV into ``sales``, once."""

    day = luigi.DateParameter()
    table = "sales"
    columns = [("day", "DATE"), ("region", "TEXT"), ("amount", "NUMERIC(12, 2)")]

    @property
    def host(self) -> str:
        return warehouse().host

    @property
    def port(self) -> int:
        return warehouse().port

    @property
    def database(self) -> str:
        return warehouse().database

    @property
    def user(self) -> str:
        return warehouse().user

    @property
    def password(self) -> str:
        return warehouse().password

    def requires(self) -> SalesCsv:
        return SalesCsv(self.day)

    def rows(self) -> Iterator[tuple[str, str, str]]:
        with self.input().open("r") as handle:
            for region, amount in csv.reader(handle):
                yield (self.day.isoformat(), region, amount)


class SalesReport(luigi.Task):
    """Total sales per region over ``[start, stop)``, queried from the loaded table."""

    start = luigi.DateParameter()
    stop = luigi.DateParameter()

    def days(self) -> list[datetime.date]:
        count = (self.stop - self.start).days
        return [self.start + datetime.timedelta(days=n) for n in range(count)]

    def requires(self) -> list[LoadSales]:
        return [LoadSales(day) for day in self.days()]

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(output_path("s3_to_postgres", f"report-{self.start}-{self.stop}.tsv"))

    def run(self) -> None:
        target: PostgresTarget = self.requires()[0].output()
        connection = target.connect()
        try:
            cursor = connection.cursor()
            cursor.execute(
                "SELECT region, SUM(amount) FROM sales WHERE day >= %s AND day < %s GROUP BY region "
                "ORDER BY region",
                (self.start, self.stop),
            )
            totals = cursor.fetchall()
        finally:
            connection.close()
        with self.output().open("w") as report:
            for region, total in totals:
                report.write(f"{region}\t{total}\n")


def upload(first: str, last: str, seed: int = 7) -> None:
    """Put sample CSV objects for each day from ``first`` to ``last`` (inclusive) in the bucket."""
    client = S3Client()
    rng = random.Random(seed)
    day = datetime.date.fromisoformat(first)
    while day <= datetime.date.fromisoformat(last):
        text = io.StringIO()
        writer = csv.writer(text)
        for region in REGIONS:
            writer.writerow([region, f"{rng.randint(100, 9999) / 100:.2f}"])
        client.put_string(text.getvalue(), sales_key(day))
        day += datetime.timedelta(days=1)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "upload":
        sys.exit("usage: python -m examples.s3_to_postgres upload FIRST_DAY LAST_DAY")
    upload(sys.argv[2], sys.argv[3])
