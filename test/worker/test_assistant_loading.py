"""An assistant builds the tasks other workers scheduled from the get_work reply (LUIGI_COMPAT f.5, j.5):
it imports ``task_module`` (what the scheduling worker sent as ``module``), then finds the family; a task
it cannot load is reported FAILED with the error, not left RUNNING, and the assistant's run ends normally."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from helpers.luigid import running_luigid
from helpers.scheduler import make_scheduler

from luigi.local_target import LocalTarget
from luigi.parameter import IntParameter, Parameter
from luigi.rpc import RemoteScheduler
from luigi.scheduler import Scheduler
from luigi.scheduler_api import SchedulerAPI
from luigi.task import Task
from luigi.task_register import Register
from luigi.worker import Worker

SCHEDULING = "scheduling-worker"
ASSISTANT = "assistant-worker"
MODULE = "carry_tasks"  # written by a test into a folder on sys.path, imported by nobody before the assistant


def carry_module(body: str = "") -> str:
    """The source of a module defining the real ``Carry`` task (its run leaves a file where it is told)."""
    return textwrap.dedent(f"""
        from luigi.local_target import LocalTarget
        from luigi.parameter import IntParameter, Parameter
        from luigi.task import Task

        {body}

        class Carry(Task):
            n = IntParameter()
            folder = Parameter()

            def output(self):
                return LocalTarget(f"{{self.folder}}/carried-{{self.n}}")

            def run(self):
                with self.output().open("w") as out:
                    out.write("carried by the assistant")
        """)


def carry_known_only_here(folder: Path) -> Task:
    """A ``Carry`` task as the scheduling worker's process has it: the assistant cannot find its class.

    The class is taken out of the registry at once, as if it lived in another process; its ``task_module``
    is None, so it names no module to import (a user may set it on the class or, as here, the instance).
    """
    before = Register._get_reg()

    class Carry(Task):
        task_module = None
        n = IntParameter()
        folder = Parameter()

        def output(self):
            return LocalTarget(f"{self.folder}/carried-{self.n}")

    Register._set_reg(before)
    return Carry(n=1, folder=str(folder))


def schedule(scheduler: SchedulerAPI, task: Task) -> None:
    assert Worker(scheduler=scheduler, worker_id=SCHEDULING).add(task)


def run_assistant(scheduler: SchedulerAPI) -> bool:
    return Worker(scheduler=scheduler, worker_id=ASSISTANT, assistant=True).run()


def failure_text(scheduler: SchedulerAPI, task_id: str) -> str:
    """The error the task failed with, as the visualiser receives it."""
    return str(scheduler.fetch_error(task_id)["error"])


@pytest.fixture
def module_folder(tmp_path, monkeypatch):
    """A folder on sys.path for ``carry_tasks.py``; the module is forgotten again after the test."""
    folder = tmp_path / "modules"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    yield folder
    sys.modules.pop(MODULE, None)


def test_a_task_naming_no_module_its_family_unknown_to_the_assistant_ends_failed_with_the_error(tmp_path):
    scheduler = Scheduler()
    task = carry_known_only_here(tmp_path)
    schedule(scheduler, task)
    assert run_assistant(scheduler) is False
    assert list(scheduler.task_list("FAILED", "")) == [task.task_id]
    error = failure_text(scheduler, task.task_id)
    assert error.startswith("Traceback (most recent call last):")  # the text itself, not JSON of it
    assert "Carry" in error


def test_a_task_the_assistant_could_not_load_goes_once_its_scheduling_worker_has_left(tmp_path):
    # The assistant's report makes it no stakeholder, so the task is pruned on the usual schedule.
    scheduler, clock = make_scheduler(worker_disconnect_delay=60, remove_delay=600, retry_delay=10**7)
    task = carry_known_only_here(tmp_path)
    schedule(scheduler, task)
    assert run_assistant(scheduler) is False
    assert list(scheduler.task_list("FAILED", "")) == [task.task_id]
    for _ in range(12):  # the scheduling worker is gone; the assistant goes on asking for work
        clock.advance(61)
        scheduler.get_work(worker=ASSISTANT, assistant=True)
        scheduler.prune()
    assert scheduler.task_list("", "") == {}


def test_the_assistant_imports_the_module_the_task_names_and_runs_it_after_failing_without_it(
    tmp_path, module_folder
):
    (module_folder / f"{MODULE}.py").write_text(carry_module())
    scheduler = Scheduler()
    task = carry_known_only_here(tmp_path)
    schedule(scheduler, task)
    assert run_assistant(scheduler) is False
    assert list(scheduler.task_list("FAILED", "")) == [task.task_id]

    task.task_module = MODULE
    schedule(scheduler, task)  # the same task again, now naming the module that defines its class
    assert MODULE not in sys.modules
    assert run_assistant(scheduler) is True
    assert MODULE in sys.modules
    assert list(scheduler.task_list("DONE", "")) == [task.task_id]
    assert (tmp_path / "carried-1").read_text() == "carried by the assistant"


@pytest.mark.parametrize(
    ("module_source", "error"),
    [
        (None, f"No module named '{MODULE}'"),
        (
            carry_module("raise RuntimeError('no database configured')"),
            "RuntimeError: no database configured",
        ),
        (carry_module("def broken(:"), "SyntaxError"),
        (
            carry_module().replace("n = IntParameter()", "n = IntParameter(); assert False, 'n refused'"),
            "n refused",
        ),
    ],
    ids=["missing", "raises-on-import", "syntax-error", "class-body-fails"],
)
def test_a_task_whose_module_does_not_import_ends_failed_and_the_assistant_run_returns(
    tmp_path, module_folder, module_source, error
):
    if module_source is not None:
        (module_folder / f"{MODULE}.py").write_text(module_source)
    scheduler = Scheduler()
    broken = carry_known_only_here(tmp_path)
    broken.task_module = MODULE
    schedule(scheduler, broken)
    assert run_assistant(scheduler) is False
    assert list(scheduler.task_list("FAILED", "")) == [broken.task_id]
    assert error in failure_text(scheduler, broken.task_id)
    assert scheduler.task_list("RUNNING", "") == {}


@pytest.mark.parametrize(
    ("params", "error"),
    [({"n": "one", "folder": "."}, "one"), ({"n": "1"}, "folder")],
    ids=["bad-value", "missing-parameter"],
)
def test_a_task_whose_parameters_its_class_refuses_ends_failed(module_folder, params, error):
    (module_folder / f"{MODULE}.py").write_text(carry_module())
    scheduler = Scheduler()
    scheduler.add_task(worker=SCHEDULING, task_id="Carry_bad", family="Carry", module=MODULE, params=params)
    assert run_assistant(scheduler) is False
    assert list(scheduler.task_list("FAILED", "")) == ["Carry_bad"]
    assert error in failure_text(scheduler, "Carry_bad")


def test_through_luigid_the_assistant_gets_the_module_the_scheduling_worker_named(tmp_path, module_folder):
    (module_folder / f"{MODULE}.py").write_text(carry_module())
    (tmp_path / "luigid").mkdir()
    (tmp_path / "named").mkdir()
    with running_luigid(tmp_path / "luigid") as luigid:
        scheduler = RemoteScheduler(luigid.url)
        unknown, named = carry_known_only_here(tmp_path), carry_known_only_here(tmp_path / "named")
        named.task_module = MODULE
        for task in (unknown, named):
            schedule(scheduler, task)
        assert run_assistant(scheduler) is False  # granted first (the older), it cannot be loaded
        assert list(scheduler.task_list("FAILED", "")) == [unknown.task_id]
        assert failure_text(scheduler, unknown.task_id).startswith("Traceback (most recent call last):")
        assert run_assistant(scheduler) is True  # without keep_alive, a failed load ended the last run
        assert list(scheduler.task_list("DONE", "")) == [named.task_id]
    assert (tmp_path / "named" / "carried-1").read_text() == "carried by the assistant"
