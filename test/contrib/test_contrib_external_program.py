"""luigi.contrib.external_program end to end: real programs run by real builds and ``luigi`` commands."""

from __future__ import annotations

import json
import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psutil
import pytest
from helpers.luigid import pid_alive, wait_until
from helpers.services import require_program

import luigi
from luigi.contrib.external_program import (
    ExternalProgramRunContext,
    ExternalProgramRunError,
    ExternalProgramTask,
    ExternalPythonProgramTask,
)
from luigi.event import Event
from luigi.interface import _WorkerSchedulerFactory
from luigi.scheduler import Scheduler
from luigi.task_status import DONE, FAILED

PYTHON = sys.executable
LUIGI = str(Path(sys.executable).parent / "luigi")
SECRET = "hunter2-very-secret"


class KeepingFactory(_WorkerSchedulerFactory):
    """Builds the usual local scheduler and keeps it, so a test can read what the worker reported."""

    scheduler: Scheduler

    def create_local_scheduler(self) -> Scheduler:
        self.scheduler = super().create_local_scheduler()
        return self.scheduler


def build(tasks: list[luigi.Task], **options: Any) -> tuple[Any, Scheduler]:
    factory = KeepingFactory()
    result = luigi.build(
        tasks, local_scheduler=True, worker_scheduler_factory=factory, detailed_summary=True, **options
    )
    return result, factory.scheduler


def error_of(scheduler: Scheduler, task: luigi.Task) -> str:
    return str(json.loads(scheduler.fetch_error(task.task_id)["error"]))


def status_of(scheduler: Scheduler, task: luigi.Task) -> str:
    return str(scheduler.task_list("", "")[task.task_id]["status"])


class PythonSnippet(ExternalProgramTask):
    """Runs ``python -c code`` with ``path`` as its argument; the output is the file at ``path``."""

    code = luigi.Parameter()
    path = luigi.Parameter()

    def program_args(self):
        return [PYTHON, "-c", self.code, self.path]

    def output(self):
        return luigi.LocalTarget(self.path)


WRITE_ARGV = "import sys; open(sys.argv[1], 'w').write('written by the program'); print('all good')"
FAIL_WITH_STDERR = "import sys; print('half way'); sys.stderr.write('disk on fire\\n'); sys.exit(3)"


# -- running programs -------------------------------------------------------------------------------


def test_a_program_that_succeeds_completes_its_task_and_its_stdout_is_logged(tmp_path, caplog):
    task = PythonSnippet(code=WRITE_ARGV, path=str(tmp_path / "out.txt"))
    with caplog.at_level(logging.INFO, logger="luigi-interface"):
        result, scheduler = build([task])
    assert result.scheduling_succeeded
    assert status_of(scheduler, task) == DONE
    assert (tmp_path / "out.txt").read_text() == "written by the program"
    assert "Running command: " in caplog.text
    assert "Program stdout:\nall good" in caplog.text


def test_a_nonzero_exit_fails_the_task_with_the_return_code_command_and_stderr(tmp_path):
    task = PythonSnippet(code=FAIL_WITH_STDERR, path=str(tmp_path / "never.txt"))
    result, scheduler = build([task])
    assert not result.scheduling_succeeded
    assert result.status == luigi.LuigiStatusCode.FAILED
    assert status_of(scheduler, task) == FAILED
    error = error_of(scheduler, task)
    assert error.startswith("Program failed with return code=3:")
    assert f"COMMAND: {PYTHON} -c " in error
    assert "STDOUT: half way" in error
    assert "STDERR: disk on fire" in error
    assert "Traceback" not in error  # the explanation is the error itself, not our run()'s frames
    assert not (tmp_path / "never.txt").exists()


def test_the_failure_carries_command_return_code_and_output_as_attributes(tmp_path):
    caught: list[BaseException] = []

    @PythonSnippet.event_handler(Event.FAILURE)
    def keep(task, exception):
        caught.append(exception)

    build([PythonSnippet(code=FAIL_WITH_STDERR, path=str(tmp_path / "x"))])
    [error] = caught
    assert isinstance(error, ExternalProgramRunError)
    assert error.returncode == 3
    assert error.command == [PYTHON, "-c", FAIL_WITH_STDERR, str(tmp_path / "x")]
    assert error.args == tuple(error.command)  # as in Luigi, args is the command
    assert (error.out, error.err) == ("half way\n", "disk on fire\n")
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.returncode, copy.err) == (str(error), 3, error.err)


def test_a_program_killed_by_a_signal_names_the_signal(tmp_path):
    code = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    task = PythonSnippet(code=code, path=str(tmp_path / "x"))
    _, scheduler = build([task])
    assert "Program failed with return code=-9 (killed by SIGKILL):" in error_of(scheduler, task)


def test_a_program_that_is_not_installed_fails_the_task_naming_it(tmp_path):
    class Missing(ExternalProgramTask):
        def program_args(self):
            return ["no-such-program-here", "--flag"]

        def output(self):
            return luigi.LocalTarget(str(tmp_path / "never"))

    result, scheduler = build([Missing()])
    assert not result.scheduling_succeeded
    error = error_of(scheduler, Missing())
    assert "Program could not be started:" in error
    assert "no-such-program-here" in error
    assert "PATH of program_environment()" in error


def test_program_args_given_as_one_string_fail_the_task_with_a_hint(tmp_path):
    class OneString(ExternalProgramTask):
        def program_args(self):
            return "ls -l"

        def output(self):
            return luigi.LocalTarget(str(tmp_path / "never"))

    _, scheduler = build([OneString()])
    assert "must return a list of arguments, not the string 'ls -l'" in error_of(scheduler, OneString())


def test_a_build_from_another_thread_still_runs_the_program(tmp_path):
    task = PythonSnippet(code=WRITE_ARGV, path=str(tmp_path / "threaded.txt"))
    results: list[Any] = []
    thread = threading.Thread(target=lambda: results.append(build([task])[0].scheduling_succeeded))
    thread.start()
    thread.join(timeout=60)
    assert results == [True]
    assert (tmp_path / "threaded.txt").read_text() == "written by the program"


def test_the_program_runs_in_the_environment_the_task_gives(tmp_path):
    class WithEnv(PythonSnippet):
        def program_environment(self):
            return {**super().program_environment(), "GREETING": "bonjour"}

    code = "import os, sys; open(sys.argv[1], 'w').write(os.environ['GREETING'])"
    result, _ = build([WithEnv(code=code, path=str(tmp_path / "env.txt"))])
    assert result.scheduling_succeeded
    assert (tmp_path / "env.txt").read_text() == "bonjour"


def test_stderr_of_a_successful_program_is_logged_unless_always_log_stderr_is_off(tmp_path, caplog):
    code = "import sys; sys.stderr.write('just a warning\\n'); open(sys.argv[1], 'w').close()"

    class Quiet(PythonSnippet):
        always_log_stderr = False

    with caplog.at_level(logging.INFO, logger="luigi-interface"):
        build([PythonSnippet(code=code, path=str(tmp_path / "loud"))])
        assert "Program stderr:\njust a warning" in caplog.text
        caplog.clear()
        build([Quiet(code=code, path=str(tmp_path / "quiet"))])
    assert (tmp_path / "quiet").exists()
    assert "Program stderr:" not in caplog.text


# -- tracking URL -----------------------------------------------------------------------------------


class Tracked(ExternalProgramTask):
    """Prints a line with a tracking URL on ``stream``, then more output."""

    stream = luigi.Parameter()
    marker = luigi.Parameter()

    def program_args(self):
        code = (
            "import sys\n"
            "out = getattr(sys, sys.argv[1])\n"
            "print('starting', file=out, flush=True)\n"
            "url = 'http://tracker.local/job/' + sys.argv[2]\n"
            "print('Tracking URL: ' + url + ' (open it)', file=out, flush=True)\n"
            "print('finished', file=out)\n"
            "open(sys.argv[2], 'w').close()\n"
        )
        return [PYTHON, "-c", code, self.stream, self.marker]

    def output(self):
        return luigi.LocalTarget(self.marker)


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
@pytest.mark.parametrize("workers", [1, 2], ids=["in-process", "task-slot"])
def test_a_tracking_url_in_the_output_reaches_the_scheduler(tmp_path, caplog, stream, workers):
    luigi.configuration.get_config().set("Tracked", "stream_for_searching_tracking_url", stream)
    luigi.configuration.get_config().set("Tracked", "tracking_url_pattern", r"Tracking URL: (\S+)")
    marker = str(tmp_path / "done")
    task = Tracked(stream=stream, marker=marker)
    with caplog.at_level(logging.INFO, logger="luigi-interface"):
        result, scheduler = build([task], workers=workers)
    assert result.scheduling_succeeded
    assert scheduler.task_list("", "")[task.task_id]["tracking_url"] == f"http://tracker.local/job/{marker}"
    if workers > 1:
        return  # a task slot logs in its own process, out of caplog's sight
    # The tracked stream is still captured and logged in full.
    assert f"Program {stream}:\nstarting\nTracking URL: http://tracker.local/job/" in caplog.text
    assert "finished" in caplog.text


def test_build_tracking_url_turns_the_match_into_the_reported_url(tmp_path):
    class JobIdTracked(Tracked):
        stream_for_searching_tracking_url = "stdout"
        tracking_url_pattern = r"job/(\S+)"

        def build_tracking_url(self, logs_output):
            return "https://ui.example/jobs?id=" + logs_output.rsplit("/", 1)[-1]

    task = JobIdTracked(stream="stdout", marker=str(tmp_path / "m"))
    _, scheduler = build([task])
    assert scheduler.task_list("", "")[task.task_id]["tracking_url"] == "https://ui.example/jobs?id=m"


def test_without_capture_the_tracked_stream_still_reaches_the_workers_own_output(tmp_path, capfd):
    luigi.configuration.get_config().set("Tracked", "capture_output", "false")
    luigi.configuration.get_config().set("Tracked", "stream_for_searching_tracking_url", "stdout")
    luigi.configuration.get_config().set("Tracked", "tracking_url_pattern", r"Tracking URL: (\S+)")
    task = Tracked(stream="stdout", marker=str(tmp_path / "done"))
    _, scheduler = build([task])
    assert scheduler.task_list("", "")[task.task_id]["tracking_url"].startswith("http://tracker.local/job/")
    assert "starting\nTracking URL: http://tracker.local/job/" in capfd.readouterr().out


def test_a_background_child_keeping_the_tracked_stream_open_does_not_hold_up_the_task(tmp_path):
    sh = require_program("sh", "dash")

    class Daemonizing(ExternalProgramTask):
        stream_for_searching_tracking_url = "stdout"
        tracking_url_pattern = r"url=(\S+)"

        def program_args(self):
            # The background sleep inherits stdout: the stream stays open after the program exits.
            return [sh, "-c", f"sleep 60 & echo $! > {tmp_path / 'bg.pid'}; echo url=http://t/1"]

        def complete(self):
            return (tmp_path / "bg.pid").exists() and self.__dict__.get("ran", False)

        def run(self):
            super().run()
            self.ran = True

    try:
        _, scheduler = build([Daemonizing()])
        assert scheduler.task_list("", "")[Daemonizing().task_id]["tracking_url"] == "http://t/1"
        assert status_of(scheduler, Daemonizing()) == DONE
    finally:
        background = int((tmp_path / "bg.pid").read_text())
        if pid_alive(background):
            os.kill(background, signal.SIGKILL)


def test_an_invalid_tracking_pattern_fails_the_task_before_the_program_starts(tmp_path):
    class BadPattern(PythonSnippet):
        stream_for_searching_tracking_url = "stdout"
        tracking_url_pattern = "url=(unclosed"

    task = BadPattern(code=WRITE_ARGV, path=str(tmp_path / "never"))
    _, scheduler = build([task])
    assert "tracking_url_pattern 'url=(unclosed' is not a valid regex" in error_of(scheduler, task)
    assert not (tmp_path / "never").exists()


# -- ExternalPythonProgramTask ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def virtualenv(tmp_path_factory) -> Path:
    """A real virtualenv (without pip, which it does not need), made once for the module."""
    home = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([PYTHON, "-m", "venv", "--without-pip", str(home)], check=True, timeout=120)
    return home


class WhereAmI(ExternalPythonProgramTask):
    """``python`` (looked up on PATH) writes its prefix, VIRTUAL_ENV and sys.path as JSON to ``path``."""

    path = luigi.Parameter()
    script = luigi.Parameter()

    def program_args(self):
        return ["python", self.script, self.path]

    def output(self):
        return luigi.LocalTarget(self.path)


REPORT_SCRIPT = """\
import json, os, sys
try:
    import helper_module
    helper = helper_module.NAME
except ImportError:
    helper = None
report = {
    "prefix": sys.prefix,
    "venv": os.environ.get("VIRTUAL_ENV"),
    "pythonpath": os.environ.get("PYTHONPATH"),
    "path": sys.path,
    "helper": helper,
}
json.dump(report, open(sys.argv[1], "w"))
"""


@pytest.fixture
def report_script(tmp_path) -> str:
    script = tmp_path / "scripts" / "report.py"
    script.parent.mkdir()
    script.write_text(REPORT_SCRIPT)
    return str(script)


def test_a_python_program_runs_with_the_virtualenvs_interpreter(tmp_path, virtualenv, report_script):
    task = WhereAmI(path=str(tmp_path / "r.json"), script=report_script, virtualenv=str(virtualenv))
    result, _ = build([task])
    assert result.scheduling_succeeded
    report = json.loads((tmp_path / "r.json").read_text())
    assert Path(report["prefix"]) == virtualenv
    assert report["venv"] == str(virtualenv)


def test_a_relative_virtualenv_stays_relative_as_in_luigi(tmp_path, virtualenv, report_script, monkeypatch):
    monkeypatch.chdir(virtualenv.parent)
    task = WhereAmI(path=str(tmp_path / "r.json"), script=report_script, virtualenv=virtualenv.name)
    result, _ = build([task])
    assert result.scheduling_succeeded
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["venv"] == virtualenv.name
    assert Path(report["prefix"]) == virtualenv


def test_extra_pythonpath_is_importable_and_prepended_as_in_luigi(tmp_path, report_script, monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)
    library = tmp_path / "lib"
    library.mkdir()
    (library / "helper_module.py").write_text("NAME = 'from extra_pythonpath'\n")
    task = WhereAmI(path=str(tmp_path / "r.json"), script=report_script, extra_pythonpath=str(library))
    result, _ = build([task])
    assert result.scheduling_succeeded
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["helper"] == "from extra_pythonpath"
    assert report["pythonpath"] == f"{library}:"  # Luigi's value when there was no PYTHONPATH


def test_the_environment_is_changed_exactly_as_luigi_changes_it(monkeypatch):
    monkeypatch.setattr(
        os, "environ", {"PATH": "/base/path", "PYTHONPATH": "/old", "PYTHONHOME": "/h", "OTHERVAR": "x"}
    )
    task = ExternalPythonProgramTask(virtualenv="/path/to/venv", extra_pythonpath="/extra/pythonpath")
    assert task.program_environment() == {
        "PATH": "/path/to/venv/bin:/base/path",
        "VIRTUAL_ENV": "/path/to/venv",
        "PYTHONPATH": "/extra/pythonpath:/old",
        "OTHERVAR": "x",
    }


def test_a_virtualenv_without_bin_is_named_in_a_warning(tmp_path, report_script, caplog):
    task = WhereAmI(path=str(tmp_path / "r.json"), script=report_script, virtualenv=str(tmp_path / "nope"))
    with caplog.at_level(logging.WARNING, logger="luigi-interface"):
        environment = task.program_environment()
    assert environment["VIRTUAL_ENV"] == str(tmp_path / "nope")
    assert f"virtualenv '{tmp_path / 'nope'}' has no bin/ directory" in caplog.text


# -- credentials ------------------------------------------------------------------------------------


def test_credentials_in_the_environment_or_flags_never_reach_logs_or_errors(tmp_path, caplog):
    caught: list[BaseException] = []

    class Login(ExternalProgramTask):
        def program_environment(self):
            return {**super().program_environment(), "SERVICE_PASSWORD": SECRET}

        def program_args(self):
            code = "import os, sys; sys.exit('login with ' + os.environ['SERVICE_PASSWORD'])"
            return [PYTHON, "-c", code, f"--password={SECRET}", "--url", f"https://bob:{SECRET}@db.local/"]

        def output(self):
            return luigi.LocalTarget(str(tmp_path / "never"))

    @Login.event_handler(Event.FAILURE)
    def keep(task, exception):
        caught.append(exception)

    with caplog.at_level(logging.DEBUG):
        _, scheduler = build([Login()])
    error = error_of(scheduler, Login())
    [exception] = caught
    for text in (caplog.text, error, str(exception), repr(exception), Login().task_id, repr(Login())):
        assert SECRET not in text
    assert "STDERR: login with ***" in error
    assert "--password=*** --url https://bob:***@db.local/" in error
    assert "ENVIRONMENT: set by the task: SERVICE_PASSWORD (values not shown)" in error
    assert exception.env["SERVICE_PASSWORD"] == SECRET  # still there for code that needs it


# -- ExternalProgramRunContext ----------------------------------------------------------------------


def test_leaving_the_run_context_with_an_exception_kills_the_program():
    sleep = require_program("sleep", "coreutils")
    proc = subprocess.Popen([sleep, "300"])
    try:
        with pytest.raises(KeyboardInterrupt), ExternalProgramRunContext(proc):
            raise KeyboardInterrupt
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        proc.kill()
        proc.wait()


def test_the_run_context_puts_back_the_previous_sigterm_handler():
    proc = subprocess.Popen([PYTHON, "-c", "pass"])
    before = signal.getsignal(signal.SIGTERM)
    with ExternalProgramRunContext(proc) as context:
        assert signal.getsignal(signal.SIGTERM) == context.kill_job
        proc.wait()
    assert signal.getsignal(signal.SIGTERM) == before


# -- through the luigi command ----------------------------------------------------------------------

PIPELINE = """\
import sys
import luigi
from luigi.contrib.external_program import ExternalProgramTask


class Echo(ExternalProgramTask):
    def program_args(self):
        return [sys.executable, "-c", "print('echo-from-the-program')"]

    def complete(self):
        return False if not hasattr(self, "ran") else True

    def run(self):
        super().run()
        self.ran = True


class Sleeper(ExternalProgramTask):
    def program_args(self):
        # `; true` keeps sh from exec-ing sleep: the sleep is a grandchild, as a real wrapper's would be.
        return ["sh", "-c", "sleep 300; true"]

    def output(self):
        return luigi.LocalTarget("never-written")
"""


@pytest.fixture
def pipeline_dir(tmp_path) -> Path:
    module = f"ep_pipeline_{os.getpid()}"
    (tmp_path / f"{module}.py").write_text(PIPELINE)
    (tmp_path / "luigi.cfg").write_text("[core]\nno_lock = true\n")
    return tmp_path


def luigi_command(pipeline_dir: Path, *args: str) -> tuple[list[str], dict[str, str]]:
    module = next(pipeline_dir.glob("ep_pipeline_*.py")).stem
    env = dict(os.environ, PYTHONPATH=str(pipeline_dir), LUIGI_CONFIG_PATH=str(pipeline_dir / "luigi.cfg"))
    return [LUIGI, "--module", module, *args, "--local-scheduler"], env


@pytest.mark.parametrize("captured", [True, False], ids=["captured", "not-captured"])
def test_capture_output_false_on_the_command_line_lets_the_program_print(pipeline_dir, captured):
    argv, env = luigi_command(pipeline_dir, "Echo", *([] if captured else ["--capture-output", "False"]))
    done = subprocess.run(argv, env=env, cwd=pipeline_dir, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert ("echo-from-the-program" in done.stdout) is not captured
    assert ("Program stdout:\necho-from-the-program" in done.stderr) is captured


def _sleep_under(process: psutil.Process) -> psutil.Process | None:
    for child in process.children(recursive=True):
        try:
            if child.name() == "sleep":
                return child
        except psutil.NoSuchProcess:
            continue
    return None


@pytest.mark.parametrize("workers", [1, 2], ids=["in-process", "task-slot"])
def test_sigterm_to_the_process_running_the_task_kills_the_program(pipeline_dir, workers):
    require_program("sleep", "coreutils")
    argv, env = luigi_command(pipeline_dir, "Sleeper", "--workers", str(workers))
    luigi_proc = subprocess.Popen(
        argv, env=env, cwd=pipeline_dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        runner = psutil.Process(luigi_proc.pid)
        sleep = wait_until(lambda: _sleep_under(runner), what="the sleep program to start")
        wrapper = sleep.parent()  # the sh the task started
        task_runner = wrapper.parent()  # the luigi process itself, or the task slot it forked
        assert (task_runner.pid == luigi_proc.pid) is (workers == 1)
        task_runner.send_signal(signal.SIGTERM)
        wait_until(lambda: not pid_alive(sleep.pid) and not pid_alive(wrapper.pid), what="the program to die")
        _, stderr = luigi_proc.communicate(timeout=60)
    finally:
        if luigi_proc.poll() is None:
            luigi_proc.kill()
            luigi_proc.communicate()
    assert "Program killed: the process running the task" in stderr
    assert "received SIGTERM" in stderr
    assert "1 failed" in stderr
