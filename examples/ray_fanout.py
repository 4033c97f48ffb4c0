"""Fan out over a Ray cluster: each batch of Monte Carlo samples runs on whichever Ray worker is free.

The luigi worker walks the graph and talks to the scheduler as ever; ``--worker-executor ray`` sends each
task's ``run()`` to the cluster, ``--workers`` at a time, each Ray task taking one CPU. The Ray workers must
be able to import this module (start the head where it is on ``PYTHONPATH``) and write where the outputs
go (here a local folder, so one machine, or a shared disk).

    PYTHONPATH=$PWD ray start --head --port 6379 --num-cpus 2
    luigi --module examples.ray_fanout EstimatePi --batches 20 --local-scheduler --workers 2 \\
        --worker-executor ray --ray-address 127.0.0.1:6379
    ray stop
"""

from __future__ import annotations

import json
import os
import random
import socket

import luigi
from examples._paths import output_dir


def hits_in_batch(batch: int, samples: int) -> int:
    """How many of ``samples`` seeded random points of the unit square fall in the quarter circle."""
    rng = random.Random(batch)
    return sum(1 for _ in range(samples) if rng.random() ** 2 + rng.random() ** 2 <= 1.0)


class SampleBatch(luigi.Task):
    """Throws one batch of points, noting the process and host that did it."""

    batch = luigi.IntParameter()
    samples = luigi.IntParameter(default=200_000)
    # Resolved where the pipeline starts: the Ray workers write where the luigi command said.
    root = luigi.Parameter(default=output_dir(), significant=False)

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(os.path.join(self.root, "ray_fanout", f"batch-{self.batch}.json"))

    def run(self) -> None:
        hits = hits_in_batch(self.batch, self.samples)
        self.set_status_message(f"{hits} of {self.samples} points inside")
        with self.output().open("w") as out:
            json.dump(
                {"hits": hits, "samples": self.samples, "pid": os.getpid(), "host": socket.gethostname()}, out
            )


class EstimatePi(luigi.Task):
    """Pi from every batch's hits, and the processes the batches ran in."""

    batches = luigi.IntParameter(default=20)
    root = luigi.Parameter(default=output_dir(), significant=False)

    def requires(self) -> list[SampleBatch]:
        return [SampleBatch(batch=batch, root=self.root) for batch in range(self.batches)]

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(os.path.join(self.root, "ray_fanout", f"pi-{self.batches}.json"))

    def run(self) -> None:
        records = []
        for target in self.input():
            with target.open() as record:
                records.append(json.load(record))
        hits = sum(record["hits"] for record in records)
        samples = sum(record["samples"] for record in records)
        ran_in = sorted({f"{record['host']}:{record['pid']}" for record in records})
        with self.output().open("w") as out:
            json.dump({"pi": 4 * hits / samples, "hits": hits, "ran_in": ran_in}, out)
