"""``build()``, ``run()`` and the ``[core]`` options (COMPAT b.6, h)."""

from __future__ import annotations

import signal
import warnings

import pytest

from luigi import configuration, interface, lock
from luigi.execution_summary import LuigiRunResult, LuigiStatusCode
from luigi.parameter import IntParameter, UnknownParameterException
from luigi.scheduler import Scheduler
from luigi.task import Task
from luigi.worker import Worker


class Counted(Task):
    """Completes in memory; records the runs of each instance."""

    x = IntParameter(default=0)
    runs: list[int] = []

    def complete(self):
        return self.x in Counted.runs

    def run(self):
        Counted.runs.append(self.x)


@pytest.fixture(autouse=True)
def _fresh_counted():
    Counted.runs = []


class RecordingFactory(interface._WorkerSchedulerFactory):
    """A custom worker_scheduler_factory that remembers what it was asked for."""

    def __init__(self):
        self.calls = []
        self.scheduler = None

    def create_local_scheduler(self):
        self.calls.append(("local",))
        self.scheduler = ClosableScheduler()
        return self.scheduler

    def create_remote_scheduler(self, url):
        self.calls.append(("remote", url))
        self.scheduler = ClosableScheduler()
        return self.scheduler

    def create_worker(self, scheduler, worker_processes, assistant=False):
        self.calls.append(("worker", worker_processes, assistant))
        return Worker(scheduler=scheduler, worker_processes=worker_processes, assistant=assistant)


class ClosableScheduler(Scheduler):
    closed = False

    def close(self):
        self.closed = True


def test_build_runs_tasks_and_returns_whether_it_succeeded():
    assert interface.build([Counted(x=1), Counted(x=2)], local_scheduler=True) is True
    assert sorted(Counted.runs) == [1, 2]


def test_build_returns_false_when_a_task_fails():
    class Fails(Task):
        def complete(self):
            return False

        def run(self):
            raise RuntimeError("no")

    assert interface.build([Fails()], local_scheduler=True) is False


def test_build_with_detailed_summary_returns_the_run_result():
    result = interface.build([Counted(x=3)], local_scheduler=True, detailed_summary=True)
    assert isinstance(result, LuigiRunResult)
    assert result.status == LuigiStatusCode.SUCCESS
    assert result.scheduling_succeeded is True
    assert "===== Luigi Execution Summary =====" in result.summary_text
    assert result.worker._scheduled_tasks == {Counted(x=3).task_id: Counted(x=3)}


def test_build_rejects_a_single_task_with_a_clear_message():
    with pytest.raises(TypeError, match=r"list of tasks.*build\(\[Counted\(x=0\)\]\)"):
        interface.build(Counted(), local_scheduler=True)


def test_build_rejects_unknown_options_naming_them():
    with pytest.raises(UnknownParameterException, match="worker_count"):
        interface.build([Counted()], local_scheduler=True, worker_count=3)


def test_build_uses_a_custom_factory_and_closes_the_scheduler():
    factory = RecordingFactory()
    assert interface.build([Counted(x=4)], worker_scheduler_factory=factory, local_scheduler=True, workers=3)
    assert factory.calls == [("local",), ("worker", 3, False)]
    assert factory.scheduler.closed is True


def test_remote_scheduler_url_comes_from_host_and_port_or_the_full_url():
    factory = RecordingFactory()
    interface.build(
        [Counted()], worker_scheduler_factory=factory, scheduler_host="sched.example", scheduler_port=9000
    )
    assert ("remote", "http://sched.example:9000/") in factory.calls

    factory = RecordingFactory()
    interface.build([Counted()], worker_scheduler_factory=factory, scheduler_url="https://luigi.example/")
    assert ("remote", "https://luigi.example/") in factory.calls


def test_legacy_core_option_names_still_configure_the_scheduler_address():
    configuration.get_config().set("core", "default-scheduler-host", "legacy.example")
    configuration.get_config().set("core", "default-scheduler-port", "8123")
    factory = RecordingFactory()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        interface.build([Counted()], worker_scheduler_factory=factory)
    assert ("remote", "http://legacy.example:8123/") in factory.calls
    assert any("default-scheduler-host is deprecated" in str(warning.message) for warning in caught)


def test_build_takes_no_lock_by_default_but_run_does(monkeypatch):
    taken = []
    monkeypatch.setattr(lock, "acquire_for", lambda *args: taken.append(args) or True)
    interface.build([Counted()], local_scheduler=True)
    assert taken == []
    interface.run(["Counted", "--local-scheduler", "--lock-pid-dir", "/tmp/pids", "--lock-size", "2"])
    assert taken == [("/tmp/pids", 2, None)]


def test_take_lock_signals_the_holders_with_sigusr1(monkeypatch):
    taken = []
    monkeypatch.setattr(lock, "acquire_for", lambda *args: taken.append(args) or True)
    interface.run(["Counted", "--local-scheduler", "--take-lock"])
    assert taken[0][2] == signal.SIGUSR1


def test_a_taken_lock_raises_pid_lock_already_taken_exit(monkeypatch):
    monkeypatch.setattr(lock, "acquire_for", lambda *args: False)
    with pytest.raises(interface.PidLockAlreadyTakenExit) as raised:
        interface.build([Counted()], local_scheduler=True, no_lock=False)
    assert isinstance(raised.value, SystemExit)
    assert Counted.runs == []


def test_run_builds_the_root_task_from_the_command_line():
    assert interface.run(["Counted", "--x", "7", "--local-scheduler", "--no-lock"]) is True
    assert Counted.runs == [7]


def test_run_with_main_task_cls_and_local_scheduler_flag():
    result = interface.run(
        ["--x", "8", "--no-lock"], main_task_cls=Counted, local_scheduler=True, detailed_summary=True
    )
    assert isinstance(result, LuigiRunResult)
    assert Counted.runs == [8]


def test_run_passes_workers_to_the_factory():
    factory = RecordingFactory()
    interface.run(
        ["Counted", "--local-scheduler", "--no-lock", "--workers", "2"], worker_scheduler_factory=factory
    )
    assert ("worker", 2, False) in factory.calls


def test_run_rejects_a_command_line_given_as_a_string():
    with pytest.raises(TypeError, match="cmdline_args must be a list or tuple"):
        interface.run("Counted --local-scheduler")


def test_private_run_always_returns_the_run_result():
    result = interface._run(["Counted", "--local-scheduler", "--no-lock"])
    assert isinstance(result, LuigiRunResult)
    assert result.scheduling_succeeded is True


def test_core_defaults_match_luigi():
    core = interface.core()
    assert (core.local_scheduler, core.scheduler_host, core.scheduler_port, core.scheduler_url) == (
        False,
        "localhost",
        8082,
        "",
    )
    assert (core.workers, core.lock_size, core.no_lock, core.take_lock) == (1, 1, False, False)
    assert (core.log_level, core.logging_conf_file, core.module) == ("DEBUG", "", "")
    assert (core.parallel_scheduling, core.parallel_scheduling_processes, core.assistant) == (False, 0, False)
    assert core.lock_pid_dir.endswith("luigi")


def test_core_options_read_from_config_file_without_warnings(tmp_path, recwarn):
    path = tmp_path / "luigi.cfg"
    path.write_text("[core]\nworkers = 3\nautoload_range = false\nrpc-retry-wait = 1\nerror-email = a@b.c\n")
    configuration.add_config_path(str(path))
    assert interface.core().workers == 3
    assert not [warning for warning in recwarn if "not consumed" in str(warning.message)]
