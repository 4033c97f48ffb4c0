"""The ``luigi`` and ``luigid`` commands, run as real programs (console scripts and ``python -m luigi``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


def run_command(args: list[str], cwd: Path, config: str = "", pythonpath: Path | None = None):
    """Run a command with its own config file (and PYTHONPATH); returns the CompletedProcess."""
    env = dict(os.environ)
    env.pop("LUIGI_CONFIG_PARSER", None)
    config_file = cwd / "test-luigi.cfg"
    config_file.write_text(with_autoload_range(textwrap.dedent(config)))
    env["LUIGI_CONFIG_PATH"] = str(config_file)
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pythonpath), env.get("PYTHONPATH")]))
    return subprocess.run(args, capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


def with_autoload_range(config: str) -> str:
    """Say ``[core] autoload_range`` explicitly, as current configs do, so luigi prints no deprecation."""
    if "[core]" in config:
        return config.replace("[core]", "[core]\nautoload_range = true", 1)
    return "[core]\nautoload_range = true\n" + config


PIPELINE = textwrap.dedent(
    """
    import os
    import time

    from luigi.local_target import LocalTarget
    from luigi.parameter import IntParameter
    from luigi.task import ExternalTask, Task


    class Data(ExternalTask):
        def output(self):
            return LocalTarget("data.txt")


    class Hello(Task):
        def output(self):
            return LocalTarget("hello.txt")

        def run(self):
            with self.output().open("w") as out:
                out.write("hello")


    class Fails(Task):
        def requires(self):
            return Hello()

        def output(self):
            return LocalTarget("never.txt")

        def run(self):
            raise RuntimeError("task broke")


    class NeedsData(Task):
        def requires(self):
            return Data()

        def output(self):
            return LocalTarget("needs-data.txt")


    class Numbered(Task):
        n = IntParameter()


    class Holds(Task):
        '''Runs until the test creates "release" (so a second identical command finds the lock taken).'''

        def output(self):
            return LocalTarget("held.txt")

        def run(self):
            open("started", "w").close()
            deadline = time.monotonic() + 60
            while not os.path.exists("release") and time.monotonic() < deadline:
                time.sleep(0.02)
            with self.output().open("w") as out:
                out.write("held")
    """
)


@pytest.fixture
def project(tmp_path):
    """A directory holding the module ``pipeline``; commands run there with it on PYTHONPATH."""
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    return tmp_path


def luigi_cmd(project: Path, *args: str, config: str = "", module_form: bool = False):
    program = [sys.executable, "-m", "luigi"] if module_form else [str(BIN / "luigi")]
    argv = [*program, "--module", "pipeline", *args]
    return run_command(argv, project, config=config, pythonpath=project)


def summary_block(stderr: str) -> str:
    """The text between the two summary banners."""
    banner = "===== Luigi Execution Summary ====="
    assert stderr.count(banner) == 2, stderr
    return stderr.split(banner)[1].strip("\n")


def test_python_m_luigi_runs_the_task_and_prints_the_summary(project):
    done = luigi_cmd(project, "Hello", "--local-scheduler", module_form=True)
    assert done.returncode == 0, done.stderr
    assert (project / "hello.txt").read_text() == "hello"
    assert summary_block(done.stderr) == textwrap.dedent(
        """
        Scheduled 1 tasks of which:
        * 1 ran successfully:
            - 1 Hello()

        This progress looks :) because there were no failed tasks or missing dependencies
        """
    ).strip("\n")


def test_failed_task_exits_with_retcode_config_and_summary_says_why(project):
    done = luigi_cmd(project, "Fails", "--local-scheduler", config="[retcode]\ntask_failed = 20\n")
    assert done.returncode == 20, done.stderr
    assert summary_block(done.stderr) == textwrap.dedent(
        """
        Scheduled 2 tasks of which:
        * 1 ran successfully:
            - 1 Hello()
        * 1 failed:
            - 1 Fails()

        This progress looks :( because there were failed tasks
        """
    ).strip("\n")


def test_missing_data_exits_with_missing_data_code(project):
    done = luigi_cmd(project, "NeedsData", "--local-scheduler", config="[retcode]\nmissing_data = 10\n")
    assert done.returncode == 10, done.stderr
    assert summary_block(done.stderr).endswith(
        "Did not run any tasks\nThis progress looks :| because there were missing external dependencies"
    )


def test_second_identical_command_exits_with_already_running(project):
    config = "[retcode]\nalready_running = 11\n"
    args = ("Holds", "--local-scheduler", "--lock-pid-dir", str(project / "locks"))
    env_cmd = [str(BIN / "luigi"), "--module", "pipeline", *args]
    first = _popen(env_cmd, project, config)
    try:
        _wait_for(project / "started", first)
        second = run_command(env_cmd, project, config=config, pythonpath=project)
        assert second.returncode == 11, second.stderr
        assert f"Pid(s) {{{first.pid}}} already running" in second.stdout
    finally:
        (project / "release").touch()
        first.wait(timeout=60)
    assert first.returncode == 0


def _popen(argv: list[str], cwd: Path, config: str) -> subprocess.Popen:
    config_file = cwd / "test-luigi.cfg"
    config_file.write_text(with_autoload_range(config))
    env = dict(os.environ, LUIGI_CONFIG_PATH=str(config_file), PYTHONPATH=str(cwd))
    env.pop("LUIGI_CONFIG_PARSER", None)
    return subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _wait_for(path: Path, process: subprocess.Popen, timeout: float = 60.0) -> None:
    """Wait until ``path`` exists (or fail if the process dies or the deadline passes)."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert process.poll() is None, f"process exited with {process.returncode} before creating {path}"
        assert time.monotonic() < deadline, f"{path} did not appear within {timeout}s"
        time.sleep(0.02)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["Helo"], "luigi: error: No task Helo. Did you mean: Hello"),
        # Luigi finds these building the root task and logs them as uncaught, exiting 4; so do we, but in
        # one line without the traceback.
        (
            ["Numbered", "--n", "x"],
            "ERROR: Uncaught exception in luigi: InvalidParameterValueException: Invalid value for --n "
            "(parameter 'n' of Numbered): 'x' is not a valid integer",
        ),
        (
            ["Numbered"],
            "ERROR: Uncaught exception in luigi: MissingParameterException: Numbered[args=(), kwargs={}]: "
            "requires the 'n' parameter to be set",
        ),
    ],
)
def test_user_errors_print_one_line_without_traceback(project, args, expected):
    done = luigi_cmd(project, *args, "--local-scheduler")
    assert done.returncode == 4
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(expected)


def test_no_task_specified(project):
    done = luigi_cmd(project, "--local-scheduler")
    assert done.returncode == 1
    assert done.stderr.strip() == "No task specified"
