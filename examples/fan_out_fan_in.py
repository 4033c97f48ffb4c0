"""Fan-out/fan-in with a shared resource and priorities.

Every ``LoadShard`` holds one unit of the ``warehouse`` resource (capacity 1 unless ``[resources]`` says
otherwise), so loads never overlap; urgent shards carry a higher priority and run first.

    luigi --module examples.fan_out_fan_in Publish --shards 8 --local-scheduler --workers 4
"""

from __future__ import annotations

import json

import luigi
from examples._paths import output_path


class ExtractShard(luigi.Task):
    """Extracts one shard of source rows (runs in parallel, no shared resource)."""

    shard = luigi.IntParameter()

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(output_path("fan", "extract", f"{self.shard}.json"))

    def run(self) -> None:
        rows = [{"shard": self.shard, "value": self.shard * 10 + i} for i in range(10)]
        with self.output().open("w") as out:
            json.dump(rows, out)


class LoadShard(luigi.Task):
    """Loads one extracted shard into the warehouse: one writer at a time."""

    shard = luigi.IntParameter()
    urgent = luigi.BoolParameter(default=False)
    resources = {"warehouse": 1}

    @property
    def priority(self) -> int:  # type: ignore[override]
        return 100 if self.urgent else 0

    def requires(self) -> ExtractShard:
        return ExtractShard(shard=self.shard)

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(output_path("fan", "load", f"{self.shard}.done"))

    def run(self) -> None:
        with self.input().open("r") as rows_file:
            total = sum(row["value"] for row in json.load(rows_file))
        with self.output().open("w") as out:
            out.write(f"{total}\n")


class Publish(luigi.Task):
    """Publishes the grand total once every shard is loaded."""

    shards = luigi.IntParameter(default=8)

    def requires(self) -> list[LoadShard]:
        return [LoadShard(shard=i, urgent=(i % 4 == 0)) for i in range(self.shards)]

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(output_path("fan", f"published-{self.shards}.txt"))

    def run(self) -> None:
        total = 0
        for target in self.input():
            with target.open("r") as part:
                total += int(part.read())
        with self.output().open("w") as out:
            out.write(f"total {total}\n")
