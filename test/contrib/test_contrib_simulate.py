"""luigi.contrib.simulate.RunAnywayTarget: the task runs once in every run and is complete once it ran."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import luigi
from luigi.contrib.simulate import RunAnywayTarget
from luigi.interface import _WorkerSchedulerFactory

LUIGI = str(Path(sys.executable).parent / "luigi")


@pytest.fixture
def markers(tmp_path) -> type[RunAnywayTarget]:
    """A RunAnywayTarget keeping its marker files in this test's own directory."""

    class TestRunAnywayTarget(RunAnywayTarget):
        temp_dir = str(tmp_path / "simulate")

    return TestRunAnywayTarget


def make_tasks(markers: type[RunAnywayTarget], log: Path) -> tuple[type[luigi.Task], type[luigi.Task]]:
    """``Always`` (a RunAnywayTarget) and ``After`` (requires it); each appends its name to ``log``."""

    class Always(luigi.Task):
        def output(self):
            return markers(self)

        def run(self):
            with open(log, "a") as runs:
                runs.write("Always\n")
            self.output().done()

    class After(luigi.Task):
        def requires(self):
            return Always()

        def output(self):
            return markers(self)

        def run(self):
            assert self.input().exists()
            with open(log, "a") as runs:
                runs.write("After\n")
            self.output().done()

    return Always, After


@pytest.mark.parametrize(
    "options",
    [{"workers": 1}, {"workers": 2}, {"parallel_scheduling": True}],
    ids=["in-process", "task-slots", "parallel-scheduling"],
)
def test_the_task_runs_once_in_a_run_and_is_complete_after_it(tmp_path, markers, options):
    log = tmp_path / "runs.log"
    Always, After = make_tasks(markers, log)
    assert not After().complete()
    for _ in (1, 2):  # as in Luigi, a second build in the same process finds them done
        assert luigi.build([After()], local_scheduler=True, **options)
        assert log.read_text().splitlines() == ["Always", "After"]
        assert Always().complete() and After().complete()


def test_a_task_that_failed_before_done_is_not_complete(tmp_path, markers):
    class Broken(luigi.Task):
        def output(self):
            return markers(self)

        def run(self):
            raise RuntimeError("gave up before done()")

    assert not luigi.build([Broken()], local_scheduler=True)
    assert not Broken().complete()


def test_the_marker_lives_under_temp_dir_unique_pid_and_the_task_ids_md5(tmp_path, markers):
    class Marked(luigi.Task):
        def output(self):
            return markers(self)

        def run(self):
            self.output().done()

    assert luigi.build([Marked()], local_scheduler=True)
    target = Marked().output()
    assert str(target) == Marked().task_id
    path = Path(target.get_path())
    assert path.is_file()
    assert path.parent.parent == Path(markers.temp_dir)
    assert path.parent.name == str(RunAnywayTarget.unique.value)
    assert RunAnywayTarget.unique.value == os.getpid()


def test_directories_older_than_temp_time_are_removed_when_a_run_starts(tmp_path, markers):
    old, recent = Path(markers.temp_dir, "12345"), Path(markers.temp_dir, "23456")
    for directory in (old, recent):
        directory.mkdir(parents=True)
        (directory / "marker").touch()
    day_ago = time.time() - markers.temp_time - 60
    os.utime(old, (day_ago, day_ago))

    class Fresh(luigi.Task):
        def output(self):
            return markers(self)

        def run(self):
            self.output().done()

    assert luigi.build([Fresh()], local_scheduler=True)
    assert not old.exists()
    assert (recent / "marker").exists()


def test_an_unwritable_temp_dir_fails_the_task_naming_the_target_and_the_path(tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the markers should go")

    class Blocked(RunAnywayTarget):
        temp_dir = str(blocker)

    class Stuck(luigi.Task):
        def output(self):
            return Blocked(self)

        def run(self):
            self.output().done()

    factory = KeepingFactory()
    assert not luigi.build([Stuck()], local_scheduler=True, worker_scheduler_factory=factory)
    error = json.loads(factory.scheduler.fetch_error(Stuck().task_id)["error"])
    assert f"Could not mark {Stuck().task_id} as done: cannot write {blocker}" in error
    assert "set temp_dir on a RunAnywayTarget subclass to a writable directory" in error
    assert blocker.read_text() == "a file where the markers should go"


class KeepingFactory(_WorkerSchedulerFactory):
    """The usual local scheduler, kept so the test can read the failure explanation."""

    def create_local_scheduler(self):
        self.scheduler = super().create_local_scheduler()
        return self.scheduler


PIPELINE = """\
import os
import luigi
from luigi.contrib.simulate import RunAnywayTarget


class Markers(RunAnywayTarget):
    temp_dir = os.environ["MARKER_DIR"]


class Always(luigi.Task):
    def output(self):
        return Markers(self)

    def run(self):
        with open(os.environ["RUN_LOG"], "a") as runs:
            runs.write("ran\\n")
        self.output().done()
"""


def test_each_luigi_command_runs_the_task_again(tmp_path):
    module = f"simulate_pipeline_{os.getpid()}"
    (tmp_path / f"{module}.py").write_text(PIPELINE)
    (tmp_path / "luigi.cfg").write_text("[core]\nno_lock = true\n")
    log = tmp_path / "runs.log"
    env = dict(
        os.environ,
        PYTHONPATH=str(tmp_path),
        LUIGI_CONFIG_PATH=str(tmp_path / "luigi.cfg"),
        MARKER_DIR=str(tmp_path / "markers"),
        RUN_LOG=str(log),
    )
    argv = [LUIGI, "--module", module, "Always", "--local-scheduler"]
    for runs in (1, 2):
        done = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert log.read_text().splitlines() == ["ran"] * runs
