"""One ``luigi`` child process of a schedule run: started without a shell, its output kept, its end awaited.

``ChildRun.start`` runs the argument list in its own session (so stopping it reaches the processes it
starts), with stdout and stderr into one pipe that ``wait()`` copies into a ``BoundedLog`` on the
asyncio loop; nothing here blocks that loop for longer than one small file write.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["LOG_MAX_BYTES", "BoundedLog", "ChildRun"]

LOG_MAX_BYTES = 1 << 20  # per run: the first part and the last LOG_TAIL_BYTES are kept, the middle cut
LOG_TAIL_BYTES = 256 << 10
_READ_BYTES = 64 << 10
STOP_GRACE_SECONDS = 10.0  # after SIGTERM, before SIGKILL, when luigid stops


class BoundedLog:
    """A run's log file: everything up to ``max_bytes``; past that the head and the last ``tail_bytes``,
    with a line saying how much was cut between them."""

    def __init__(self, path: Path, max_bytes: int = LOG_MAX_BYTES, tail_bytes: int = LOG_TAIL_BYTES) -> None:
        self.path = path
        self._head_limit = max_bytes - tail_bytes
        self._tail_bytes = tail_bytes
        self._file = open(path, "wb")  # noqa: SIM115  # closed by close(), after the child's last byte
        self._written = 0
        self._tail = bytearray()
        self._cut = 0

    @property
    def size(self) -> int:
        """The bytes the file holds (once closed)."""
        return self._written

    def write(self, chunk: bytes) -> None:
        room = self._head_limit - self._written
        if room > 0:
            head, chunk = chunk[:room], chunk[room:]
            self._file.write(head)
            self._file.flush()  # so the visualiser shows a running run's output
            self._written += len(head)
        if chunk:
            self._tail += chunk
            overflow = len(self._tail) - self._tail_bytes
            if overflow > 0:
                del self._tail[:overflow]
                self._cut += overflow

    def close(self) -> None:
        """Write the kept tail (after the cut mark) and close the file."""
        if self._cut:
            mark = f"\n[... {self._cut} bytes of output cut here: a run's log keeps its start and end ...]\n"
            encoded = mark.encode()
            self._file.write(encoded)
            self._written += len(encoded)
        self._file.write(self._tail)
        self._written += len(self._tail)
        self._tail.clear()
        self._file.close()


class ChildRun:
    """A started child process and the log its output goes to."""

    def __init__(self, process: asyncio.subprocess.Process, log: BoundedLog) -> None:
        self.process = process
        self.log = log

    @property
    def pid(self) -> int:
        return self.process.pid

    @classmethod
    async def start(
        cls, argv: Sequence[str], cwd: str | None, env: Mapping[str, str], log_path: Path
    ) -> ChildRun:
        """Start ``argv`` (OSError when it cannot be: no such directory or program)."""
        log = BoundedLog(log_path)
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                cwd=cwd,
                env=dict(env),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        except BaseException:
            log.close()
            raise
        return cls(process, log)

    async def wait(self) -> int:
        """Copy the output into the log until the child closes it, then reap it; its exit status
        (negative: the signal that ended it)."""
        stream = self.process.stdout
        try:
            if stream is not None:
                while chunk := await stream.read(_READ_BYTES):
                    self.log.write(chunk)
            return await self.process.wait()
        finally:
            self.log.close()

    def signal_group(self, sig: signal.Signals) -> None:
        """Send ``sig`` to the child's process group (its own session), if it is still there."""
        if self.process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, sig)

    async def stop(self, grace: float = STOP_GRACE_SECONDS) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds if it has not exited."""
        self.signal_group(signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(self.process.wait()), grace)
        except asyncio.TimeoutError:
            self.signal_group(signal.SIGKILL)
