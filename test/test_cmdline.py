"""The ``luigi`` and ``luigid`` commands, run as real programs (console scripts and ``python -m luigi``)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers.luigid import running_luigid

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


# What a --local-scheduler run with one worker does not need: the server, the databases, the RPC client and
# HTTP, e-mail, the pool of parallel scheduling, the forked task slots, the cluster runners, dask, ray.
NOT_LOADED_BY_A_LOCAL_RUN = [
    "tornado",
    "sqlalchemy",
    "luigi.rpc.client",
    "http.client",
    "ssl",
    "email",
    "multiprocessing.pool",
    "luigi.server",
    "luigi.db_task_history",
    "luigi.worker.slots",
    "luigi.worker.dask_runner",
    "luigi.worker.ray_runner",
    "distributed",
    "ray",
]
IMPORTS_SEEN = textwrap.dedent(
    """
    import atexit, json, sys
    from pipeline import Hello  # noqa: F401 - the task the command line names

    atexit.register(lambda: open("modules.json", "w").write(json.dumps(sorted(sys.modules))))
    """
)


def test_a_local_run_and_its_already_complete_rerun_import_no_server_database_email_or_pool(project):
    (project / "seen.py").write_text(IMPORTS_SEEN)
    for run in ("fresh", "already complete"):
        done = run_command(
            [str(BIN / "luigi"), "--module", "seen", "Hello", "--local-scheduler"],
            project,
            pythonpath=project,
        )
        assert done.returncode == 0, done.stderr
        modules = set(json.loads((project / "modules.json").read_text()))
        assert [name for name in NOT_LOADED_BY_A_LOCAL_RUN if name in modules] == [], run
        assert "luigi.worker.loop" in modules  # the run did happen in this process
    assert (project / "hello.txt").read_text() == "hello"


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
    ("args", "code", "expected"),
    [
        # Luigi finds these before its run starts: Python's uncaught exception, exit 1.
        (
            ["Helo"],
            1,
            "luigi.task_register.TaskClassNotFoundException: No task Helo. "
            "Did you mean: Hello, Holds, Fails?",
        ),
        # Luigi finds these building the root task, in its run: exit [retcode] unhandled_exception (4).
        (
            ["Numbered", "--n", "x"],
            4,
            "luigi.cmdline_parser.InvalidParameterValueException: Invalid value for --n "
            "(parameter 'n' of Numbered): 'x' is not a valid integer",
        ),
        (
            ["Numbered"],
            4,
            "luigi.parameter.MissingParameterException: Numbered[args=(), kwargs={}]: "
            "requires the 'n' parameter to be set",
        ),
    ],
)
def test_user_errors_print_luigis_last_traceback_line_alone_with_luigis_exit_code(
    project, args, code, expected
):
    done = luigi_cmd(project, *args, "--local-scheduler")
    assert done.returncode == code
    assert done.stderr.splitlines() == [expected]


def test_no_task_specified(project):
    done = luigi_cmd(project, "--local-scheduler")
    assert done.returncode == 1
    assert done.stderr.strip() == "No task specified"


# -- the first hour: a wrong scheduler URL, a missing module, hints, parity (issue 38) -------------------

NO_LUIGID = "is luigid running there? --local-scheduler runs without one"


def closed_port_url() -> str:
    """The URL of a port nothing listens on (bound, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/"


def test_a_scheduler_that_never_answers_fails_at_once_in_one_line_with_luigis_exit_code(project):
    url = closed_port_url()
    started = time.monotonic()
    done = luigi_cmd(project, "Hello", "--scheduler-url", url, config="[core]\nrpc_retry_wait = 1\n")
    assert time.monotonic() - started < 70
    assert done.returncode == 4  # Luigi's: its RPCError leaves the run as an unhandled exception
    lines = done.stderr.splitlines()
    assert lines[-1] == (
        f"luigi.rpc.NoSchedulerError: Errors (3 attempts) when connecting to remote scheduler "
        f"{url.rstrip('/')!r}: ConnectionRefusedError: [Errno 111] Connection refused; {NO_LUIGID}"
    )
    assert sum(NO_LUIGID in line for line in lines) == 1 and "Traceback" not in done.stderr
    assert "Informed scheduler" not in done.stderr  # nothing was delivered
    # The two waits of the three attempts, and no second round at exit.
    assert sum("/api/_batch, attempt" in line for line in lines) == 2


@pytest.mark.slow
def test_with_the_default_retry_settings_a_wrong_url_fails_within_luigis_61_seconds(project):
    started = time.monotonic()
    done = luigi_cmd(project, "Hello", "--scheduler-url", closed_port_url())
    assert time.monotonic() - started < 70
    assert done.returncode == 4 and done.stderr.splitlines()[-1].endswith(NO_LUIGID)


def test_informed_scheduler_is_logged_once_luigid_has_the_report(project):
    with running_luigid(project) as luigid:
        done = luigi_cmd(project, "Hello", "--scheduler-url", luigid.url)
    assert done.returncode == 0, done.stderr
    informed = [line for line in done.stderr.splitlines() if "Informed scheduler" in line]
    assert [line.split()[-1] for line in informed] == ["PENDING", "DONE"]


def test_an_unknown_task_without_module_says_to_pass_one(project):
    done = run_command([str(BIN / "luigi"), "Hello", "--local-scheduler"], project)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "luigi.task_register.TaskClassNotFoundException: No task Hello, and no --module was given: "
        "name the module that defines it, e.g. luigi --module my_tasks Hello"
    ]


def test_did_you_mean_never_offers_a_config_section_as_a_task(project):
    done = luigi_cmd(project, "retcodes", "--local-scheduler")  # [retcode] is a Config, not a task
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert "No task retcodes. Candidates are: " in line and "Did you mean" not in line


def test_a_module_not_on_the_python_path_says_to_run_with_pythonpath_dot(project):
    done = run_command([str(BIN / "luigi"), "--module", "pipeline", "Hello", "--local-scheduler"], project)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "ModuleNotFoundError: No module named 'pipeline'; --module pipeline is imported from the Python "
        "path: run from the folder holding it with PYTHONPATH=. (or install it)"
    ]


def test_a_malformed_config_file_is_one_line_exit_1_as_in_luigi(project):
    done = luigi_cmd(project, "Hello", "--local-scheduler", config="[core\n")
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith("luigi.configuration.ConfigError: Malformed config file ")


def test_a_module_that_raises_on_import_exits_1_with_pythons_traceback(project):
    (project / "broken.py").write_text("import a_module_nobody_wrote\n")
    done = luigi_cmd(project, "--module", "broken", "Hello", "--local-scheduler")
    assert done.returncode == 1
    assert "Traceback" in done.stderr
    assert done.stderr.splitlines()[-1] == "ModuleNotFoundError: No module named 'a_module_nobody_wrote'"


def test_help_lists_help_and_help_all_as_luigi_does(project):
    done = luigi_cmd(project, "--help")
    assert done.returncode == 0
    flags = {line.split()[0] for line in done.stdout.splitlines() if line.strip().startswith("--")}
    assert {"--help", "--help-all", "--module", "--local-scheduler"} <= flags


def test_the_version_is_luigis_release_in_the_package_and_its_metadata(project):
    import luigi

    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text()
    assert luigi.__version__ == "3.8.1" and '\nversion = "3.8.1"\n' in pyproject  # no tomllib on 3.10
    done = run_command([sys.executable, "-c", "import luigi; print(luigi.__version__)"], project)
    assert done.stdout.strip() == "3.8.1"
