"""LSFJobTasks the LSF tests submit: importable by the job process, as ``helpers.lsf_tasks``."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import luigi
from luigi.contrib.lsf import LocalLSFJobTask, LSFJobTask


class WritesWhereItRan(LSFJobTask):
    """Writes ``text``, its pid and working directory to ``path`` from the job, and a warning to stderr."""

    path = luigi.Parameter()
    text = luigi.Parameter(default="")

    def output(self) -> luigi.LocalTarget:  # type: ignore[override]
        return luigi.LocalTarget(self.path)

    def work(self) -> None:
        print("a warning that is not a failure", file=sys.stderr)
        record = {"text": self.text, "pid": os.getpid(), "cwd": os.getcwd()}
        with self.output().open("w") as handle:
            json.dump(record, handle)


class WritesInTheWorker(LocalLSFJobTask):
    """The same work as ``WritesWhereItRan`` without LSF."""

    path = luigi.Parameter()

    def output(self) -> luigi.LocalTarget:  # type: ignore[override]
        return luigi.LocalTarget(self.path)

    def work(self) -> None:
        self.output().open("w").close()


class FailsInTheJob(LSFJobTask):
    """Raises from ``work()`` with a message the worker should report."""

    path = luigi.Parameter()

    def output(self) -> luigi.LocalTarget:  # type: ignore[override]
        return luigi.LocalTarget(self.path)

    def work(self) -> None:
        raise RuntimeError("disk full on node seven")


class RunsUntilKilled(LSFJobTask):
    """Marks ``started`` from the job, then works until something kills it; never writes its output."""

    path = luigi.Parameter()
    started = luigi.Parameter()

    def output(self) -> luigi.LocalTarget:  # type: ignore[override]
        return luigi.LocalTarget(self.path)

    def work(self) -> None:
        Path(self.started).write_text(str(os.getpid()))
        while not os.path.exists(self.path):  # never true: only a bkill ends this job
            time.sleep(0.05)
