"""The pipes between the worker and its task slots: newline-delimited JSON, read without blocking.

JSON rather than pickle keeps the format plain data; each side only ever reads what its own code wrote.
"""

from __future__ import annotations

import json
import logging
import os
import select
from collections import deque
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("luigi-interface")

_READ_SIZE = 65536


class JsonLineWriter:
    """Writes one JSON document per line to a file descriptor (blocking unless told otherwise)."""

    def __init__(self, fd: int, nonblocking: bool = False) -> None:
        self._fd = fd
        if nonblocking:
            os.set_blocking(fd, False)

    def fileno(self) -> int:
        return self._fd

    def send(self, message: Any) -> bool:
        """Write ``message``; False when the reader is gone or (non-blocking) the pipe is full."""
        return self.send_all([message])

    def send_all(self, messages: list[Any]) -> bool:
        """Write ``messages`` in one write (the reader wakes once); False as ``send``."""
        text = "".join(json.dumps(message, default=str) + "\n" for message in messages)
        data = memoryview(text.encode("utf-8"))
        try:
            while data:
                data = data[os.write(self._fd, data) :]
        except (BrokenPipeError, BlockingIOError, OSError):
            return False
        return True

    def close(self) -> None:
        self._fd = _close_once(self._fd)


class JsonLineReader:
    """Reads JSON lines from a file descriptor without ever blocking longer than asked."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = b""
        self._messages: deque[Any] = deque()
        self.at_eof = False
        os.set_blocking(fd, False)

    def fileno(self) -> int:
        return self._fd

    def pump(self) -> None:
        """Read whatever the pipe holds right now into the message buffer."""
        while not self.at_eof:
            try:
                chunk = os.read(self._fd, _READ_SIZE)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:
                self.at_eof = True
                break
            self._buffer += chunk
            self._split_lines()

    def _split_lines(self) -> None:
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            try:
                self._messages.append(json.loads(line))
            except ValueError:
                logger.warning("Ignoring a malformed message from a task process: %r", line[:200])

    def wait(self, timeout: float | None) -> bool:
        """Block until a message is buffered, the pipe closes or ``timeout`` passes; True if one is there."""
        if not self._messages and not self.at_eof:
            ready, _, _ = select.select([self._fd], [], [], timeout)
            if ready:
                self.pump()
        return bool(self._messages)

    def wait_for_more(self, timeout: float | None) -> None:
        """Block until the pipe has more to read (read into the buffer), closes, or ``timeout`` passes."""
        if not self.at_eof:
            ready, _, _ = select.select([self._fd], [], [], timeout)
            if ready:
                self.pump()

    def take_first(self, wanted: Callable[[Any], bool]) -> Any:
        """The oldest buffered message ``wanted`` accepts, taken out of the buffer (the others stay); None
        if there is none."""
        for index, message in enumerate(self._messages):
            if wanted(message):
                del self._messages[index]
                return message
        return None

    def take_all(self) -> list[Any]:
        """Every buffered message, oldest first, emptying the buffer."""
        messages = list(self._messages)
        self._messages.clear()
        return messages

    def take_one(self) -> Any:
        """The oldest buffered message (call after ``wait`` returned True)."""
        return self._messages.popleft()

    def peek_all(self) -> list[Any]:
        """The buffered messages, oldest first, left in the buffer."""
        return list(self._messages)

    def close(self) -> None:
        self._fd = _close_once(self._fd)


def _close_once(fd: int) -> int:
    """Close ``fd`` unless already closed (-1); closing twice could hit a descriptor reused by a thread."""
    if fd >= 0:
        try:
            os.close(fd)
        except OSError:
            pass
    return -1


class ClaimPipe:
    """Who runs a job queued in a slot: the worker or the slot, whichever reads its token first.

    The worker writes one byte, the job's number modulo 256, before each job it queues in a slot, and both
    keep the read end (non-blocking). The slot starts a job only if it read that job's token; the worker
    takes back a job not started yet by reading the oldest token left (a pipe gives a byte to one reader
    only, so the job runs in exactly one place). Tokens are read oldest first on both sides, so fewer than
    256 jobs may be outstanding in a slot.
    """

    def __init__(self, read_fd: int, write_fd: int | None) -> None:
        self._read_fd = read_fd
        self._write_fd = write_fd
        os.set_blocking(read_fd, False)
        self._held: set[int] = set()  # tokens of later jobs the slot read while looking for an earlier one

    def fds(self) -> list[int]:
        return [fd for fd in (self._read_fd, self._write_fd) if fd is not None and fd >= 0]

    def offer(self, numbers: list[int]) -> int:
        """(worker) Put the tokens of jobs ``numbers`` in the pipe, in one write; how many were written."""
        if self._write_fd is None or self._write_fd < 0:
            return 0
        try:
            return os.write(self._write_fd, bytes(number % 256 for number in numbers))
        except OSError:
            return 0

    def take_oldest(self) -> int | None:
        """(worker) Read the oldest token left: the number (mod 256) of the job taken back, or None when
        the slot has claimed every job it was given."""
        try:
            token = os.read(self._read_fd, 1)
        except (BlockingIOError, OSError):
            return None
        return token[0] if token else None

    def claim(self, number: int) -> bool:
        """(slot) Whether job ``number`` is this slot's to run (False: the worker took it back)."""
        wanted = number % 256
        if wanted in self._held:
            self._held.discard(wanted)
            return True
        token = self.take_oldest()
        if token is None:
            return False
        if token != wanted:  # the worker took this job back; the token is a later job's
            self._held.add(token)
            return False
        return True

    def close(self) -> None:
        self._read_fd = _close_once(self._read_fd)
        if self._write_fd is not None:
            self._write_fd = _close_once(self._write_fd)
