"""The summary of real runs: ``build(..., local_scheduler=True, detailed_summary=True)``, a real worker."""

from __future__ import annotations

import textwrap
from types import SimpleNamespace

import pytest

import luigi.interface  # noqa: F401 - registers [core] before the conftest snapshots the task registry
from luigi.execution_summary import LuigiRunResult, LuigiStatusCode
from luigi.interface import _WorkerSchedulerFactory, build
from luigi.local_target import LocalTarget
from luigi.parameter import IntParameter
from luigi.setup_logging import InterfaceLogging
from luigi.task import ExternalTask, Task, WrapperTask


@pytest.fixture(autouse=True)
def _quiet_client_logging(monkeypatch, tmp_path):
    """Keep the client logging set-up out of pytest's process, and write outputs under tmp_path."""
    monkeypatch.setattr(InterfaceLogging, "_configured", True)
    monkeypatch.chdir(tmp_path)


def framed(body: str) -> str:
    return (
        "\n===== Luigi Execution Summary =====\n\n"
        + textwrap.dedent(body).strip("\n")
        + "\n\n===== Luigi Execution Summary =====\n"
    )


@pytest.fixture
def t() -> SimpleNamespace:
    """The tasks these tests use, defined per test so the registry restore drops them afterwards."""

    class Written(Task):
        """Writes its own output file."""

        name = IntParameter(default=0)

        def output(self):
            return LocalTarget(f"{self.task_family}-{self.name}.txt")

        def run(self):
            with self.output().open("w") as out:
                out.write("done")

    class Base(Written):
        pass

    class Top(Written):
        def requires(self):
            return Base()

    class Boom(Written):
        def run(self):
            raise RuntimeError("boom")

    class AfterBoom(Written):
        def requires(self):
            return Boom()

    class Absent(ExternalTask):
        def output(self):
            return LocalTarget("absent.txt")

    class AfterAbsent(Written):
        def requires(self):
            return Absent()

    class BrokenComplete(Task):
        def complete(self):
            raise RuntimeError("cannot tell")

    class Days(WrapperTask):
        def requires(self):
            return [Base(name=n) for n in range(1, 6)]

    return SimpleNamespace(
        **{
            cls.__name__: cls
            for cls in (Written, Base, Top, Boom, AfterBoom, Absent, AfterAbsent, BrokenComplete, Days)
        }
    )


def run(*tasks: Task, **kwargs) -> LuigiRunResult:
    result = build(list(tasks), local_scheduler=True, detailed_summary=True, **kwargs)
    assert isinstance(result, LuigiRunResult)
    return result


def test_success_with_an_already_complete_dependency(t):
    t.Base().run()  # its output exists before the run
    result = run(t.Top())
    assert result.summary_text == framed(
        """
        Scheduled 2 tasks of which:
        * 1 complete ones were encountered:
            - 1 Base(name=0)
        * 1 ran successfully:
            - 1 Top(name=0)

        This progress looks :) because there were no failed tasks or missing dependencies
        """
    )
    assert result.status is LuigiStatusCode.SUCCESS
    assert result.scheduling_succeeded is True


def test_failure_and_the_task_it_blocked(t):
    result = run(t.AfterBoom())
    assert result.summary_text == framed(
        """
        Scheduled 2 tasks of which:
        * 1 failed:
            - 1 Boom(name=0)
        * 1 were left pending, among these:
            * 1 had failed dependencies:
                - 1 AfterBoom(name=0)

        This progress looks :( because there were failed tasks
        """
    )
    assert result.status is LuigiStatusCode.FAILED
    assert result.scheduling_succeeded is False


def test_missing_external_data(t):
    result = run(t.AfterAbsent())
    assert result.summary_text == framed(
        """
        Scheduled 2 tasks of which:
        * 2 were left pending, among these:
            * 1 were missing external dependencies:
                - 1 Absent()
            * 1 had missing dependencies:
                - 1 AfterAbsent(name=0)

        Did not run any tasks
        This progress looks :| because there were missing external dependencies
        """
    )
    assert result.status is LuigiStatusCode.MISSING_EXT


def test_scheduling_error(t):
    result = run(t.BrokenComplete())
    assert result.summary_text == framed(
        """
        Scheduled 1 tasks of which:
        * 1 failed scheduling:
            - 1 BrokenComplete()

        Did not run any tasks
        This progress looks :( because there were tasks whose scheduling failed
        """
    )
    assert result.status is LuigiStatusCode.SCHEDULING_FAILED


def test_nothing_scheduled():
    result = run()
    assert result.summary_text == framed("Did not schedule any tasks")
    assert result.status is LuigiStatusCode.SUCCESS


def test_contiguous_parameters_collapse_into_a_range(t):
    result = run(t.Days())
    assert "* 6 ran successfully:\n    - 5 Base(name=1...5)\n    - 1 Days()\n" in result.summary_text


class _SharedSchedulerFactory(_WorkerSchedulerFactory):
    """Hands every run the same in-process scheduler, as several workers sharing one luigid would."""

    def __init__(self) -> None:
        self.scheduler = self.create_local_scheduler()

    def create_local_scheduler(self):
        existing = getattr(self, "scheduler", None)
        return existing if existing is not None else super().create_local_scheduler()


def test_task_already_running_in_another_worker(t):
    factory = _SharedSchedulerFactory()
    task = t.Base(name=7)
    factory.scheduler.add_task(worker="other-worker", task_id=task.task_id, status="PENDING", runnable=True)
    assert factory.scheduler.get_work(worker="other-worker")["task_id"] == task.task_id
    result = build([task], worker_scheduler_factory=factory, local_scheduler=True, detailed_summary=True)
    assert "    * 1 were being run by another worker:\n        - 1 Base(name=7)\n" in result.summary_text
    assert "\nThe other workers were:\n    - other-worker ran 1 tasks\n" in result.summary_text
    assert result.summary_text.endswith(
        "Did not run any tasks\n"
        "This progress looks :) because there were no failed tasks or missing dependencies\n\n"
        "===== Luigi Execution Summary =====\n"
    )


def test_build_without_detailed_summary_returns_the_scheduling_flag(t):
    assert build([t.Top()], local_scheduler=True) is True
    assert build([t.AfterBoom()], local_scheduler=True) is False
