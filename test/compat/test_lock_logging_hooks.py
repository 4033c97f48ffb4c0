"""Hooks of ``luigi.lock``, ``luigi.setup_logging`` and ``luigi.process`` that users' tests patch
(COMPAT j.17, j.18), patched as they patch them, with the effect seen through the public path.

Logging set-up is process-wide, so the scenarios that configure it run in a fresh interpreter.
"""

from __future__ import annotations

import inspect
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from unittest import mock

import psutil
import pytest
from helpers.luigid import wait_until

import luigi
import luigi.lock
import luigi.process
from luigi.interface import PidLockAlreadyTakenExit
from luigi.setup_logging import BaseLogging, DaemonLogging, InterfaceLogging


class LockedOut(luigi.Task):
    """Writes a file when it runs."""

    folder = luigi.Parameter()

    def output(self):
        return luigi.LocalTarget(os.path.join(self.folder, "ran.txt"))

    def run(self):
        with self.output().open("w") as out:
            out.write("ran")


@pytest.fixture
def other_process():
    """A live process running some other command line."""
    process = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    yield process
    process.kill()
    process.wait(timeout=30)


# -- luigi.lock.getpcmd ----------------------------------------------------------------------------------


def test_patching_getpcmd_decides_whether_a_listed_pid_holds_the_lock_of_a_build(tmp_path, other_process):
    pid_dir = tmp_path / "pids"
    with mock.patch("luigi.lock.getpcmd", return_value="the same command for everyone"):
        _pid, _cmd, pid_file = luigi.lock.get_info(str(pid_dir))
        pid_dir.mkdir()
        Path(pid_file).write_text(f"{other_process.pid}\n")
        with pytest.raises(PidLockAlreadyTakenExit):
            luigi.build(
                [LockedOut(folder=str(tmp_path))],
                local_scheduler=True,
                no_lock=False,
                lock_pid_dir=str(pid_dir),
            )
    assert not (tmp_path / "ran.txt").exists()
    # Unpatched, the listed process runs another command, so it holds nothing and the build runs.
    assert luigi.build(
        [LockedOut(folder=str(tmp_path))], local_scheduler=True, no_lock=False, lock_pid_dir=str(pid_dir)
    )
    assert (tmp_path / "ran.txt").read_text() == "ran"


def test_getpcmd_joins_the_cmdline_with_spaces():
    assert luigi.lock.getpcmd(os.getpid()) == " ".join(psutil.Process().cmdline())


def test_getpcmd_of_a_process_without_a_cmdline_is_empty():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        wait_until(lambda: psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE, what="a zombie")
        assert luigi.lock.getpcmd(child.pid) == ""
    finally:
        child.wait(timeout=30)
    assert luigi.lock.getpcmd(child.pid) == f"[PROCESS_WITH_PID={child.pid}]"  # reaped: unreadable


# -- luigi.setup_logging ---------------------------------------------------------------------------------

_LOGGING_SCRIPT = textwrap.dedent(
    """
    import logging, sys
    from unittest import mock
    from luigi.configuration import LuigiTomlParser
    from luigi.setup_logging import BaseLogging, DaemonLogging, InterfaceLogging

    log_file = sys.argv[1]
    table = {
        "version": 1,
        "disable_existing_loggers": False,
        "handlers": {"file": {"class": "logging.FileHandler", "filename": log_file}},
        "loggers": {"hooked": {"handlers": ["file"], "level": "INFO"}},
    }
    parser = LuigiTomlParser()
    parser.data = {"logging": table}
    with mock.patch.object(BaseLogging, "config", parser):
        print("client", InterfaceLogging.setup(), InterfaceLogging.setup())
    logging.getLogger("hooked").info("configured-from-the-patched-config")
    with mock.patch.object(InterfaceLogging, "_configured", False), mock.patch.object(
        BaseLogging, "config", parser
    ):
        print("again", InterfaceLogging.setup())
    print("daemon-configured", DaemonLogging._configured)
    with mock.patch.object(BaseLogging, "config", {"logging": table}):
        print("plain-dict", DaemonLogging._section(None))
    """
)


def test_patched_config_and_configured_flags_steer_the_logging_set_up(tmp_path):
    log_file = tmp_path / "hooked.log"
    done = subprocess.run(
        [sys.executable, "-c", _LOGGING_SCRIPT, str(log_file)],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "LUIGI_CONFIG_PATH"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:4] == [
        "client True False",  # configured once from the patched config, then not again
        "again True",  # the flag reset: it runs again
        "daemon-configured False",  # each subclass has its own flag
        "plain-dict True",
    ]
    assert "configured-from-the-patched-config" in log_file.read_text()


def test_config_reads_the_active_configuration_until_one_is_assigned():
    assert BaseLogging.config is luigi.configuration.get_config()
    with mock.patch.object(DaemonLogging, "config", {"core": {}}):
        assert DaemonLogging.config == {"core": {}}
        assert InterfaceLogging.config is luigi.configuration.get_config()
    assert DaemonLogging.config is luigi.configuration.get_config()


def test_setup_with_the_flag_set_leaves_logging_alone(monkeypatch):
    monkeypatch.setattr(InterfaceLogging, "_configured", True)
    handlers = list(logging.getLogger("luigi-interface").handlers)
    assert InterfaceLogging.setup() is False
    assert logging.getLogger("luigi-interface").handlers == handlers


def test_a_missing_logging_file_says_so_in_luigis_words(tmp_path, monkeypatch):
    monkeypatch.setattr(InterfaceLogging, "_configured", False)
    opts = type("Opts", (), {"logging_conf_file": str(tmp_path / "nope.ini"), "log_level": "INFO"})
    with pytest.raises(OSError, match=r"^Error: Unable to locate specified logging configuration file!"):
        InterfaceLogging.setup(opts)


# -- luigi.process -----------------------------------------------------------------------------------------


def test_the_process_module_has_luigis_names_and_daemonize_signature():
    parameters = inspect.signature(luigi.process.daemonize).parameters.values()
    assert [(p.name, p.default) for p in parameters] == [
        ("cmd", inspect.Parameter.empty),
        ("pidfile", None),
        ("logdir", None),
        ("api_port", 8082),
        ("address", None),
        ("unix_socket", None),
    ]
    assert luigi.process.get_log_format() == "%(asctime)s %(name)s[%(process)s] %(levelname)s: %(message)s"


def test_the_spool_handler_writes_in_the_log_format(tmp_path):
    handler = luigi.process.get_spool_handler(str(tmp_path / "server.log"))
    try:
        record = logging.LogRecord("luigi.server", logging.INFO, __file__, 1, "hello", None, None)
        handler.emit(record)
    finally:
        handler.close()
    assert (tmp_path / "server.log").read_text().rstrip().endswith(f"luigi.server[{os.getpid()}] INFO: hello")


def test_write_pid_then_check_pid_finds_this_process_only_from_another_one(tmp_path):
    pidfile = str(tmp_path / "luigid.pid")
    assert luigi.process.check_pid(pidfile) is None and luigi.process.check_pid(None) is None
    luigi.process.write_pid(pidfile)
    assert Path(pidfile).read_text().strip() == str(os.getpid())
    asked = subprocess.run(
        [sys.executable, "-c", f"import luigi.process; print(luigi.process.check_pid({pidfile!r}))"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert asked.stdout.strip() == str(os.getpid())
