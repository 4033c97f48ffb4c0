"""One live progress line on a terminal while a worker runs: done/total, running, failed, rate, time left.

Shown only when the worker's standard error is a terminal and ``[core] progress`` is not false, so cron
mail and redirected output stay byte for byte what they were. Log records written to that terminal by
logging's stream handlers clear the line first and draw it again after, so the two never share a line
(a task slot's records clear it, and the worker draws it again at its next change); the line is cleared
before the worker returns, so the execution summary prints as it always did. What a task prints through
``sys.stdout``/``sys.stderr``, in the worker or a task slot, starts on a cleared line too (the worker
draws the line again at its next change). Output written to the descriptors directly (a subprocess's)
is not seen here.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from luigi.task_status import DONE, FAILED

CLEAR_LINE = "\r\x1b[K"
REDRAW_EVERY_SECONDS = 0.2  # a terminal redrawn more often only flickers


@dataclass(frozen=True)
class Progress:
    """Where this worker's run stands: tasks it had to run, how many of them ended, how, and since when."""

    total: int
    done: int
    failed: int
    running: int
    elapsed: float

    def rate(self) -> float:
        """Tasks done per second since the run began."""
        return self.done / self.elapsed if self.elapsed > 0 else 0.0

    def seconds_left(self) -> float | None:
        """Time left at the rate so far; None before the first task is done."""
        left = self.total - self.done - self.failed
        return left / self.rate() if self.rate() > 0 else None


def progress_of(history: Sequence[tuple[Any, str, Any]], running: int, elapsed: float) -> Progress:
    """The progress a worker's report history shows: tasks first reported not done count towards the total."""
    first: dict[int, str] = {}
    last: dict[int, str] = {}
    for task, status, _runnable in history:
        first.setdefault(id(task), status)
        last[id(task)] = status
    to_run = [key for key, status in first.items() if status != DONE]
    done = sum(1 for key in to_run if last[key] == DONE)
    failed = sum(1 for key in to_run if last[key] == FAILED)
    return Progress(len(to_run), done, failed, running, elapsed)


def render(progress: Progress, width: int) -> str:
    """The line, cut to ``width`` columns: ``luigi: 12/40 done, 2 running, 1 failed, 3.1/s, ~9s left``."""
    parts = [f"luigi: {progress.done}/{progress.total} done", f"{progress.running} running"]
    if progress.failed:
        parts.append(f"{progress.failed} failed")
    if progress.done:
        parts.append(f"{progress.rate():.1f}/s")
    left = progress.seconds_left()
    if left is not None:
        parts.append(f"~{_duration(left)} left")
    return ", ".join(parts)[: max(0, width - 1)]


def _duration(seconds: float) -> str:
    whole = int(round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole // 60 % 60:02d}m"


class _ClearingStream:
    """A log handler's terminal stream: the progress line is cleared before each record and drawn after."""

    def __init__(self, line: ProgressLine, stream: TextIO) -> None:
        self._line = line
        self._stream = stream

    def write(self, text: str) -> int:
        if not self._line.owned_here():
            return self._stream.write(CLEAR_LINE + text)  # one write: the worker may draw meanwhile
        self._line.hide()
        written = self._stream.write(text)
        if text.endswith("\n"):
            self._line.draw()
        return written

    def flush(self) -> None:
        self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _ClearingPrints:
    """``sys.stdout``/``sys.stderr`` while the line is up: each line a task prints starts by clearing it.

    Whole lines go out in one write with the clearing in front, so that they work from a task slot (which
    does not own the line) and through the output capture's pipes alike, and two slots printing at once
    do not split each other's lines; a line not ended yet waits for its end or a flush.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._pending = ""
        self._at_line_start = True

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" in text:
            lines, _, self._pending = self._pending.rpartition("\n")
            self._emit(lines + "\n")
        return len(text)  # what the caller wrote, as a stream reports it

    def flush(self) -> None:
        if self._pending:
            text, self._pending = self._pending, ""
            self._emit(text)
        self._stream.flush()

    def _emit(self, text: str) -> None:
        prefix = CLEAR_LINE if self._at_line_start else ""
        self._at_line_start = text.endswith("\n")
        self._stream.write(prefix + text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class ProgressLine:
    """Draws a ``Progress`` in place on ``stream`` (a terminal), throttled, and clears it at the end."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._text = ""
        self._shown = False
        self._drawn_at = 0.0
        self._started = time.monotonic()
        self._owner = os.getpid()  # a forked task slot inherits the wrapped log streams, not the line
        self._handlers: list[tuple[logging.StreamHandler[Any], Any]] = []
        self._prints: list[tuple[str, TextIO]] = []  # ("stdout"/"stderr", the stream put back at the end)

    def owned_here(self) -> bool:
        """Whether this is the worker's process, not a task slot forked from it."""
        return os.getpid() == self._owner

    def elapsed(self) -> float:
        return time.monotonic() - self._started

    def show(self, progress: Progress, force: bool = False) -> None:
        """Draw ``progress`` unless the line was drawn a moment ago (``force``: draw anyway)."""
        now = time.monotonic()
        if not force and now - self._drawn_at < REDRAW_EVERY_SECONDS:
            return
        self._text = render(progress, _columns(self._stream))
        self._drawn_at = now
        self.draw()

    def draw(self) -> None:
        if self._text and self.owned_here():
            self._stream.write(CLEAR_LINE + self._text)
            self._stream.flush()
            self._shown = True

    def hide(self) -> None:
        """Clear the line if this process drew it."""
        if self._shown:
            self._stream.write(CLEAR_LINE)
            self._shown = False

    def __enter__(self) -> ProgressLine:
        for handler in _terminal_handlers(self._stream):
            self._handlers.append((handler, handler.setStream(_ClearingStream(self, handler.stream))))
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name)
            if _same_terminal(stream, self._stream):
                self._prints.append((name, stream))
                setattr(sys, name, _ClearingPrints(stream))
        return self

    def __exit__(self, *exc: object) -> None:
        for handler, stream in self._handlers:
            handler.setStream(stream)
        self._handlers.clear()
        for name, stream in self._prints:
            getattr(sys, name).flush()  # a line the task left unended
            setattr(sys, name, stream)
        self._prints.clear()
        self.hide()
        self._text = ""
        self._stream.flush()


def _terminal_handlers(stream: TextIO) -> Iterable[logging.StreamHandler[Any]]:
    """Logging's stream handlers that write to the same terminal as ``stream``."""
    loggers = [
        logging.getLogger(),
        *(logging.getLogger(name) for name in list(logging.root.manager.loggerDict)),
    ]
    seen: set[int] = set()
    for each in loggers:
        for handler in getattr(each, "handlers", []):
            if id(handler) in seen or type(handler) is not logging.StreamHandler:
                continue
            seen.add(id(handler))
            if _same_terminal(handler.stream, stream):
                yield handler


def _same_terminal(one: Any, other: TextIO) -> bool:
    try:
        return bool(one is other or os.path.samestat(os.fstat(one.fileno()), os.fstat(other.fileno())))
    except (AttributeError, OSError, ValueError):
        return False


def _columns(stream: TextIO) -> int:
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        columns = 0
    return columns or 80  # a terminal that does not say its size (0 columns) gets the usual 80


def progress_line_for_terminal(enabled: bool, stream: TextIO | None = None) -> ProgressLine | None:
    """A progress line on standard error if it is a terminal (not a dumb one) and ``enabled``; else None."""
    stream = stream if stream is not None else sys.stderr
    try:
        is_terminal = stream.isatty()
    except (AttributeError, ValueError):
        is_terminal = False
    if not (enabled and is_terminal) or os.environ.get("TERM") == "dumb":
        return None
    return ProgressLine(stream)
