"""Stream wrappers that run an external command and read its output or write its input."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from luigi.format.streams import CHUNK, ExcInfo, aborted, discard, forwarded

__all__ = ["InputPipeProcessWrapper", "OutputPipeProcessWrapper"]

_STDERR_TAIL = 2000


def _direct_fileno(stream: Any, reading: bool) -> int | None:
    """The OS file descriptor a child process may use in place of `stream`, or None if it must be copied.

    Only plain files qualify, and a reader only when it has nothing buffered (Python's position matches the
    descriptor's); a writer is flushed first. Wrapped streams (text, compression, in-memory) are copied
    through a thread instead.
    """
    plain = (io.FileIO, io.BufferedReader) if reading else (io.FileIO, io.BufferedWriter)
    if not isinstance(stream, plain):
        return None
    try:
        fd = stream.fileno()
        if (
            reading
            and isinstance(stream, io.BufferedReader)
            and stream.tell() != os.lseek(fd, 0, os.SEEK_CUR)
        ):
            return None
        if not reading:
            stream.flush()
    except (OSError, ValueError):
        return None
    return fd


class _PipeProcess:
    """A child process plus what it takes to stop it and explain its failure."""

    def __init__(self, command: Sequence[str] | str, **popen_kwargs: Any) -> None:
        self.command = command
        self.stderr = tempfile.TemporaryFile()
        try:
            self.popen = subprocess.Popen(command, stderr=self.stderr, **popen_kwargs)
        except OSError as err:
            self.stderr.close()
            raise OSError(err.errno, f"Cannot run {command!r}: {err.strerror}") from err
        self.copier: threading.Thread | None = None
        self.copy_error: BaseException | None = None

    def copy_in_background(self, source: Any, sink: Any, close_sink: bool) -> None:
        """Pump `source` into `sink` on a thread (a command stopping early is its own business)."""

        def pump() -> None:
            try:
                while chunk := source.read(CHUNK):
                    sink.write(chunk)
            except BrokenPipeError:
                pass
            except BaseException as err:  # reported by finish(); a thread cannot raise into its owner
                self.copy_error = err
            finally:
                if close_sink:
                    with contextlib.suppress(OSError):
                        sink.close()

        self.copier = threading.Thread(target=pump, name=f"luigi-pipe-{self.popen.pid}", daemon=True)
        self.copier.start()

    def finish(self, kill: bool) -> int:
        """Wait for the process (killing it first when asked) and the copy thread; return the exit status."""
        if kill and self.popen.poll() is None:
            self.popen.kill()
        returncode = self.popen.wait()
        if self.copier is not None:
            self.copier.join()
        for stream in (self.popen.stdin, self.popen.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):  # data the command never read is moot now
                    stream.close()
        return returncode

    def stderr_tail(self) -> str:
        """The last characters the command wrote to its standard error."""
        self.stderr.seek(0, os.SEEK_END)
        self.stderr.seek(max(0, self.stderr.tell() - _STDERR_TAIL))
        return self.stderr.read().decode("utf-8", "replace").strip()

    def failure(self, what: str, returncode: int) -> RuntimeError:
        """An error naming the command, its exit status and the end of its stderr."""
        tail = self.stderr_tail()
        detail = f"; stderr: {tail}" if tail else ""
        return RuntimeError(f"{what} {self.command!r} failed with exit status {returncode}{detail}")

    def release(self) -> None:
        self.stderr.close()


# A reader that stops early makes the command die of SIGPIPE (-13, or 141 from a shell): not a failure.
_READ_OK_STATUSES = frozenset({0, 141, -signal.SIGPIPE})


class InputPipeProcessWrapper(io.BufferedIOBase):
    """Read the standard output of `command`, which reads `input_pipe` (or nothing) on standard input.

    The command starts with SIGPIPE at its default action. `close()` (also at a clean `with` exit and at the
    end of iteration) closes the command's output, then `input_pipe`, then waits for the command without
    killing it: stopping early gives it SIGPIPE, as a shell pipeline would. Exit statuses 0, 141 and -13
    pass; any other raises RuntimeError. A `with` block left through an exception kills the command.
    """

    def __init__(self, command: Sequence[str] | str, input_pipe: Any = None) -> None:
        self._done = True
        self._input_pipe = input_pipe
        fd = None if input_pipe is None else _direct_fileno(input_pipe, reading=True)
        stdin: Any = subprocess.DEVNULL if input_pipe is None else (fd if fd is not None else subprocess.PIPE)
        self._process = _PipeProcess(command, stdin=stdin, stdout=subprocess.PIPE, restore_signals=True)
        if stdin == subprocess.PIPE:
            self._process.copy_in_background(input_pipe, self._process.popen.stdin, close_sink=True)
        self._stdout: Any = self._process.popen.stdout
        self._done = False

    def __getattr__(self, name: str) -> Any:
        return forwarded(self, "_input_pipe", name)  # what the command reads, as in Luigi

    @property
    def closed(self) -> bool:
        return self._done

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        return bytes(self._stdout.read(size))

    def read1(self, size: int = -1) -> bytes:
        return bytes(self._stdout.read1(size))

    def readline(self, size: int | None = -1) -> bytes:
        return bytes(self._stdout.readline(size))

    def peek(self, size: int = 0) -> bytes:
        return bytes(self._stdout.peek(size))

    def __iter__(self) -> Iterator[bytes]:
        """The command's output line by line; reaching the end closes the wrapper (raising on failure)."""
        yield from self._stdout
        self.close()

    def close(self) -> None:
        """Stop reading and wait for the command; raise RuntimeError if it failed (see the class doc)."""
        if self._done:
            return
        self._done = True
        copier = self._process.copier
        feeding = copier is not None and copier.is_alive()  # closing the input stops it: not its failure
        try:
            with contextlib.suppress(OSError):
                self._stdout.close()
            if self._input_pipe is not None:
                self._input_pipe.close()
            returncode = self._process.finish(kill=False)
            if returncode not in _READ_OK_STATUSES:
                raise self._read_failure(returncode)
            if not feeding and self._process.copy_error is not None:
                raise RuntimeError(f"Feeding {self._process.command!r} failed") from self._process.copy_error
        finally:
            self._process.release()

    def _read_failure(self, returncode: int) -> RuntimeError:
        failure = RuntimeError(
            f"Error reading from pipe. Subcommand exited with non-zero exit status {returncode}."
        )
        stderr = self._process.stderr_tail()
        if stderr and hasattr(failure, "add_note"):  # Python 3.11+: shown in the traceback, not in str()
            failure.add_note(f"stderr of {self._process.command!r}: {stderr}")
        return failure

    def abort(self) -> None:
        """Kill the command and drop its output (a failing `with` block, or collection while open)."""
        if self._done:
            return
        self._done = True
        try:
            with contextlib.suppress(OSError):
                self._stdout.close()
            self._process.finish(kill=True)
            if self._input_pipe is not None:
                with contextlib.suppress(Exception):  # already failing: the first error is the one to see
                    self._input_pipe.close()
        finally:
            self._process.release()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __del__(self) -> None:
        if not getattr(self, "_done", True):
            with contextlib.suppress(Exception):
                self.abort()


class OutputPipeProcessWrapper(io.BufferedIOBase):
    """Write to the standard input of `command`, whose standard output goes to `output_pipe` (or ours).

    `close()` waits for the command and closes `output_pipe` (committing an atomic file) only if the command
    succeeded; otherwise, and on `abort()` or a failing `with` block, `output_pipe` is discarded.
    """

    def __init__(self, command: Sequence[str] | str, output_pipe: Any = None) -> None:
        self._done = True
        self._output_pipe = output_pipe
        fd = None if output_pipe is None else _direct_fileno(output_pipe, reading=False)
        stdout: Any = None if output_pipe is None else (fd if fd is not None else subprocess.PIPE)
        self._process = _PipeProcess(command, stdin=subprocess.PIPE, stdout=stdout)
        if stdout == subprocess.PIPE:
            self._process.copy_in_background(self._process.popen.stdout, output_pipe, close_sink=False)
        self._stdin: Any = self._process.popen.stdin
        self._input_refused = False
        self._failure: ExcInfo | None = None
        self._done = False

    def __getattr__(self, name: str) -> Any:
        return forwarded(self, "_output_pipe", name)  # the atomic file written, as in Luigi

    @property
    def closed(self) -> bool:
        return self._done

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        if self._done:
            raise ValueError("I/O operation on closed file")
        if self._input_refused:
            return memoryview(data).nbytes
        try:
            return int(self._stdin.write(data))
        except BrokenPipeError as err:
            return self._on_input_refused(err, memoryview(data).nbytes)

    def flush(self) -> None:
        if self._done or self._input_refused:
            return
        try:
            self._stdin.flush()
        except BrokenPipeError as err:
            self._on_input_refused(err, 0)

    def _on_input_refused(self, err: BrokenPipeError, size: int) -> int:
        """The command closed its input: a failure if it failed, else (like `| head`) the rest is dropped."""
        returncode = self._process.popen.wait()
        if returncode != 0:
            raise self._abandon(self._process.failure("Writing to", returncode)) from err
        self._input_refused = True
        return size

    def close(self) -> None:
        """Finish the input, wait for the command, and commit `output_pipe` if it succeeded."""
        if self._done:
            return
        with contextlib.suppress(BrokenPipeError):
            self._stdin.close()  # flushing may find the command gone; its exit status says if that is bad
        returncode = self._process.finish(kill=False)
        if returncode != 0:
            raise self._abandon(self._process.failure("Writing to", returncode))
        if self._process.copy_error is not None:
            failure = RuntimeError(f"Copying the output of {self._process.command!r} failed")
            raise self._abandon(failure) from self._process.copy_error
        self._done = True
        self._process.release()
        if self._output_pipe is not None:
            self._output_pipe.close()

    def abort(self) -> None:
        """Kill the command and discard `output_pipe`; subclasses extend this to clean up their own state."""
        self._stop_discarding(self._failure or aborted())

    def _abandon(self, failure: RuntimeError) -> RuntimeError:
        """Abort because of `failure`, and return it for the caller to raise."""
        self._failure = (RuntimeError, failure, None)
        self.abort()
        return failure

    def _stop_discarding(self, exc_info: ExcInfo) -> None:
        if self._done:
            return
        self._done = True
        with contextlib.suppress(OSError):
            self._stdin.close()
        self._process.finish(kill=True)
        self._process.release()
        if self._output_pipe is not None:
            discard(self._output_pipe, exc_info)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self._failure = (exc_type, exc, tb)
            self.abort()

    def __del__(self) -> None:
        if not getattr(self, "_done", True):
            with contextlib.suppress(Exception):
                self.abort()
