"""A pid-file lock that stops the same command line from running more than ``num_available`` times at once.

The pid file is ``<pid_dir>/<md5 of this process's command line>.pid`` and lists one pid per line. Only pids
whose current command line still equals ours count as holders, so stale entries (dead processes, or pids
reused by other programs) are ignored and dropped on the next write.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterable, Iterator
from typing import TextIO

try:
    import fcntl
except ImportError:  # Windows: no flock; the race window is tiny and Luigi never guarded it
    fcntl = None  # type: ignore[assignment]

_DIR_MODE = 0o700


def getpcmd(pid: int) -> str:
    """The command line of process ``pid`` as one space-joined string ("" when it has none, as a zombie),
    or ``[PROCESS_WITH_PID=<pid>]`` when it cannot be read (no such process).

    ``acquire_for`` calls it through this module at each check, so a test patching
    ``luigi.lock.getpcmd`` decides which pids count as running this command.
    """
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            raw = fh.read()
    except OSError:
        raw = None
    if raw is not None:
        return raw.replace(b"\0", b" ").decode("utf-8", "replace").rstrip()
    if not os.path.isdir("/proc/self"):  # not Linux: ask psutil (macOS, Windows, BSD)
        command = _psutil_cmdline(pid)
        if command is not None:
            return command
    return f"[PROCESS_WITH_PID={pid}]"


def _psutil_cmdline(pid: int) -> str | None:
    try:
        import psutil

        return " ".join(psutil.Process(pid).cmdline()).rstrip()
    except Exception:  # psutil missing, process gone or access denied: all mean "unknown command"
        return None


def get_info(pid_dir: str, my_pid: int | None = None) -> tuple[int, str, str]:
    """Return ``(pid, command line, pid file path)`` for ``my_pid`` (default: this process)."""
    if my_pid is None:
        my_pid = os.getpid()
    my_cmd = getpcmd(my_pid)
    digest = hashlib.md5(my_cmd.encode("utf-8"), usedforsecurity=False).hexdigest()
    return my_pid, my_cmd, os.path.join(pid_dir, digest + ".pid")


def acquire_for(pid_dir: str, num_available: int = 1, kill_signal: int | None = None) -> bool:
    """Register this process in the pid file unless ``num_available`` live copies already hold it.

    With ``kill_signal`` (``--take-lock`` sends SIGUSR1) the current holders are signalled and one extra
    process is allowed, so the newcomer can start while the old ones wind down.
    """
    my_pid, my_cmd, pid_file = get_info(pid_dir)
    _make_pid_dir(pid_dir)
    with _locked_pid_file(pid_file) as fh:
        holders = {pid for pid in _parse_pids(fh.read()) if getpcmd(pid) == my_cmd}
        if kill_signal is not None:
            _signal_all(holders, kill_signal)
            num_available += 1
        if len(holders) >= num_available:
            print(f"Pid(s) {_format_pids(holders)} already running")
            if kill_signal is not None:
                print(
                    'Note: There have (probably) been 1 other "--take-lock" process which continued to run! '
                    "Probably no need to run this one as well."
                )
            return False
        fh.seek(0)
        fh.truncate()
        fh.writelines(f"{pid}\n" for pid in sorted(holders | {my_pid}))
    _share_with_other_users(pid_file)
    return True


def _make_pid_dir(pid_dir: str) -> None:
    try:
        os.makedirs(pid_dir, mode=_DIR_MODE)
    except FileExistsError:
        pass


@contextlib.contextmanager
def _locked_pid_file(pid_file: str) -> Iterator[TextIO]:
    """Open (creating if needed) ``pid_file`` for update, holding an exclusive flock where one exists.

    The lock serialises the read-modify-write between two commands started at the same moment.
    """
    fd = os.open(pid_file, os.O_RDWR | os.O_CREAT, 0o666)
    with os.fdopen(fd, "r+") as fh:
        if fcntl is not None:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        yield fh  # closing the file releases the flock


def _signal_all(pids: Iterable[int], kill_signal: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, kill_signal)
    print(f"Sent kill signal to Pids: {_format_pids(pids)}")


def _format_pids(pids: Iterable[int]) -> str:
    """Render pids like a Python set literal (``{12, 34}``), as Luigi prints them, in a stable order."""
    return "{" + ", ".join(str(pid) for pid in sorted(pids)) + "}"


def _parse_pids(text: str) -> set[int]:
    """The pids listed one per line; blank or garbled lines are ignored (the file is shared and editable)."""
    return {int(line) for line in (raw.strip() for raw in text.splitlines()) if line.isdigit()}


def _share_with_other_users(pid_file: str) -> None:
    if os.name == "nt":
        return
    status = os.stat(pid_file)
    if status.st_uid == os.getuid():  # other users running the same command must be able to update it
        os.chmod(pid_file, status.st_mode | 0o777)


__all__ = ["acquire_for", "get_info", "getpcmd"]
