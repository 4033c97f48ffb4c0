"""The pid-file lock: identical command lines exclude each other, stale and foreign pids do not count."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from luigi import lock

# Each holder takes the lock, reports, and then waits for a line on stdin before exiting, so the test
# decides how long it holds the lock without sleeping.
_HOLDER = textwrap.dedent(
    """
    import signal, sys
    from luigi import lock
    def on_signal(signum, frame):
        print("signalled", flush=True)
    signal.signal(signal.SIGUSR1, on_signal)
    pid_dir, size, take = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "take"
    print("acquired" if lock.acquire_for(pid_dir, size, signal.SIGUSR1 if take else None) else "refused",
          flush=True)
    sys.stdin.readline()
    """
)


class Holder:
    """A real python process running the same command line as every other Holder with the same args."""

    def __init__(self, pid_dir: Path, size: int = 1, take: bool = False) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, str(pid_dir), str(size), "take" if take else "keep"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []

    def read_until(self, word: str) -> list[str]:
        """Read stdout lines until one contains ``word`` (stdout closes if the process dies)."""
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError(f"process ended before printing {word!r}; got {self.lines}")
            self.lines.append(line.rstrip("\n"))
            if word in line:
                return self.lines

    def outcome(self) -> str:
        """'acquired' or 'refused', whichever the process printed."""
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError(f"process ended without an outcome; got {self.lines}")
            self.lines.append(line.rstrip("\n"))
            if line.strip() in ("acquired", "refused"):
                return line.strip()

    def release(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture
def holders():
    started: list[Holder] = []
    yield started
    for holder in started:
        if holder.proc.poll() is None:
            holder.proc.kill()
            holder.proc.wait(timeout=30)


def _start(holders: list[Holder], pid_dir: Path, size: int = 1, take: bool = False) -> Holder:
    holder = Holder(pid_dir, size, take)
    holders.append(holder)
    return holder


def test_second_identical_command_is_refused_while_first_runs(tmp_path, holders):
    pid_dir = tmp_path / "pids"
    first = _start(holders, pid_dir)
    assert first.outcome() == "acquired"
    second = _start(holders, pid_dir)
    assert second.outcome() == "refused"
    assert f"Pid(s) {{{first.proc.pid}}} already running" in second.lines


def test_lock_is_free_again_once_the_holder_exits(tmp_path, holders):
    pid_dir = tmp_path / "pids"
    first = _start(holders, pid_dir)
    assert first.outcome() == "acquired"
    first.release()
    third = _start(holders, pid_dir)
    assert third.outcome() == "acquired"
    (pid_file,) = pid_dir.glob("*.pid")
    assert pid_file.read_text().split() == [str(third.proc.pid)]


def test_lock_size_allows_that_many_identical_commands(tmp_path, holders):
    pid_dir = tmp_path / "pids"
    outcomes = []
    for _ in range(3):
        outcomes.append(_start(holders, pid_dir, size=2).outcome())
    assert outcomes == ["acquired", "acquired", "refused"]


def test_take_lock_signals_the_holder_and_runs_anyway(tmp_path, holders):
    pid_dir = tmp_path / "pids"
    first = _start(holders, pid_dir, take=True)
    assert first.outcome() == "acquired"
    taker = _start(holders, pid_dir, take=True)
    assert taker.outcome() == "acquired"
    assert f"Sent kill signal to Pids: {{{first.proc.pid}}}" in taker.lines
    first.read_until("signalled")


def test_pid_dir_is_private_and_pid_file_lists_one_pid_per_line(tmp_path, holders):
    pid_dir = tmp_path / "pids"
    first = _start(holders, pid_dir, size=2)
    second = _start(holders, pid_dir, size=2)
    assert first.outcome() == second.outcome() == "acquired"
    assert stat.S_IMODE(pid_dir.stat().st_mode) == 0o700
    (pid_file,) = pid_dir.glob("*.pid")
    assert sorted(pid_file.read_text().splitlines()) == sorted([str(first.proc.pid), str(second.proc.pid)])
    assert stat.S_IMODE(pid_file.stat().st_mode) & 0o666 == 0o666


def test_pid_file_is_named_after_the_md5_of_the_command_line(tmp_path, holders):
    import hashlib

    pid_dir = tmp_path / "pids"
    holder = _start(holders, pid_dir)
    assert holder.outcome() == "acquired"
    command = lock.getpcmd(holder.proc.pid)
    assert command.startswith(sys.executable + " -c ")
    expected = pid_dir / (hashlib.md5(command.encode()).hexdigest() + ".pid")
    assert expected.exists()
    assert lock.get_info(str(pid_dir), holder.proc.pid) == (holder.proc.pid, command, str(expected))


def test_pids_of_other_commands_in_the_file_do_not_count(tmp_path):
    pid_dir = tmp_path / "pids"
    _pid, _cmd, pid_file = lock.get_info(str(pid_dir))
    pid_dir.mkdir()
    # A live process with a different command line, as when a pid is reused after a reboot.
    other = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        Path(pid_file).write_text(f"{other.pid}\n")
        assert lock.acquire_for(str(pid_dir)) is True
        assert Path(pid_file).read_text().split() == [str(os.getpid())]
    finally:
        other.kill()
        other.wait(timeout=30)


def test_own_pid_already_listed_counts_as_taken(tmp_path, capsys):
    pid_dir = tmp_path / "pids"
    pid, _cmd, pid_file = lock.get_info(str(pid_dir))
    pid_dir.mkdir()
    Path(pid_file).write_text(f"{pid}\n")
    assert lock.acquire_for(str(pid_dir)) is False
    assert f"Pid(s) {{{pid}}} already running" in capsys.readouterr().out


def test_getpcmd_of_a_missing_process_is_a_placeholder():
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(timeout=30)
    assert lock.getpcmd(dead.pid) == f"[PROCESS_WITH_PID={dead.pid}]"
