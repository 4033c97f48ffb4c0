"""Fan out over a Dask cluster: each chunk of CPU work runs on whichever Dask worker is free.

The luigi worker walks the graph and talks to the scheduler as ever; ``--worker-executor dask`` sends
each task's ``run()`` to the cluster, ``--workers`` at a time. The Dask workers must be able to import
this module and write where the outputs go (here a local folder, so one machine, or a shared disk).

    dask scheduler --host 127.0.0.1 --port 8786 &
    dask worker tcp://127.0.0.1:8786 --nworkers 2 --nthreads 1 &
    luigi --module examples.dask_fanout DaskFanOut --chunks 20 --local-scheduler --workers 4 \\
        --worker-executor dask --dask-scheduler-address tcp://127.0.0.1:8786
"""

from __future__ import annotations

import json
import os
import socket

import luigi
from examples._paths import output_dir


class Chunk(luigi.Task):
    """Sums the squares of one chunk of numbers, noting the process and host that did it."""

    chunk = luigi.IntParameter()
    size = luigi.IntParameter(default=300_000)
    # Resolved where the pipeline starts: the Dask workers write where the luigi command said.
    root = luigi.Parameter(default=output_dir(), significant=False)

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(os.path.join(self.root, "dask_fanout", f"chunk-{self.chunk}.json"))

    def run(self) -> None:
        start = self.chunk * self.size
        total = sum(n * n for n in range(start, start + self.size))
        self.set_status_message(f"summed {self.size} squares")
        with self.output().open("w") as out:
            json.dump({"total": total, "pid": os.getpid(), "host": socket.gethostname()}, out)


class DaskFanOut(luigi.Task):
    """Adds up every chunk, and lists the processes the chunks ran in."""

    chunks = luigi.IntParameter(default=20)
    root = luigi.Parameter(default=output_dir(), significant=False)

    def requires(self) -> list[Chunk]:
        return [Chunk(chunk=chunk, root=self.root) for chunk in range(self.chunks)]

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(os.path.join(self.root, "dask_fanout", f"total-{self.chunks}.json"))

    def run(self) -> None:
        records = []
        for target in self.input():
            with target.open() as record:
                records.append(json.load(record))
        ran_in = sorted({f"{record['host']}:{record['pid']}" for record in records})
        with self.output().open("w") as out:
            json.dump({"total": sum(record["total"] for record in records), "ran_in": ran_in}, out)
