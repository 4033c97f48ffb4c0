"""The pipes between the worker and its task slots: newline-delimited JSON, read without blocking.

JSON rather than pickle keeps the format plain data; each side only ever reads what its own code wrote.
"""

from __future__ import annotations

import json
import logging
import os
import select
from collections import deque
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
        data = memoryview((json.dumps(message, default=str) + "\n").encode("utf-8"))
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
