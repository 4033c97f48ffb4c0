"""Keeping what a task run writes: its stdout and stderr, at the file-descriptor level, as the run's log.

While a task runs, descriptors 1 and 2 of its process point into pipes; a reader thread copies what
arrives to the original descriptors (the worker's console shows what it always did) and into the run's
``TaskLogSink``, which sends it on in bounded chunks (``[worker] task_log_max_bytes`` per run, the cut
marked), the last one with the run's final status. So the task's prints, what its child processes write
and the log records emitted meanwhile are all kept. One capture per process, as one task runs at a time
in it (the worker's own process, or a task slot forked from it); the pipes and the thread are made on
first use, and again in a forked process.
"""

from __future__ import annotations

import codecs
import contextlib
import fcntl
import os
import select
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from itertools import count
from typing import TYPE_CHECKING, Any

from luigi.parameter import Parameter, ParameterVisibility
from luigi.worker.log_redaction import MASK, Redaction, compiled
from luigi.worker.progress import CLEAR_LINE

if TYPE_CHECKING:
    from luigi.task import Task

# A chunk is sent once this much is buffered, or when the oldest buffered output is this old.
CHUNK_BYTES = 64 * 1024
SHIP_EVERY_SECONDS = 0.5
# After output arrives the copying thread waits this long before reading, so that it wakes once per batch
# of lines rather than once per line: each wake-up takes the GIL from the task's own thread.
GATHER_SECONDS = 0.05
CAPTURE_THREAD_NAME = "luigi-output-capture"  # ours, not left behind by a task (slots tell them apart)
PIPE_BYTES = 1024 * 1024  # asked for each pipe (Linux), so a chatty task rarely waits for the thread
_READ_BYTES = 65536

# ``send(run, offset, chunk, ended)``: offset is where ``chunk`` starts, in UTF-8 bytes of the run's log.
SendChunk = Callable[[str, int, str, bool], None]


def cut_marker(max_bytes: int) -> str:
    """The line that ends a log cut at ``max_bytes``."""
    setting = "[worker] task_log_max_bytes"
    return f"\n[luigi: the rest of this run's output was cut at {max_bytes} bytes ({setting})]\n"


MIN_SECRET_CHARS = 4  # a shorter value (a digit, a flag) would mask ordinary text all over the log
# A line longer than this (no line break in sight) is masked in pieces: a match across two pieces is missed.
LONGEST_LINE = 64 * 1024
STDOUT, STDERR = 0, 1  # a run's two streams, as ``Scrubber`` and ``TaskLogSink.feed`` number them


def hidden_values(task: Any) -> list[str]:
    """The serialized values of ``task``'s HIDDEN and PRIVATE parameters: never shipped in its log."""
    values = []
    for name, parameter in _secret_params(type(task)):
        if name in task.param_kwargs:
            try:
                values.append(str(parameter.serialize(task.param_kwargs[name])))
            except Exception:  # a value its parameter cannot serialize is not in the log as such either
                continue
    return values


_SecretParams = tuple[tuple[str, Parameter[Any]], ...]
_SECRET_PARAMS: weakref.WeakKeyDictionary[type, _SecretParams] = weakref.WeakKeyDictionary()


def _secret_params(task_class: type[Task]) -> _SecretParams:
    """A task class's HIDDEN and PRIVATE parameters, looked up once per class (most classes have none)."""
    found = _SECRET_PARAMS.get(task_class)
    if found is None:
        found = tuple(
            (name, parameter)
            for name, parameter in task_class.get_params()
            if parameter.visibility != ParameterVisibility.PUBLIC
        )
        _SECRET_PARAMS[task_class] = found
    return found


class Scrubber:
    """Masks secrets in a log's text: the values of hidden parameters wherever they are, also one split
    between two pieces of output (the last characters of a piece wait for the next one), and the matches
    of the ``Redaction``'s patterns in each line, also one written in pieces (an unfinished line waits for
    its end, up to ``LONGEST_LINE`` characters). stdout and stderr are held apart (``stream``), so that a
    line of one written in the middle of a line of the other does not split it."""

    def __init__(self, secrets: Sequence[str], redaction: Redaction | None = None) -> None:
        kept = {secret for secret in secrets if len(secret) >= MIN_SECRET_CHARS}
        self._secrets = sorted(kept, key=len, reverse=True)  # the longest first: one may contain another
        self._held_chars = max((len(secret) for secret in self._secrets), default=1) - 1
        self._redaction = redaction or None
        self._held = ["", ""]  # of stdout, of stderr

    def __bool__(self) -> bool:
        return bool(self._secrets) or self._redaction is not None

    def scrub(self, text: str, final: bool = False, stream: int = STDOUT) -> str:
        """``text`` (written to ``stream``) with each secret masked; unless ``final``, its last characters
        are held back, and when ``final`` what was held of every stream comes out too."""
        text = self._held[stream] + text
        for secret in self._secrets:
            text = text.replace(secret, MASK)
        if final:
            held, self._held = self._held, ["", ""]
            held[stream] = text
            return self._redacted(held[STDOUT]) + self._redacted(held[STDERR])
        cut = len(text) - self._held_chars
        if cut > 0 and self._redaction is not None:  # patterns see whole lines: the unfinished last one waits
            line_end = max(text.rfind("\n", 0, cut), text.rfind("\r", 0, cut)) + 1
            if line_end or len(text) <= LONGEST_LINE:
                cut = line_end
        if cut <= 0:
            self._held[stream] = text
            return ""
        self._held[stream] = text[cut:]
        return self._redacted(text[:cut])

    def _redacted(self, text: str) -> str:
        return self._redaction.redact(text) if self._redaction is not None and text else text


class TaskLogSink:
    """One run's log on its way: decoded, buffered, cut at ``max_bytes``, sent in chunks by ``send``.

    A run that wrote nothing sends nothing: there is no log to show, and a task that prints nothing costs
    no call and no record in ``luigid``. The last chunk is not sent but kept as ``tail``, to go with the
    run's final status (``add_task(task_log=...)``), so a short run's log costs no call of its own.
    """

    # One sink per run: slots make it cheaper to build.
    __slots__ = ("run", "tail", "_scrubber", "_send", "_max_bytes", "_decoder", "_buffer", "_buffered",
                 "_sent", "_since", "_cut")  # fmt: skip

    def __init__(
        self, send: SendChunk, max_bytes: int, secrets: Sequence[str] = (), redaction: Redaction | None = None
    ) -> None:
        self.run = _new_run_id()
        self._scrubber = Scrubber(secrets, redaction) if secrets or redaction else None
        self.tail: dict[str, Any] | None = None
        self._send = send
        self._max_bytes = max_bytes
        self._decoder: codecs.IncrementalDecoder | None = None  # made when output first arrives
        self._buffer: list[str] = []
        self._buffered = 0
        self._sent = 0
        self._since: float | None = None
        self._cut = False

    def feed(self, data: bytes, stream: int = STDOUT) -> None:
        """Take output as it was written to ``stream`` (partial UTF-8 sequences wait for their rest)."""
        if self._cut:
            return
        if self._decoder is None:
            try:
                text = data.decode("utf-8")  # the usual case: whole characters, no decoder to make
            except UnicodeDecodeError:  # a character split between writes, or bytes that are not UTF-8
                self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
                text = self._decoder.decode(data)
        else:
            text = self._decoder.decode(data)
        if CLEAR_LINE in text:  # a task's print on a terminal with the progress line: for the eye only
            text = text.replace(CLEAR_LINE, "")
        self._add(self._masked(text, False, stream))

    def _masked(self, text: str, final: bool, stream: int = STDOUT) -> str:
        return self._scrubber.scrub(text, final, stream) if self._scrubber is not None else text

    def _add(self, text: str) -> None:
        room = self._max_bytes - self._sent - self._buffered
        size = len(text) if text.isascii() else len(text.encode("utf-8"))
        if size > room:
            kept = text.encode("utf-8")[: max(room, 0)].decode("utf-8", "ignore")
            text = kept + cut_marker(self._max_bytes)
            size = len(text.encode("utf-8"))
            self._cut = True
        if text:
            self._buffer.append(text)
            self._buffered += size
            self._since = self._since if self._since is not None else time.monotonic()

    def ship_if_due(self) -> None:
        """Send what is buffered if it is big enough or has waited long enough."""
        if self._since is not None and (
            self._buffered >= CHUNK_BYTES or time.monotonic() - self._since >= SHIP_EVERY_SECONDS
        ):
            self._ship()

    def finish(self) -> None:
        """Keep the rest as ``tail``, the run's last chunk (None when the run wrote nothing)."""
        if not self._cut:
            rest = self._decoder.decode(b"", final=True) if self._decoder is not None else ""
            if rest or self._scrubber is not None:  # a scrubber may hold the last characters back
                self._add(self._masked(rest, final=True))
        if self._sent or self._buffer:
            self.tail = {"run": self.run, "offset": self._sent, "chunk": "".join(self._buffer)}
            self._buffer.clear()

    def send_tail(self) -> None:
        """Send ``tail`` on its own, saying the run ended (when no final status will carry it)."""
        if self.tail is not None:
            tail, self.tail = self.tail, None
            self._send(self.run, tail["offset"], tail["chunk"], True)

    def _ship(self) -> None:
        chunk = "".join(self._buffer)
        offset = self._sent
        self._buffer.clear()
        self._sent += self._buffered
        self._buffered = 0
        self._since = None
        self._send(self.run, offset, chunk, False)


_run_ids = count()
_run_prefix = ""  # random, one per process (a forked slot makes its own), so that run ids never repeat


def _new_run_id() -> str:
    """A run's id, unique across processes and restarts: the process's random prefix and a counter."""
    global _run_prefix
    if not _run_prefix:
        _run_prefix = os.urandom(6).hex()
    return f"{_run_prefix}{next(_run_ids):04x}"


def _after_fork_in_child() -> None:
    """A forked process makes its own run ids and its own capture (threads do not survive a fork)."""
    global _run_prefix
    _run_prefix = ""
    OutputCapture._current = None


os.register_at_fork(after_in_child=_after_fork_in_child)


class OutputCapture:
    """The capture of one process's descriptors 1 and 2 (see the module docstring)."""

    _current: OutputCapture | None = None

    def __init__(self) -> None:
        self._originals = (1, 2)  # where the console is: during a run, copies of 1 and 2 made at its start
        self._pipes = [os.pipe(), os.pipe()]  # (read end, write end) for stdout, then stderr
        for read_end, _ in self._pipes:
            os.set_blocking(read_end, False)
            _enlarge(read_end)
        self._pipe_of = {read_end: index for index, (read_end, _) in enumerate(self._pipes)}
        self._waiting = select.poll()  # the drain's own: two threads must not use one poll object at once
        for read_end, _ in self._pipes:
            self._waiting.register(read_end, select.POLLIN)
        self._lock = threading.Lock()
        self._sink: TaskLogSink | None = None
        self._holders = 0  # runners that keep the console's copies from one run to the next
        self._held: tuple[int, int] | None = None  # those copies, once a held run made them
        threading.Thread(target=self._copy_forever, name=CAPTURE_THREAD_NAME, daemon=True).start()

    @classmethod
    def current(cls) -> OutputCapture:
        """This process's capture (a forked process makes its own: threads do not survive a fork)."""
        capture = cls._current
        if capture is None:
            cls._current = capture = cls()
        return capture

    def capturing(self, sink: TaskLogSink) -> _Capturing:
        """Send what descriptors 1 and 2 receive meanwhile to ``sink`` (and on to the console).

        The console is whatever 1 and 2 are when the run starts (a test runner may have moved them), or
        were when the first run of a ``hold_console`` started.
        """
        return _Capturing(self, sink)

    def hold_console(self) -> None:
        """Keep the console's copies from run to run until ``release_console`` (a runner's life): the
        console is then what 1 and 2 were when its first run started, and a run costs four system calls
        less."""
        self._holders += 1

    @property
    def holds_console(self) -> bool:
        return self._holders > 0

    def release_console(self) -> None:
        """End a ``hold_console``; the copies are closed when no runner holds them (at the end of the
        run going on, if any)."""
        self._holders = max(0, self._holders - 1)
        if self._holders == 0 and self._held is not None:
            held, self._held = self._held, None
            if self._originals is not held:  # else the run going on uses them: ``stop`` closes them
                _close_console(held)

    def start(self, sink: TaskLogSink) -> tuple[int, int] | None:
        """Point 1 and 2 into the pipes, the console kept aside (None when 1 or 2 is closed: no capture)."""
        _flush_stdio()
        console = self._held or _console()
        if console is None:
            return None
        if self._holders:
            self._held = console
        with self._lock:
            self._sink, self._originals = sink, console
        os.dup2(self._pipes[0][1], 1)
        os.dup2(self._pipes[1][1], 2)
        return console

    def stop(self, console: tuple[int, int], sink: TaskLogSink) -> None:
        """Point 1 and 2 back at the console, take what is still in the pipes, and end the run's log."""
        _flush_stdio()
        os.dup2(console[0], 1)
        os.dup2(console[1], 2)
        with self._lock:
            self._drain()
            self._sink, self._originals = None, (1, 2)
        if console is not self._held:
            _close_console(console)
        sink.finish()

    def _copy_forever(self) -> None:
        read_ends = [read_end for read_end, _ in self._pipes]
        while True:
            ready, _, _ = select.select(read_ends, [], [], SHIP_EVERY_SECONDS)
            if ready:
                time.sleep(GATHER_SECONDS)
            with self._lock:
                self._drain()
                if self._sink is not None:
                    self._sink.ship_if_due()

    def _drain(self) -> None:
        """Copy everything waiting in the pipes to the console and the sink (with the lock held)."""
        for read_end, _ in self._waiting.poll(0):  # one look at both pipes: often nothing is waiting
            stream = self._pipe_of[read_end]
            original = self._originals[stream]
            while True:
                try:
                    data = os.read(read_end, _READ_BYTES)
                except BlockingIOError:
                    break
                if not data:
                    break
                _write_all(original, data)
                if self._sink is not None:
                    self._sink.feed(data, stream)
                if len(data) < _READ_BYTES:  # a short read emptied the pipe: no read to fail
                    break


def _enlarge(fd: int) -> None:
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if set_size is not None:
        try:
            fcntl.fcntl(fd, set_size, PIPE_BYTES)
        except OSError:  # above the system's limit: the default size works, only more slowly for floods
            pass


def _write_all(fd: int, data: bytes) -> None:
    try:
        written = os.write(fd, data)
        if written < len(data):  # the console took part of it (a full pipe, a signal): the rest follows
            view = memoryview(data)[written:]
            while view:
                view = view[os.write(fd, view) :]
    except OSError:  # the console went away: the log still gets the output
        return


def _flush_stdio() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a closed or broken stream has nothing to flush
            pass


class _Capturing:
    """One run's capture as a ``with`` block (a class: a generator-based one costs more per run)."""

    __slots__ = ("_capture", "_sink", "_console")

    def __init__(self, capture: OutputCapture, sink: TaskLogSink) -> None:
        self._capture = capture
        self._sink = sink
        self._console: tuple[int, int] | None = None

    def __enter__(self) -> TaskLogSink | None:
        self._console = self._capture.start(self._sink)
        return self._sink if self._console is not None else None

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        if self._console is None:
            return
        self._capture.stop(self._console, self._sink)
        if kind is not None:  # the run was cut short: no final status will carry the tail
            self._sink.send_tail()


def captured_output(
    send: SendChunk, max_bytes: int, task: Any = None, redact: Sequence[str] = ()
) -> contextlib.AbstractContextManager[TaskLogSink | None]:
    """Capture a run's output into a new log sent by ``send`` (the sink, whose ``tail`` is the last chunk
    once the block ends), with the values of ``task``'s hidden and private parameters and the matches of
    the ``redact`` patterns masked; nothing is captured, and the block gets None, when ``max_bytes`` <= 0."""
    if max_bytes <= 0:
        return contextlib.nullcontext()
    secrets = hidden_values(task) if task is not None else []
    redaction = compiled(tuple(redact)) if redact else None
    return OutputCapture.current().capturing(TaskLogSink(send, max_bytes, secrets, redaction))


def _close_console(console: tuple[int, int]) -> None:
    os.close(console[0])
    os.close(console[1])


def _console() -> tuple[int, int] | None:
    """Copies of descriptors 1 and 2 as they are now, or None when either is closed."""
    try:
        stdout = os.dup(1)
    except OSError:
        return None
    try:
        return stdout, os.dup(2)
    except OSError:
        os.close(stdout)
        return None
