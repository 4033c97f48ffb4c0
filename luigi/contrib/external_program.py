"""Tasks that run an external program: its command line, environment, captured output and tracking URL.

``ExternalProgramTask.run()`` starts ``program_args()`` with ``program_environment()``, waits for it, logs
what it printed, and raises ``ExternalProgramRunError`` (command, return code, stdout, stderr) when it
exits non-zero. While the program runs, a SIGTERM to the process running the task kills the program and
everything it started (``ExternalProgramRunContext``), so stopping a worker leaves no orphan behind.
Environment values never reach a log line or an error text: secrets belong in ``program_environment()``.
"""

from __future__ import annotations

import logging
import os
import re
import selectors
import signal
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from types import FrameType, TracebackType
from typing import IO, TYPE_CHECKING, Any

import luigi
from luigi.parameter import BoolParameter, ChoiceParameter, OptionalParameter

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "ExternalProgramRunContext",
    "ExternalProgramRunError",
    "ExternalProgramTask",
    "ExternalPythonProgramTask",
]

logger = logging.getLogger("luigi-interface")

TRACKING_STREAMS = ("none", "stdout", "stderr")
# An error text shows at most this much of each stream (the end of it); the attributes keep it all.
SHOWN_OUTPUT_CHARS = 20_000
REDACTED = "***"

# Names of environment variables (and command-line flags) whose values are credentials.
_SECRET_NAME = re.compile(r"pass(word|wd|phrase)?|secret|token|credential|api[_-]?key|private[_-]?key", re.I)
_SECRET_FLAG = re.compile(r"^(--?[\w.-]+)=(.*)$")
_URL_PASSWORD = re.compile(r"(://[^/\s:@]+:)[^/\s@]+@")
# Shorter values are too likely to be ordinary words ("true", "1") to be blanked out everywhere.
_MIN_SECRET_LENGTH = 5


class _Redactor:
    """Blanks out credential values (secret-named variables and flags, URL passwords) in text for logs."""

    def __init__(self, env: Mapping[str, str] | None, args: Sequence[str]) -> None:
        secrets = {value for name, value in (env or {}).items() if _SECRET_NAME.search(name)}
        secrets.update(_secret_flag_values(args))
        self._secrets = sorted((s for s in secrets if len(s) >= _MIN_SECRET_LENGTH), key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return _URL_PASSWORD.sub(rf"\g<1>{REDACTED}@", text)


def _secret_flag_values(args: Sequence[str]) -> set[str]:
    """Values given to secret-named flags, as ``--password=x`` or ``--password x``."""
    values = set()
    for index, arg in enumerate(args):
        joined = _SECRET_FLAG.match(arg)
        if joined and _SECRET_NAME.search(joined.group(1)):
            values.add(joined.group(2))
        elif arg.startswith("-") and _SECRET_NAME.search(arg) and index + 1 < len(args):
            values.add(args[index + 1])
    return values


def _describe_returncode(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        try:
            return f"{returncode} (killed by {signal.Signals(-returncode).name})"
        except ValueError:
            pass
    return str(returncode)


def _tail(text: str | None) -> str:
    text = (text or "").rstrip("\n")
    if not text:
        return "[empty]"
    if len(text) <= SHOWN_OUTPUT_CHARS:
        return text
    hidden = len(text) - SHOWN_OUTPUT_CHARS
    return f"[... {hidden} earlier characters not shown]\n{text[-SHOWN_OUTPUT_CHARS:]}"


class _ProgramOutputError(RuntimeError):
    """A job's program failed: ``message``, with what it printed, ``out`` and ``err`` (Pig's and Hadoop's
    errors, which Luigi constructs alike)."""

    def __init__(self, message: str, out: str | None = None, err: str | None = None) -> None:
        super().__init__(message, out, err)
        self.message = message
        self.out = out
        self.err = err


class ExternalProgramRunError(RuntimeError):
    """An external program could not be started or did not succeed.

    Carries the command (``args``, as Luigi has it, and ``command``), ``returncode`` (None if it never
    ran), the decoded ``out``/``err`` (None when output was not captured) and the ``env`` it ran with.
    Its text shows the command and the output with credentials blanked out, and only the *names* of the
    environment variables the task set.
    """

    def __init__(
        self,
        message: str,
        args: Sequence[str],
        env: Mapping[str, str] | None = None,
        stdout: str | None = None,
        stderr: str | None = None,
        returncode: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.command = [str(arg) for arg in args]
        self.args = tuple(self.command)  # Luigi's ExternalProgramRunError.args is the command
        self.env = dict(env) if env is not None else None
        self.out = stdout
        self.err = stderr
        self.returncode = returncode
        self._redact = _Redactor(self.env, self.command)

    def __reduce__(self) -> Any:
        """Pickle by constructor arguments (``args`` holds the command, so the default would fail)."""
        fields = (self.message, self.command, self.env, self.out, self.err, self.returncode)
        return (type(self), fields)

    def _environment_line(self) -> str:
        if not self.env:
            return "[empty]"
        changed = sorted(name for name, value in self.env.items() if os.environ.get(name) != value)
        removed = sorted(name for name in os.environ if name not in self.env)
        parts = [f"set by the task: {', '.join(changed)}"] if changed else []
        if removed:
            parts.append(f"removed by the task: {', '.join(removed)}")
        return "; ".join(parts or ["the worker's own"]) + " (values not shown)"

    def __str__(self) -> str:
        lines = [
            self._redact(self.message),
            f"COMMAND: {self._redact(' '.join(self.command))}",
            f"STDOUT: {self._redact(_tail(self.out))}",
            f"STDERR: {self._redact(_tail(self.err))}",
            f"ENVIRONMENT: {self._environment_line()}",
        ]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._redact(self.message)!r}, returncode={self.returncode!r})"


class _KilledBySignal(SystemExit):
    """What ``kill_job`` raises from the SIGTERM handler: ``SystemExit(128 + signal)``, as Luigi does."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum


def _kill_program_tree(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL a program that has not been reaped yet, with everything it started.

    Safe inside a signal handler that interrupted ``proc.wait()``: it never waits (the caller reaps).
    """
    if proc.poll() is not None:  # already reaped: its pid may belong to someone else by now
        return
    from luigi.worker.slots.pool import kill_process_tree  # the worker's own way of killing a task tree

    kill_process_tree(proc.pid)


class _SigtermContext:
    """While active (in the main thread), SIGTERM calls ``kill_job``; the previous handler comes back after.

    Leaving the block with an exception calls ``on_exception``. Subclasses say what killing means.
    """

    def __init__(self) -> None:
        self._previous_handler: Any = None
        self._installed = False

    def __enter__(self) -> Self:
        try:
            self._previous_handler = signal.signal(signal.SIGTERM, self.kill_job)
            self._installed = True
        except ValueError:  # not the main thread: signal handlers can only be set there
            logger.debug("Not in the main thread: a SIGTERM will not stop %s", self)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if exc_type is not None:
                self.on_exception(exc_type)
        finally:
            if self._installed:
                previous = self._previous_handler
                signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
                self._installed = False

    def on_exception(self, exc_type: type[BaseException]) -> None:
        """What leaving the block with an exception does."""
        raise NotImplementedError

    def kill_job(self, captured_signal: int | None = None, stack_frame: FrameType | None = None) -> None:
        """The SIGTERM handler."""
        raise NotImplementedError


class ExternalProgramRunContext(_SigtermContext):
    """While active, a SIGTERM to this process kills ``proc`` (and its children), then exits 128+15.

    Leaving the block with an exception while the program still runs kills it too (Ctrl-C included).
    Outside the main thread, where Python cannot handle signals, only that second guarantee holds.
    """

    def __init__(self, proc: subprocess.Popen[Any]) -> None:
        super().__init__()
        self.proc = proc

    def on_exception(self, exc_type: type[BaseException]) -> None:
        _kill_program_tree(self.proc)

    def kill_job(self, captured_signal: int | None = None, stack_frame: FrameType | None = None) -> None:
        """Kill the program; called as the signal handler, also exit with ``128 + captured_signal``."""
        _kill_program_tree(self.proc)
        if captured_signal is not None:
            raise _KilledBySignal(captured_signal)


class ExternalProgramTask(luigi.Task):
    """A task whose ``run()`` is an external program: override ``program_args()`` (and maybe the rest).

    ``capture_output`` (default true) collects stdout and stderr and logs them after the program ends;
    false lets the program write straight to the worker's own streams. With ``tracking_url_pattern`` and
    ``stream_for_searching_tracking_url``, the first group of the pattern's match in that stream becomes
    the task's tracking URL (through ``build_tracking_url``) while the program runs.
    """

    capture_output = BoolParameter(
        default=True,
        significant=False,
        positional=False,
        parsing=BoolParameter.EXPLICIT_PARSING,
        description="Capture the program's stdout and stderr and log them (--capture-output false: don't)",
    )
    stream_for_searching_tracking_url = ChoiceParameter(
        var_type=str,
        choices=TRACKING_STREAMS,
        default="none",
        significant=False,
        positional=False,
        description="Stream of the program searched for the tracking URL",
    )
    tracking_url_pattern = OptionalParameter(
        default=None,
        significant=False,
        positional=False,
        description="Regex whose first group, found in the program's output, is the tracking URL",
    )

    # Log the program's stderr even when it succeeds (it is always logged when it fails).
    always_log_stderr: bool = True

    def program_args(self) -> Sequence[Any]:
        """The command line: the program and its arguments (each is turned into a str)."""
        raise NotImplementedError(f"{type(self).__name__} must define program_args()")

    def program_environment(self) -> dict[str, str]:
        """The program's environment: this process's own by default. Pass credentials here."""
        return os.environ.copy()

    def build_tracking_url(self, logs_output: str) -> str:
        """The tracking URL for what the pattern matched in the output (the match itself by default)."""
        return logs_output

    def on_failure(self, exception: BaseException) -> str | None:
        """A failed program's explanation is the error's text (command, return code, output), no traceback."""
        if isinstance(exception, ExternalProgramRunError):
            return str(exception)
        return super().on_failure(exception)

    def run(self) -> None:
        args = self._checked_args()
        env = self.program_environment()
        redact = _Redactor(env, args)
        pattern = self._tracking_pattern()
        logger.info("Running command: %s", redact(" ".join(args)))
        with ExitStack() as files:
            out_file, err_file = self._capture_files(files)
            proc = self._start(args, env, out_file, err_file, pattern)
            killed = self._wait(proc, pattern, out_file, err_file)
            stdout, stderr = self._captured(out_file), self._captured(err_file)
        success = proc.returncode == 0 and killed is None
        self._log_output(stdout, stderr, success, redact)
        if killed is not None:
            message = (
                f"Program killed: the process running the task (pid {os.getpid()}) received "
                f"{signal.Signals(killed.signum).name}"
            )
            raise ExternalProgramRunError(message, args, env, stdout, stderr, proc.returncode) from killed
        if not success:
            message = f"Program failed with return code={_describe_returncode(proc.returncode)}:"
            raise ExternalProgramRunError(message, args, env, stdout, stderr, proc.returncode)

    # -- running the program ----------------------------------------------------------------------------

    def _checked_args(self) -> list[str]:
        program_args = self.program_args()
        if isinstance(program_args, (str, bytes)):  # would otherwise run each character as an argument
            raise TypeError(
                f"{self}: program_args() must return a list of arguments, not the string {program_args!r} "
                "(e.g. ['ls', '-l'] rather than 'ls -l')"
            )
        args = [str(arg) for arg in program_args]
        if not args:
            raise ValueError(f"{self}: program_args() returned no program to run")
        return args

    def _tracking_pattern(self) -> re.Pattern[str] | None:
        """The compiled tracking URL pattern when a stream is to be searched, else None."""
        if self.stream_for_searching_tracking_url == "none" or not self.tracking_url_pattern:
            return None
        try:
            return re.compile(self.tracking_url_pattern)
        except re.error as exc:
            raise ValueError(
                f"{self}: tracking_url_pattern {self.tracking_url_pattern!r} is not a valid regex: {exc}"
            ) from exc

    def _capture_files(self, files: ExitStack) -> tuple[IO[bytes] | None, IO[bytes] | None]:
        if not self.capture_output:
            return None, None
        return files.enter_context(tempfile.TemporaryFile()), files.enter_context(tempfile.TemporaryFile())

    def _start(
        self,
        args: list[str],
        env: dict[str, str],
        out_file: IO[bytes] | None,
        err_file: IO[bytes] | None,
        pattern: re.Pattern[str] | None,
    ) -> subprocess.Popen[bytes]:
        """Start the program; the tracked stream (if any) comes through a pipe, the others go to files."""
        streams: dict[str, Any] = {"stdout": out_file, "stderr": err_file}
        if pattern is not None:
            streams[self.stream_for_searching_tracking_url] = subprocess.PIPE
        try:
            return subprocess.Popen(args, env=env, **streams)
        except OSError as exc:
            redact = _Redactor(env, args)
            message = f"Program could not be started: {redact(str(exc))}"
            if isinstance(exc, FileNotFoundError):
                message += " (is it installed and on the PATH of program_environment()?)"
            raise ExternalProgramRunError(message, args, env) from exc

    def _wait(
        self,
        proc: subprocess.Popen[bytes],
        pattern: re.Pattern[str] | None,
        out_file: IO[bytes] | None,
        err_file: IO[bytes] | None,
    ) -> _KilledBySignal | None:
        """Wait for the program (following the tracked stream); the signal if a SIGTERM killed it."""
        try:
            with ExternalProgramRunContext(proc):
                if pattern is not None:
                    tracked = self.stream_for_searching_tracking_url
                    copy_to = out_file if tracked == "stdout" else err_file
                    own_fd = 1 if tracked == "stdout" else 2
                    _StreamFollower(self, pattern, copy_to, own_fd).follow(proc, getattr(proc, tracked))
                proc.wait()
        except _KilledBySignal as killed:
            proc.wait()  # reap what the handler killed
            return killed
        finally:
            if proc.returncode is None:  # left by an exception (Ctrl-C): the context killed it
                proc.wait()
        return None

    @staticmethod
    def _clean_output_file(file_object: IO[bytes]) -> str:
        """Everything written to a capture file, decoded (undecodable bytes replaced)."""
        file_object.seek(0)
        return file_object.read().decode("utf-8", errors="replace")

    def _captured(self, file_object: IO[bytes] | None) -> str | None:
        return None if file_object is None else self._clean_output_file(file_object)

    def _log_output(self, stdout: str | None, stderr: str | None, success: bool, redact: _Redactor) -> None:
        if stdout:
            logger.info("Program stdout:\n%s", redact(stdout))
        if stderr and (self.always_log_stderr or not success):
            logger.info("Program stderr:\n%s", redact(stderr))


class _StreamFollower:
    """Reads a program's tracked stream as it comes, copying it on and reporting tracking URLs found."""

    # Without a pidfd the program's exit is noticed by polling, at most this late (seconds).
    EXIT_POLL_INTERVAL = 0.1

    def __init__(
        self, task: ExternalProgramTask, pattern: re.Pattern[str], copy_to: IO[bytes] | None, own_fd: int
    ) -> None:
        self._task = task
        self._pattern = pattern
        self._copy_to = copy_to
        self._own_fd = own_fd  # where the stream goes when output is not captured
        self._partial = b""
        self._reported: str | None = None

    def follow(self, proc: subprocess.Popen[bytes], pipe: IO[bytes]) -> None:
        """Read until the stream closes, or the program exits (a child of it may hold the pipe open)."""
        with pipe, selectors.DefaultSelector() as selector, _exit_notifier(proc.pid) as exit_fd:
            selector.register(pipe.fileno(), selectors.EVENT_READ, "output")
            if exit_fd is not None:
                selector.register(exit_fd, selectors.EVENT_READ, "exit")
            timeout = None if exit_fd is not None else self.EXIT_POLL_INTERVAL
            while True:
                events = {key.data for key, _ in selector.select(timeout)}
                if "output" in events and not self._read_chunk(pipe.fileno()):
                    break  # end of stream
                if "exit" in events or (exit_fd is None and proc.poll() is not None):
                    self._drain(pipe.fileno())
                    break
            self._handle_line(self._partial)

    def _read_chunk(self, fd: int) -> bool:
        chunk = os.read(fd, 65536)
        if not chunk:
            return False
        self._copy(chunk)
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            self._handle_line(line)
        return True

    def _drain(self, fd: int) -> None:
        """Read what the exited program left in the pipe, without waiting for more."""
        os.set_blocking(fd, False)
        try:
            while self._read_chunk(fd):
                pass
        except BlockingIOError:
            pass

    def _copy(self, chunk: bytes) -> None:
        if self._copy_to is not None:
            self._copy_to.write(chunk)
        else:
            os.write(self._own_fd, chunk)

    def _handle_line(self, raw: bytes) -> None:
        if not raw:
            return
        match = self._pattern.search(raw.decode("utf-8", errors="replace"))
        if match is None:
            return
        url = self._task.build_tracking_url(match.group(1) if match.re.groups else match.group(0))
        reporter = self._task.set_tracking_url
        if url and url != self._reported and callable(reporter):
            reporter(url)
            self._reported = url


@contextmanager
def _exit_notifier(pid: int) -> Iterator[int | None]:
    """A pidfd that becomes readable when ``pid`` exits, or None where the system has none."""
    pidfd_open = getattr(os, "pidfd_open", None)
    try:
        fd = None if pidfd_open is None else int(pidfd_open(pid))
    except OSError:
        fd = None
    try:
        yield fd
    finally:
        if fd is not None:
            os.close(fd)


class ExternalPythonProgramTask(ExternalProgramTask):
    """An ExternalProgramTask for Python programs, optionally in a virtualenv or with extra PYTHONPATH.

    ``virtualenv`` changes the environment as its ``bin/activate`` would (PATH, VIRTUAL_ENV, no
    PYTHONHOME), so ``python`` in ``program_args()`` is the virtualenv's. As in Luigi, ``PYTHONPATH``
    becomes ``extra_pythonpath:<old value>`` (ending in ``:`` when there was none).
    """

    virtualenv = OptionalParameter(
        default=None,
        positional=False,
        description="Directory of the virtualenv to run in (the one holding bin/activate)",
    )
    extra_pythonpath = OptionalParameter(
        default=None,
        positional=False,
        description="Prepended to the program's PYTHONPATH",
    )

    def program_environment(self) -> dict[str, str]:
        """The parent's environment with Luigi's changes, the paths used exactly as given (not resolved)."""
        env = super().program_environment()
        if self.extra_pythonpath:
            env["PYTHONPATH"] = self.extra_pythonpath + ":" + env.get("PYTHONPATH", "")
        if self.virtualenv:
            if not os.path.isdir(os.path.join(self.virtualenv, "bin")):
                logger.warning(
                    "%s: virtualenv %r has no bin/ directory, so programs are looked up on the rest of PATH; "
                    "give the directory that holds bin/activate (create one with: python -m venv DIR)",
                    self,
                    self.virtualenv,
                )
            env["PATH"] = self.virtualenv + "/bin:" + env.get("PATH", "")
            env["VIRTUAL_ENV"] = self.virtualenv
            env.pop("PYTHONHOME", None)
        return env
