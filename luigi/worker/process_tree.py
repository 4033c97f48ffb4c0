"""Finding and killing every process a task started, even ones that left its session or were re-parented.

Each run of a task gets a tag, put into the environment the task (and so every program it starts) sees
under ``TAG_VARIABLE``: ``<worker tag>:<run number>``. A kill looks for the task's descendants, its process
group and every process whose environment (``/proc/<pid>/environ``, read with psutil) carries the tag, so a
``setsid`` grandchild that was re-parented to init is found as well. A process that cleared its
environment, or a forked child that never called ``exec`` after the tag was set, is found only as a
descendant or a group member. Slots also ask the kernel for a parent-death signal (``prctl``).
"""

from __future__ import annotations

import os
import secrets
import signal
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psutil

TAG_VARIABLE = "LUIGI_TASK_RUN"

_PR_SET_PDEATHSIG = 1
# Kill rounds: a process may start another between the scan and its kill; the next round finds it.
_KILL_ROUNDS = 4


def worker_tag() -> str:
    """A tag for one worker's task runs, unique on this host (a run adds ``:<number>``)."""
    return f"{os.getpid()}-{secrets.token_hex(4)}"


def run_tag(worker: str, number: int) -> str:
    """The tag of a worker's ``number``th task run."""
    return f"{worker}:{number}"


def set_parent_death_signal(signum: int) -> bool:
    """Ask the kernel to send ``signum`` to this process when its parent dies (Linux only); True if set."""
    import ctypes  # here: only a slot asks (slots.child imports it before forking); a serial run has none
    import ctypes.util

    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return False
    try:
        libc = ctypes.CDLL(libc_name, use_errno=True)
        return int(libc.prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def tagged_processes(tag: str, prefix: bool = False) -> list[psutil.Process]:
    """Processes of this user whose environment holds ``tag`` (or, with ``prefix``, a tag under it)."""
    import psutil  # here and below: only a kill needs it, and most runs kill nothing

    found = []
    me = os.getpid()
    for process in psutil.process_iter():
        if process.pid == me:
            continue
        try:
            value = process.environ().get(TAG_VARIABLE)
        except (psutil.Error, OSError):
            continue  # gone, a zombie, or another user's: not ours to kill
        if value is not None and (value == tag or (prefix and value.startswith(tag + ":"))):
            found.append(process)
    return found


def _descendants(pid: int) -> Iterator[psutil.Process]:
    import psutil

    try:
        yield from psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return


def kill_tree(pid: int | None, tag: str | None, prefix: bool = False) -> int:
    """SIGKILL ``pid``, its descendants, its process group and every process tagged ``tag``.

    ``pid`` None: only the tagged processes (a dead slot's orphans, an in-process task's children).
    Returns how many processes were signalled.
    """

    def victims() -> list[psutil.Process]:
        found = list(_descendants(pid)) if pid is not None else []
        if tag is not None:
            found.extend(tagged_processes(tag, prefix))
        return found

    killed = _kill_in_rounds(victims)
    if pid is not None:
        _kill_leader_and_group(pid)
    return killed


def kill_descendants(pid: int) -> int:
    """SIGKILL every process ``pid`` started, directly or not, leaving ``pid`` itself; returns how many."""
    return _kill_in_rounds(lambda: list(_descendants(pid)))


def _kill_in_rounds(victims: Callable[[], list[psutil.Process]]) -> int:
    import psutil

    killed: set[int] = set()
    for _ in range(_KILL_ROUNDS):
        fresh = [process for process in victims() if process.pid not in killed]
        for process in fresh:
            try:
                process.kill()
            except psutil.Error:
                pass
            killed.add(process.pid)
        if not fresh:
            break
    return len(killed)


def _kill_leader_and_group(pid: int) -> None:
    for kill in (os.kill, os.killpg):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
