"""``luigi.worker`` as Luigi's users see it (COMPAT j.5), through ``luigi.build`` and the ``luigi`` command.

External tasks, ``TaskProcess`` and its result tuple, the hooks users' tests patch
(``forward_reporter_attributes``, ``ContextManagedTaskProcess``, ``luigi.worker.time``, ``Worker._add_task``),
the ``Worker`` checks, and the summary after dynamic dependencies. The errors of ``add()``, scheduling
failures and ``workers=0`` are in ``test/worker/test_scheduling_failures.py`` and ``test_no_processes.py``.
"""

from __future__ import annotations

import inspect
import itertools
import json
import multiprocessing
import os
import queue
import subprocess
import sys
import textwrap
from pathlib import Path
from unittest import mock

import pytest

import luigi
import luigi.worker
from luigi import configuration
from luigi.event import Event
from luigi.local_target import LocalTarget
from luigi.scheduler import Scheduler
from luigi.task import Task
from luigi.task_status import DONE, FAILED, PENDING
from luigi.worker import TaskProcess, TaskStatusReporter, Worker

LUIGI = Path(sys.executable).parent / "luigi"
EXTERNAL_MISSING = "Task is an external data dependency and data does not exist (yet?)."


class Factory:
    """A ``worker_scheduler_factory`` (``luigi.build``'s documented hook) that keeps the scheduler it made."""

    def __init__(self, scheduler: Scheduler | None = None) -> None:
        self.scheduler = scheduler or Scheduler()

    def create_local_scheduler(self) -> Scheduler:
        return self.scheduler

    def create_remote_scheduler(self, url: str) -> Scheduler:
        raise AssertionError("these tests use the local scheduler")

    def create_worker(self, scheduler, worker_processes, assistant=False) -> Worker:
        return Worker(scheduler=scheduler, worker_processes=worker_processes, assistant=assistant)


def build(tasks, **kwargs):
    """``luigi.build`` with the local scheduler, returning the detailed result."""
    return luigi.build(tasks, local_scheduler=True, detailed_summary=True, log_level="WARNING", **kwargs)


def body(summary_text: str) -> str:
    """The summary between its two frame lines."""
    return summary_text.split("===== Luigi Execution Summary =====")[1].strip("\n")


def set_config(section: str, **options: str) -> None:
    for name, value in options.items():
        configuration.get_config().set(section, name, value)


# -- external tasks ------------------------------------------------------------------------------------------

PIPELINE = """
import os

import luigi

ROOT = os.environ["J5_DIR"]


class Data(luigi.Task):
    run = NotImplemented

    def output(self):
        return luigi.LocalTarget(os.path.join(ROOT, "data"))


class Report(luigi.Task):
    def requires(self):
        return Data()

    def output(self):
        return luigi.LocalTarget(os.path.join(ROOT, "report"))

    def run(self):
        with self.output().open("w") as out:
            out.write("made")
"""


def run_luigi(tmp_path: Path, *args: str, config: str = "") -> subprocess.CompletedProcess[str]:
    """The ``luigi`` command on the pipeline above, with its own config file; 60 s at most."""
    (tmp_path / "j5_pipeline.py").write_text(PIPELINE)
    (tmp_path / "luigi.cfg").write_text(textwrap.dedent(config))
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "J5_DIR": str(tmp_path), "PYTHONPATH": path}
    env["LUIGI_CONFIG_PATH"] = str(tmp_path / "luigi.cfg")
    argv = [str(LUIGI), "--module", "j5_pipeline", *args, "--local-scheduler", "--no-lock"]
    return subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)


def test_a_task_whose_run_is_not_implemented_is_external_so_a_zero_retry_delay_does_not_loop(tmp_path):
    # Run as a task, it would fail with a TypeError and, with retry_delay 0, be granted again forever.
    done = run_luigi(tmp_path, "Report", config="[scheduler]\nretry_delay = 0\n")
    assert done.returncode == 0, done.stderr
    assert (
        "Data for Data() does not exist (yet?). The task is an external data dependency, so it cannot be "
        "run from this luigi process." in done.stderr
    )
    assert "TypeError" not in done.stderr and "running   Data()" not in done.stderr
    assert "* 1 were missing external dependencies:\n        - 1 Data()" in done.stderr
    assert "This progress looks :| because there were missing external dependencies" in done.stderr
    assert not (tmp_path / "report").exists()


def test_a_not_implemented_run_whose_data_exists_is_done_and_its_dependents_run(tmp_path):
    (tmp_path / "data").write_text("there")
    done = run_luigi(tmp_path, "Report")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "report").read_text() == "made"
    assert "* 1 complete ones were encountered:\n    - 1 Data()" in done.stderr


@pytest.mark.parametrize("run", [None, NotImplemented], ids=["None", "NotImplemented"])
def test_an_external_task_handed_out_is_checked_not_run_and_fails_with_luigis_explanation(tmp_path, run):
    class Upstream(Task):  # incomplete: a handed-out external task must not check its dependencies
        def complete(self):
            return False

    class Data(Task):
        def requires(self):
            return Upstream()

        def output(self):
            return LocalTarget(str(tmp_path / "data"))

    Data.run = run
    factory = Factory()
    set_config("worker", retry_external_tasks="true")
    result = build([Data()], worker_scheduler_factory=factory)
    assert result.worker._add_task_history == [(Data(), PENDING, True), (Data(), FAILED, None)]
    assert factory.scheduler.fetch_error(Data().task_id)["error"] == json.dumps(EXTERNAL_MISSING)
    assert Upstream().task_id not in factory.scheduler.task_list("", "")


def test_an_external_task_handed_out_after_its_data_appeared_is_done(tmp_path):
    class Data(luigi.ExternalTask):
        def output(self):
            return LocalTarget(str(tmp_path / "data"))

    @Data.event_handler(Event.DEPENDENCY_MISSING)
    def data_arrives(task):  # while the worker schedules it: when it is handed out, the data is there
        (tmp_path / "data").write_text("late")

    set_config("worker", retry_external_tasks="true")
    result = build([Data()])
    assert result.worker._add_task_history == [(Data(), PENDING, True), (Data(), DONE, None)]
    assert result.status == luigi.LuigiStatusCode.SUCCESS


# -- TaskProcess ---------------------------------------------------------------------------------------------


class Writes(Task):
    """Writes its ``path`` (module level, so a TaskProcess started as a process can run it)."""

    path = luigi.Parameter()

    def output(self):
        return LocalTarget(self.path)

    def run(self):
        with self.output().open("w") as out:
            out.write(str(os.getpid()))


def test_task_process_has_luigis_constructor():
    parameters = list(inspect.signature(TaskProcess.__init__).parameters.values())[1:10]
    assert [(p.name, p.default) for p in parameters] == [
        ("task", inspect.Parameter.empty),
        ("worker_id", inspect.Parameter.empty),
        ("result_queue", inspect.Parameter.empty),
        ("status_reporter", None),
        ("use_multiprocessing", False),
        ("worker_timeout", 0),
        ("check_unfulfilled_deps", True),
        ("check_complete_on_run", False),
        ("task_completion_cache", None),
    ]
    assert issubclass(TaskProcess, multiprocessing.Process)


def test_a_task_process_started_as_a_process_puts_luigis_result_tuple_on_its_queue(tmp_path):
    task = Writes(path=str(tmp_path / "out"))
    results = multiprocessing.get_context("fork").Queue()
    process = TaskProcess(task, "w1", results, TaskStatusReporter(Scheduler(), task.task_id, "w1"))
    process.start()
    assert results.get(timeout=30) == (task.task_id, DONE, None, [], [])
    process.join(timeout=30)
    assert process.exitcode == 0
    assert (tmp_path / "out").read_text() == str(process.pid)  # it ran in the child


def test_unfulfilled_dependencies_at_run_time_are_named_with_their_missing_outputs(tmp_path):
    class Absent(Task):
        def output(self):
            return LocalTarget(str(tmp_path / "absent"))

    class Stale(Task):  # its output exists, yet it says it is not complete
        def output(self):
            return LocalTarget(str(tmp_path / "stale"))

        def complete(self):
            return False

    class Needs(Task):
        which = luigi.Parameter()

        def requires(self):
            return [Absent()] if self.which == "one" else [Absent(), Stale()]

        def run(self):
            raise AssertionError("never runs")

    (tmp_path / "stale").write_text("")
    results = queue.Queue()
    for which in ("one", "two"):
        task = Needs(which=which)
        TaskProcess(task, "w1", results, TaskStatusReporter(Scheduler(), task.task_id, "w1")).run()
        task_id, status, expl, missing, new_deps = results.get_nowait()
        assert (task_id, status, new_deps) == (task.task_id, FAILED, [])
        absent = f"{Absent().task_id} ({tmp_path / 'absent'})"
        if which == "one":
            assert missing == [Absent().task_id]
            assert f"RuntimeError: Unfulfilled dependency at run time: {absent}\n" in expl
        else:
            assert missing == [Absent().task_id, Stale().task_id]
            both = f"{absent}, {Stale().task_id}"
            assert f"RuntimeError: Unfulfilled dependencies at run time: {both}\n" in expl


def test_check_complete_on_run_fails_a_run_that_left_the_task_incomplete(tmp_path):
    class Forgets(Task):
        def output(self):
            return LocalTarget(str(tmp_path / "never-written"))

        def run(self):
            pass

    failures = []
    Forgets.event_handler(Event.FAILURE)(lambda task, exc: failures.append((type(exc).__name__, str(exc))))
    set_config("worker", check_complete_on_run="true")
    result = build([Forgets()])
    assert failures == [("TaskException", "Task finished running, but complete() is still returning false.")]
    assert "* 1 failed:\n    - 1 Forgets()" in result.summary_text


# -- hooks users patch ---------------------------------------------------------------------------------------


class Says(Task):
    """Reports a status message through ``say``, an attribute only a patched forwarding table sets."""

    path = luigi.Parameter()

    def output(self):
        return LocalTarget(self.path)

    def run(self):
        self.say("hello from run")
        with self.output().open("w") as out:
            out.write("None" if self.set_status_message is None else "set")


@pytest.mark.parametrize("workers", [1, 2], ids=["in-process", "in-a-slot"])
def test_patching_forward_reporter_attributes_changes_what_a_running_task_is_given(tmp_path, workers):
    task = Says(path=str(tmp_path / "out"))
    factory = Factory()
    with mock.patch.dict(TaskProcess.forward_reporter_attributes, {"update_status_message": "say"}):
        result = build([task], worker_scheduler_factory=factory, workers=workers)
    assert result.status == luigi.LuigiStatusCode.SUCCESS
    assert factory.scheduler.get_task_status_message(task.task_id)["statusMessage"] == "hello from run"
    assert (tmp_path / "out").read_text() == "None"  # set_status_message was no longer forwarded
    if workers == 1:
        assert task.say is None  # set only around run()


def test_forwarded_attributes_are_set_only_around_run_and_none_afterwards(tmp_path):
    seen = {}

    class Looks(Task):
        def complete(self):
            return bool(seen)

        def run(self):
            names = TaskProcess.forward_reporter_attributes.values()
            seen.update({name: getattr(self, name) for name in names})

    task = Looks()
    build([task])
    assert {name for name, value in seen.items() if callable(value)} == {
        "set_tracking_url",
        "set_status_message",
        "set_progress_percentage",
        "decrease_running_resources",
    }
    assert TaskProcess.forward_reporter_attributes["scheduler_messages"] == "scheduler_messages"
    assert all(getattr(task, name) is None for name in TaskProcess.forward_reporter_attributes.values())


class NotesContext:
    """A ``[worker] task_process_context``: notes which task process it wrapped, entering and leaving."""

    def __init__(self, task_process):
        self.task_process = task_process
        self.log = Path(task_process.task.path).with_suffix(".context")

    def __enter__(self):
        with open(self.log, "a") as log:
            log.write(f"enter {type(self.task_process).__name__} {self.task_process.task.path}\n")

    def __exit__(self, *exc_info):
        with open(self.log, "a") as log:
            log.write("exit\n")


@pytest.mark.parametrize("workers", [1, 2], ids=["in-process", "in-slots"])
def test_a_patched_context_managed_task_process_is_built_for_every_run(tmp_path, monkeypatch, workers):
    built = []

    class CountedTaskProcess(luigi.worker.ContextManagedTaskProcess):
        def __init__(self, context, *args, **kwargs):
            built.append((context, args[0], args[1], kwargs["use_multiprocessing"]))
            super().__init__(context, *args, **kwargs)

    monkeypatch.setattr(luigi.worker, "ContextManagedTaskProcess", CountedTaskProcess)
    context = f"{__name__}.NotesContext"
    set_config("worker", task_process_context=context)
    tasks = [Writes(path=str(tmp_path / f"{name}.out")) for name in "ab"]
    result = build(tasks, workers=workers)
    assert result.status == luigi.LuigiStatusCode.SUCCESS
    assert sorted(built, key=str) == sorted(
        [(context, task, result.worker._id, workers > 1) for task in tasks], key=str
    )
    for task in tasks:
        path = Path(task.path)
        assert path.with_suffix(".context").read_text() == f"enter CountedTaskProcess {path}\nexit\n"


def test_patching_luigi_worker_time_gives_processing_time_from_two_calls_around_run():
    class Quick(Task):
        def complete(self):
            return False

        def run(self):
            pass

    timings = []
    Quick.event_handler(Event.PROCESSING_TIME)(lambda task, seconds: timings.append((task, seconds)))
    times = [43.0, 1.0]
    with mock.patch("luigi.worker.time") as mock_time:
        mock_time.time = times.pop  # a third call would raise IndexError
        assert luigi.build([Quick()], local_scheduler=True, log_level="WARNING")
    assert timings == [(Quick(), 42.0)] and times == []


def test_a_failed_run_fires_no_processing_time():
    class Broken(Task):
        def complete(self):
            return False

        def run(self):
            raise ValueError("broken")

    timings = []
    Broken.event_handler(Event.PROCESSING_TIME)(lambda task, seconds: timings.append(seconds))
    with mock.patch("luigi.worker.time") as mock_time:
        mock_time.time.side_effect = itertools.count()
        assert not luigi.build([Broken()], local_scheduler=True, log_level="WARNING")
    assert timings == []


def test_every_add_task_goes_through_worker_add_task_and_a_run_reports_runnable_none(tmp_path):
    calls = []
    original = Worker._add_task

    def recording(self, **kwargs):
        calls.append((kwargs["task_id"], kwargs["status"], kwargs.get("runnable", True)))
        return original(self, **kwargs)

    task = Writes(path=str(tmp_path / "out"))
    with mock.patch.object(Worker, "_add_task", recording):
        result = build([task])
    assert calls == [(task.task_id, PENDING, True), (task.task_id, DONE, None)]
    assert result.worker._add_task_history == [(task, PENDING, True), (task, DONE, None)]


# -- Worker(**kwargs) ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("wait_interval", 0, "[worker] wait_interval must be positive"),
        ("wait_jitter", -1, "[worker] wait_jitter must be equal or greater than zero"),
    ],
)
def test_worker_rejects_a_non_positive_wait_interval_and_a_negative_jitter(option, value, message):
    with pytest.raises(AssertionError) as raised:
        Worker(scheduler=Scheduler(), **{option: value})
    assert str(raised.value) == message
    set_config("worker", **{option: str(value)})
    with pytest.raises(AssertionError) as raised:
        luigi.build([Writes(path="/nonexistent/never")], local_scheduler=True, log_level="WARNING")
    assert str(raised.value) == message


# -- the summary after dynamic dependencies ------------------------------------------------------------------


def dynamic_classes(tmp_path, b_fails: bool):
    class B(Task):
        def output(self):
            return LocalTarget(str(tmp_path / "b"))

        def run(self):
            if b_fails:
                raise ValueError("B breaks")
            self.output().open("w").close()

    class A(Task):
        def output(self):
            return LocalTarget(str(tmp_path / "a"))

        def run(self):
            yield B()
            self.output().open("w").close()

    class C(Task):
        def requires(self):
            return A()

        def output(self):
            return LocalTarget(str(tmp_path / "c"))

        def run(self):
            self.output().open("w").close()

    return A, B, C


def test_summary_after_a_dynamic_dependency_that_succeeded(tmp_path):
    A, B, C = dynamic_classes(tmp_path, b_fails=False)
    result = build([C()])
    assert body(result.summary_text) == (
        "Scheduled 3 tasks of which:\n"
        "* 3 ran successfully:\n"
        "    - 1 A()\n"
        "    - 1 B()\n"
        "    - 1 C()\n"
        "\n"
        "This progress looks :) because there were no failed tasks or missing dependencies"
    )


def test_summary_counts_a_task_whose_dynamic_dependency_failed_under_both_pending_groups(tmp_path):
    A, B, C = dynamic_classes(tmp_path, b_fails=True)
    result = build([C()])
    history = result.worker._add_task_history
    assert [(task, status, runnable) for task, status, runnable in history if task == A()] == [
        (A(), PENDING, True),
        (A(), PENDING, None),  # the report of its run, which yielded B
    ]
    # A is pending with a falsy and a truthy runnable, so it counts twice in "Scheduled 4 tasks".
    assert body(result.summary_text) == (
        "Scheduled 4 tasks of which:\n"
        "* 1 failed:\n"
        "    - 1 B()\n"
        "* 3 were left pending, among these:\n"
        "    * 1 were missing external dependencies:\n"
        "        - 1 A()\n"
        "    * 1 had missing dependencies:\n"
        "        - 1 C()\n"
        "    * 1 was not granted run permission by the scheduler:\n"
        "        - 1 A()\n"
        "\n"
        "This progress looks :( because there were failed tasks"
    )


# -- internals, as thin views --------------------------------------------------------------------------------


def test_luigis_internal_worker_names_are_thin_views_of_the_loop(tmp_path):
    task = Writes(path=str(tmp_path / "out"))
    with Worker(scheduler=Scheduler(), worker_processes=2, wait_interval=0.25, wait_jitter=0) as worker:
        assert worker._keep_alive_thread.is_alive()
        worker.add(task)
        process = worker._create_task_process(task)
        assert isinstance(process, luigi.worker.ContextManagedTaskProcess) and process.use_multiprocessing
        grant = worker._get_work()
        assert grant[0] == task.task_id and grant[2] == 1  # (task_id, running_tasks, n_pending_tasks, ...)
        worker._run_task(task.task_id)
        while worker._running_tasks:
            worker._handle_next_task()
        with mock.patch("luigi.worker.time") as mock_time:
            next(worker._sleeper())
        mock_time.sleep.assert_called_once_with(0.25)
    assert (tmp_path / "out").exists()
    assert worker._add_task_history == [(task, PENDING, True), (task, DONE, None)]
