"""The luigid pidfile (``luigi.process``): one live server per pidfile, and no stale file ever blocks."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from helpers.luigid import wait_until

from luigi import process
from luigi.process import ServerAlreadyRunning, ServerSetupError, check_pid, hold_pidfile, prepare_logdir


def hold_in_child(pidfile, tmp_path) -> subprocess.Popen:
    """A child process that holds ``pidfile`` until its stdin closes."""
    script = textwrap.dedent(
        f"""
        import sys
        from luigi.process import hold_pidfile
        with hold_pidfile({str(pidfile)!r}):
            print("holding", flush=True)
            sys.stdin.read()
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=tmp_path
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "holding"
    return child


def release(child: subprocess.Popen) -> int:
    assert child.stdin is not None
    child.stdin.close()
    return child.wait(timeout=30)


def test_holding_a_pidfile_writes_our_pid_and_removes_it_afterwards(tmp_path):
    pidfile = tmp_path / "luigid.pid"
    with hold_pidfile(str(pidfile)):
        assert pidfile.read_text() == f"{os.getpid()}\n"
    assert not pidfile.exists()


def test_no_pidfile_means_nothing_is_running(tmp_path):
    assert check_pid(str(tmp_path / "absent.pid")) is None


def test_a_pidfile_held_by_a_live_server_is_refused_with_its_pid(tmp_path):
    pidfile = tmp_path / "luigid.pid"
    child = hold_in_child(pidfile, tmp_path)
    try:
        assert check_pid(str(pidfile)) == child.pid
        with pytest.raises(
            ServerAlreadyRunning, match=rf"luigid is already running \(pid {child.pid}, pidfile "
        ):
            with hold_pidfile(str(pidfile)):
                pass
        assert pidfile.read_text() == f"{child.pid}\n"  # untouched by the refused attempt
    finally:
        assert release(child) == 0
    assert not pidfile.exists()


def test_a_pidfile_left_by_a_dead_process_does_not_block(tmp_path):
    pidfile = tmp_path / "luigid.pid"
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    pidfile.write_text(dead.stdout)
    assert check_pid(str(pidfile)) is None
    with hold_pidfile(str(pidfile)):
        assert pidfile.read_text() == f"{os.getpid()}\n"


def test_a_pidfile_left_by_a_killed_server_does_not_block(tmp_path):
    pidfile = tmp_path / "luigid.pid"
    child = hold_in_child(pidfile, tmp_path)
    child.kill()
    child.wait(timeout=30)
    assert pidfile.exists()  # SIGKILL gave it no chance to clean up
    with hold_pidfile(str(pidfile)):
        assert pidfile.read_text() == f"{os.getpid()}\n"


def test_an_unlocked_pidfile_naming_a_live_older_process_still_blocks(tmp_path):
    pidfile = tmp_path / "luigid.pid"
    sleeper = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        wait_until(lambda: os.path.exists(f"/proc/{sleeper.pid}"), what="the child to exist")
        pidfile.write_text(f"{sleeper.pid}\n")  # written after the process started, as a server would
        assert check_pid(str(pidfile)) == sleeper.pid
    finally:
        assert sleeper.stdin is not None
        sleeper.stdin.close()
        sleeper.wait(timeout=30)


def test_a_pidfile_naming_a_process_younger_than_the_file_is_a_reused_pid(tmp_path):
    pidfile = tmp_path / "luigid.pid"
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        pidfile.write_text(f"{child.pid}\n")
        os.utime(pidfile, (0, 0))  # written in 1970: its writer cannot be this process
        assert check_pid(str(pidfile)) is None
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)


def test_garbage_in_a_pidfile_is_not_a_running_server(tmp_path):
    pidfile = tmp_path / "luigid.pid"
    pidfile.write_text("not a pid\n")
    assert check_pid(str(pidfile)) is None


def test_a_pidfile_in_a_missing_directory_is_a_clear_error(tmp_path):
    pidfile = tmp_path / "no" / "such" / "dir" / "luigid.pid"
    with pytest.raises(
        ServerSetupError, match=r"Cannot create pidfile .*luigid\.pid: No such file or directory"
    ):
        with hold_pidfile(str(pidfile)):
            pass


def test_a_log_directory_is_created_when_missing(tmp_path):
    logdir = tmp_path / "logs" / "luigid"
    assert prepare_logdir(str(logdir)) == str(logdir)
    assert logdir.is_dir()


def test_a_log_directory_that_cannot_be_created_names_the_option_to_change(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ServerSetupError, match=r"Cannot create log directory .*file/logs.*--logdir"):
        prepare_logdir(str(blocker / "logs"))


def test_the_daemon_log_rotates_daily_keeping_seven(tmp_path):
    handler = process.get_spool_handler(str(tmp_path / "luigi-server.log"))
    try:
        assert (handler.when, handler.backupCount) == ("MIDNIGHT", 7)
    finally:
        handler.close()
