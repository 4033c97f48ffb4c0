"""Running ``luigid`` as a daemon: the pidfile that keeps a second one from starting, and daemonizing.

The pidfile holds the server's pid and is locked (``flock``) while the server runs, so a crashed
server never leaves a file that blocks the next start, and two servers started at once cannot both
take it. A file left by something that does not lock still blocks while its pid is alive.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import logging
import logging.handlers
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any, TextIO

import psutil

__all__ = [
    "DEFAULT_LOGDIR",
    "ServerAlreadyRunning",
    "ServerSetupError",
    "check_pid",
    "daemonize",
    "get_log_format",
    "get_spool_handler",
    "hold_pidfile",
    "prepare_logdir",
    "write_pid",
]

logger = logging.getLogger("luigi.server")

DEFAULT_LOGDIR = "/var/log/luigi"
LOG_FORMAT = "%(asctime)s %(name)s[%(process)s] %(levelname)s: %(message)s"


class ServerAlreadyRunning(RuntimeError):
    """Another live ``luigid`` holds the pidfile."""


class ServerSetupError(OSError):
    """A file or directory the server needs (pidfile, log directory) cannot be used; names it."""


def check_pid(pidfile: str | None) -> int | None:
    """The pid of the live server named by ``pidfile``, or None when none is running (or no pidfile)."""
    if not pidfile:
        return None
    try:
        fd = os.open(pidfile, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ServerSetupError(f"Cannot read pidfile {pidfile}: {exc.strerror}") from exc
    with os.fdopen(fd) as handle:
        pid = _parse_pid(handle.read())
        locked = not _try_lock(fd, release=True)
    if locked:  # the holder may not have written its pid yet: 0 stands for "unknown"
        return pid if pid is not None else 0
    if pid is None or pid == os.getpid():
        return None
    return pid if _alive_since_before(pid, pidfile) else None


def write_pid(pidfile: str) -> None:
    """Write our pid to ``pidfile`` (unlocked: prefer ``hold_pidfile``, which also removes it)."""
    try:
        with open(pidfile, "w") as handle:
            handle.write(f"{os.getpid()}\n")
    except OSError as exc:
        raise ServerSetupError(f"Cannot write pidfile {pidfile}: {exc.strerror}") from exc


@contextlib.contextmanager
def hold_pidfile(pidfile: str) -> Iterator[None]:
    """Take ``pidfile`` for this process (ServerAlreadyRunning if a live server has it); remove it on exit."""
    pidfile = os.path.abspath(pidfile)
    handle = _take(pidfile)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(pidfile)  # while still locked, so nobody takes the file we are about to drop
        handle.close()


def _take(pidfile: str) -> TextIO:
    """Open, lock and fill the pidfile; retried when another process replaced the file meanwhile."""
    for _ in range(10):
        running = check_pid(pidfile)
        if running is not None:
            raise _already_running(pidfile, running)
        try:
            handle = open(pidfile, "a+")  # kept open, and locked, while the server runs
        except OSError as exc:
            raise ServerSetupError(f"Cannot create pidfile {pidfile}: {exc.strerror}") from exc
        if not _try_lock(handle.fileno(), release=False):
            handle.close()
            continue
        if not _same_file(handle, pidfile):  # unlinked by its previous owner after we opened it
            handle.close()
            continue
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        return handle
    raise ServerAlreadyRunning(f"Could not take pidfile {pidfile}: other processes keep changing it")


def _already_running(pidfile: str, pid: int) -> ServerAlreadyRunning:
    return ServerAlreadyRunning(
        f"luigid is already running (pid {pid}, pidfile {pidfile}); stop it first or use another --pidfile"
    )


def _parse_pid(text: str) -> int | None:
    first = text.strip().split("\n", 1)[0].strip()
    return int(first) if first.isdigit() and int(first) > 0 else None


def _try_lock(fd: int, release: bool) -> bool:
    """Whether an exclusive lock on ``fd`` could be taken (released again when ``release``)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    if release:
        fcntl.flock(fd, fcntl.LOCK_UN)
    return True


def _same_file(handle: TextIO, path: str) -> bool:
    try:
        return os.fstat(handle.fileno()).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False


def _alive_since_before(pid: int, pidfile: str) -> bool:
    """Whether ``pid`` runs (not a zombie) and started before the pidfile was written (not a reused pid)."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        return process.create_time() <= os.stat(pidfile).st_mtime + 1.0
    except (psutil.NoSuchProcess, FileNotFoundError):
        return False
    except psutil.AccessDenied:
        return True


def get_log_format() -> str:
    """The daemon's log line format: time, logger name with the pid, level, message."""
    return LOG_FORMAT


def get_spool_handler(filename: str) -> logging.Handler:
    """The daemon's log file: rotated at midnight, seven old files kept."""
    handler = logging.handlers.TimedRotatingFileHandler(filename, when="midnight", backupCount=7)
    handler.setFormatter(logging.Formatter(get_log_format()))
    return handler


def daemonize(
    cmd: Callable[..., Any],
    pidfile: str | None = None,
    logdir: str | None = None,
    api_port: int = 8082,
    address: str | None = None,
    unix_socket: str | None = None,
) -> None:
    """Detach into the background and run ``cmd(api_port=, address=, unix_socket=)`` there.

    A live server on ``pidfile`` is refused here, in the foreground, so the user sees why
    (ServerAlreadyRunning). The calling process exits once the daemon is forked; the daemon logs to
    ``<logdir>/luigi-server.log`` and sends stdout/stderr to ``luigi-server-<date>.out/.err`` there.
    """
    import daemon  # python-daemon; imported here so the server imports without it

    pidfile = os.path.abspath(pidfile) if pidfile else None
    if pidfile is not None:
        running = check_pid(pidfile)
        if running is not None:
            raise _already_running(pidfile, running)
    logdir = prepare_logdir(logdir or DEFAULT_LOGDIR)
    stamp = datetime.date.today().isoformat()
    stdout = open(os.path.join(logdir, f"luigi-server-{stamp}.out"), "a")  # the daemon's own streams
    stderr = open(os.path.join(logdir, f"luigi-server-{stamp}.err"), "a")
    # The working directory stays, so relative paths in the command line and config keep their meaning.
    context = daemon.DaemonContext(stdout=stdout, stderr=stderr, working_directory=os.getcwd(), umask=0o022)
    with context:
        logging.getLogger().addHandler(get_spool_handler(os.path.join(logdir, "luigi-server.log")))
        sys.exit(_run_daemon(cmd, pidfile, api_port=api_port, address=address, unix_socket=unix_socket))


def _run_daemon(cmd: Callable[..., Any], pidfile: str | None, **kwargs: Any) -> int:
    """The daemon's body: hold the pidfile while ``cmd`` runs; the exit status."""
    try:
        with hold_pidfile(pidfile) if pidfile else contextlib.nullcontext():
            cmd(**kwargs)
    except Exception:  # nobody is watching the terminal any more: the log is the only place to say why
        logger.exception("luigid stopped on an error")
        return 1
    return 0


def prepare_logdir(logdir: str) -> str:
    """``logdir`` as an absolute path, created if missing; ServerSetupError when it cannot be written."""
    logdir = os.path.abspath(logdir)
    try:
        os.makedirs(logdir, exist_ok=True)
    except OSError as exc:
        raise ServerSetupError(
            f"Cannot create log directory {logdir}: {exc.strerror} (choose one with --logdir)"
        ) from exc
    if not os.access(logdir, os.W_OK):
        raise ServerSetupError(f"Cannot write to log directory {logdir} (choose one with --logdir)")
    return logdir
