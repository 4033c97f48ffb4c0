"""Tasks the cluster executors' tests (Dask, Ray) run on the cluster: importable there, as
``helpers.dask_tasks``.

Each records where it ran (pid and host) in its output, so a test can tell which process ran it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import luigi


def recorded_pids(root: Path) -> list[int]:
    """The pids that the ``RecordsWhereItRan`` tasks under ``root`` recorded, in file order."""
    return [json.loads(path.read_text())["pid"] for path in sorted(root.glob("pid-*.json"))]


def where_it_ran() -> dict[str, object]:
    return {"pid": os.getpid(), "host": socket.gethostname()}


class RecordsWhereItRan(luigi.Task):
    """Writes the pid and host it ran in; ``seconds`` of work first (after marking that it started)."""

    root = luigi.Parameter()
    number = luigi.IntParameter()
    seconds = luigi.FloatParameter(default=0.2)

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(str(Path(self.root) / f"pid-{self.number}.json"))

    def run(self) -> None:
        started = Path(self.root) / f"started-{self.number}-{os.getpid()}"
        started.touch()
        self.set_status_message(f"working on {self.number}")
        self.set_progress_percentage(50)
        time.sleep(self.seconds)
        with self.output().open("w") as out:
            json.dump(where_it_ran(), out)


class FansOutOnDask(luigi.WrapperTask):
    """``count`` independent ``RecordsWhereItRan`` tasks."""

    root = luigi.Parameter()
    count = luigi.IntParameter()
    seconds = luigi.FloatParameter(default=0.2)

    def requires(self) -> list[RecordsWhereItRan]:
        return [RecordsWhereItRan(self.root, number, self.seconds) for number in range(self.count)]


class FailsOnDask(luigi.Task):
    """Raises in ``run()``: the luigi worker must see the Dask worker's traceback."""

    root = luigi.Parameter()

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(str(Path(self.root) / "never"))

    def run(self) -> None:
        raise ValueError(f"broken on purpose in pid {os.getpid()}")


class YieldsADependency(luigi.Task):
    """Needs a ``RecordsWhereItRan`` found only while running (a dynamic dependency); copies its record."""

    root = luigi.Parameter()

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(str(Path(self.root) / "parent.json"))

    def run(self):  # type: ignore[no-untyped-def]
        dependency = yield RecordsWhereItRan(self.root, 99, 0.0)
        with dependency.open() as record, self.output().open("w") as out:
            json.dump({"dependency": json.load(record), "parent": where_it_ran()}, out)


class SleepsPastItsTimeout(luigi.Task):
    """Sleeps far past its ``worker_timeout``, writing its pid first so a test can see it was killed."""

    root = luigi.Parameter()
    worker_timeout = 1.0

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(str(Path(self.root) / "slept"))

    def run(self) -> None:
        (Path(self.root) / "sleeper.pid").write_text(str(os.getpid()))
        time.sleep(60)
        self.output().open("w").close()


class MaybeTimed(luigi.Task):
    """With ``timed``, the task has a timeout, so it runs in a task slot forked on its Dask worker."""

    root = luigi.Parameter()
    timed = luigi.BoolParameter()

    @property
    def worker_timeout(self) -> float | None:  # type: ignore[override]
        return 60.0 if self.timed else None


class WaitsForItsStartEvent(MaybeTimed):
    """Finishes only once ``root/start-seen`` exists, which the test's START handler (in the worker) makes."""

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(str(Path(self.root) / f"finished-{self.timed}"))

    def run(self) -> None:
        seen = Path(self.root) / "start-seen"
        give_up = time.monotonic() + 30
        while not seen.exists():
            if time.monotonic() > give_up:
                raise RuntimeError("the START event did not reach the luigi worker while the task ran")
            time.sleep(0.02)
        self.output().open("w").close()


class ListensOnDask(MaybeTimed):
    """Takes one scheduler message, answers it and writes its content (``timed``: from a task slot)."""

    accepts_messages = True

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(str(Path(self.root) / f"heard-{self.timed}"))

    def run(self) -> None:
        message = self.scheduler_messages.get(timeout=30)
        message.respond(f"heard {message.content} in {os.getpid()}")
        with self.output().open("w") as out:
            out.write(str(message))


class RunsUntilCancelled(MaybeTimed):
    """Starts a child (``sleep 300``), writes both pids to ``root/pids-<timed>``, then waits for
    ``root/stop`` (a test makes it at its end: Dask cannot stop a run in a Dask worker's thread)."""

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(str(Path(self.root) / f"never-{self.timed}"))

    def run(self) -> None:
        child = subprocess.Popen(["sleep", "300"])
        (Path(self.root) / f"pids-{self.timed}").write_text(f"{os.getpid()}\n{child.pid}\n")
        stop = Path(self.root) / "stop"
        try:
            while not stop.exists():
                time.sleep(0.05)
        finally:
            child.kill()
            child.wait()


class RecordsItsTraceParent(luigi.Task):
    """Writes the pid it ran in and the ``TRACEPARENT`` its run was given ([otel])."""

    root = luigi.Parameter()

    def output(self) -> luigi.LocalTarget:
        return luigi.LocalTarget(str(Path(self.root) / "traceparent.json"))

    def run(self) -> None:
        with self.output().open("w") as out:
            json.dump({**where_it_ran(), "traceparent": os.environ.get("TRACEPARENT")}, out)
