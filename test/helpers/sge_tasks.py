"""SGEJobTasks the Grid Engine tests submit: importable by the job process, as ``helpers.sge_tasks``."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import luigi
from luigi.contrib.sge import LocalSGEJobTask, SGEJobTask

JOB_OUTPUT = "hello from the Grid Engine job"


class WritesWhereItRan(SGEJobTask):
    """Writes ``text`` and what the job saw (pid, directory, Grid Engine's variables) to ``path``."""

    path = luigi.Parameter()
    text = luigi.Parameter(default="")

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(self.path)

    def work(self) -> None:
        print(JOB_OUTPUT)
        print("a warning that is not a failure", file=sys.stderr)
        seen = {name: os.environ.get(name) for name in ("JOB_ID", "JOB_NAME", "NSLOTS", "PE")}
        record = {"text": self.text, "pid": os.getpid(), "cwd": os.getcwd(), **seen}
        with self.output().open("w") as handle:
            json.dump(record, handle)


class WritesInTheWorker(LocalSGEJobTask):
    """The same work as ``WritesWhereItRan`` without Grid Engine."""

    path = luigi.Parameter()

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(self.path)

    def work(self) -> None:
        Path(self.path).write_text(str(os.getpid()))


class FailsInTheJob(SGEJobTask):
    """Raises from ``work()`` with a message the worker should report."""

    path = luigi.Parameter()

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(self.path)

    def work(self) -> None:
        raise RuntimeError("disk full on node seven")


class RunsUntilKilled(SGEJobTask):
    """Marks ``started`` from the job, then works until something kills it; never writes its output."""

    path = luigi.Parameter()
    started = luigi.Parameter()

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(self.path)

    def work(self) -> None:
        Path(self.started).write_text(str(os.getpid()))
        while not os.path.exists(self.path):  # never true: only qdel ends this job
            time.sleep(0.05)


class JobDirectoryNodesCannotSee(WritesWhereItRan):
    """Removes its job directory once written, as if ``shared_tmp_dir`` were not shared with the nodes."""

    def _init_local(self) -> None:
        super()._init_local()
        shutil.rmtree(self.tmp_dir)
