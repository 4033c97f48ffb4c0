"""The logs of task runs that ``luigid`` keeps: what workers shipped of each run's output, by attempt.

A chunk is taken as the request comes and kept once ``luigid`` has answered (so the worker never waits
for it): appended as a JSON line to one segment file per UTC day in the log directory (beside the state
by default), into a large buffer that goes to the operating system at most once a second (and before
every read): a log is not the state, and a few large writes cost less than many small ones. A
``kill -9`` of ``luigid`` may so lose the last second of shipped log, never the state. An index in
memory says where each run's chunks are, and is rebuilt from the segments at start. Segments older
than ``keep_days`` are deleted whole. A run is one attempt of a task, numbered in the order its first
chunk arrived; offsets are UTF-8 bytes of its log.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from json.encoder import encode_basestring
from typing import IO, TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from luigi.scheduler.settings import SchedulerConfig

logger = logging.getLogger("luigi.server")

MAX_ANSWER_BYTES = 256 * 1024  # of one task_log answer; the page asks again from the next offset
_SEGMENT_SUFFIX = ".log.jsonl"
_DAY_SECONDS = 86400
_MAX_PENDING_CHUNKS = 256  # taken and not kept yet: a flood of plain-HTTP appends is kept as it comes
FLUSH_EVERY_SECONDS = 1.0  # how often kept chunks are handed to the operating system at most
SEGMENT_BUFFER_BYTES = 1 << 20  # what the open segment holds before that: a flood is written as it comes
_LOST = "[luigi: this part of the log was lost: the disk refused it]\n"
_MAX_RECORD_OVERHEAD = 128 * 1024  # a record's line beside its text (escaped, a byte takes 6 at most)


class _Chunk(NamedTuple):  # a tuple: the collector stops tracking it, as it holds no containers
    segment: str
    position: int  # where its line starts in the segment
    offset: int  # where its text starts in the run's log (UTF-8 bytes)
    size: int  # of its text, UTF-8 bytes


@dataclass(slots=True)
class RunLog:
    """One run's log: where its chunks are, how much arrived, and whether the worker said it ended."""

    run: str
    worker: str
    attempt: int
    started: float
    size: int = 0  # bytes kept
    received: int = 0  # bytes of the worker's log accounted for (a gap's marker is ours, not the worker's)
    ended: bool = False
    updated: float = 0.0  # when its last chunk came (luigid's clock)
    chunks: list[_Chunk] = field(default_factory=list)

    def describe(self, going: bool) -> dict[str, Any]:
        """Its summary; ``going`` False: its worker no longer runs it, so it has ended, said or not."""
        ended = self.ended or not going
        return {"attempt": self.attempt, "worker": self.worker, "started": self.started, "bytes": self.size,
                "ended": ended, "cutShort": ended and not self.ended}  # fmt: skip

    def still_going(self, running: Running) -> bool:
        """Whether the run may go on: its worker runs the task now, in a run it began before this log's
        last chunk came (a run whose worker was lost or killed ends without saying so)."""
        return running is not None and running[0] == self.worker and running[1] <= self.updated


# Who runs a task now and since when (luigid's clock), or None when nobody does.
Running = tuple[str, float] | None


class TaskLogStore:
    """Run logs in segment files under ``directory``; ``keep_days`` of them (0: kept until deleted).

    ``clock`` (monotonic seconds) times the hand-offs to the operating system.
    """

    def __init__(self, directory: str, keep_days: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._directory = directory
        self._keep_days = keep_days
        self._clock = clock
        self._flushed_at = -FLUSH_EVERY_SECONDS  # when kept chunks last went to the operating system
        self._runs: dict[str, list[RunLog]] = {}  # by task id, oldest attempt first
        self._workers: dict[str, tuple[str, str]] = {}  # one copy of each worker's id, and its JSON
        self._segment_name = ""
        self._segment_day = -1.0  # the UTC day (days since the epoch) of the open segment
        self._segment: IO[bytes] | None = None
        self._segment_end = 0  # where the next one will: counted here, as asking the file is a system call
        self._failing = False  # the directory refused a write (disk full): said once, until it works again
        self._pending: list[tuple[str, str, str, int, str, bool, float]] = []  # taken, not kept yet
        self._unflushed: list[tuple[RunLog, int]] = []  # chunks kept since the last hand-off, by place
        os.makedirs(directory, exist_ok=True)
        self._load()

    # -- writing --------------------------------------------------------------------------------------

    def append(
        self, task_id: str, worker: str, run: str, offset: int, chunk: str, ended: bool, now: float
    ) -> None:
        """Take a chunk of a run's log, kept by the next ``settle``: ``luigid`` settles right after it
        answers on an RPC channel (so the worker does not wait for the keeping) and on its timer, and
        every read settles first; so many chunks waiting are kept at once."""
        self._pending.append((task_id, worker, run, offset, chunk, ended, now))
        if len(self._pending) >= _MAX_PENDING_CHUNKS:
            self.settle()

    def settle(self) -> None:
        """Keep the chunks taken since the last call, in order; a chunk sent again (a retried request) is
        not kept twice."""
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        keep = self._keep
        for task_id, worker, run, offset, chunk, ended, now in pending:
            keep(task_id, worker, run, offset, chunk, ended, now)

    def _keep(
        self, task_id: str, worker: str, run: str, offset: int, chunk: str, ended: bool, now: float
    ) -> None:
        log = self._run_log(task_id, worker, run, now)
        if offset == log.received:  # the usual case: the chunk goes on where the last one ended
            text, text_size = chunk, _utf8_size(chunk)
            received = offset + text_size
        else:
            text = _unseen_part(chunk, offset, log.received)
            text_size = _utf8_size(text)
            received = max(log.received, offset + _utf8_size(chunk))
        if not text and (log.ended or not ended):
            return
        position = self._write(_record_line(task_id, self._workers[log.worker][1], run, text, received,
                                            now, ended), now)  # fmt: skip
        self._index(log, self._segment_name, position, text_size, received, ended, now)
        if text_size and position >= 0:
            self._unflushed.append((log, len(log.chunks) - 1))

    def _run_log(self, task_id: str, worker: str, run: str, now: float) -> RunLog:
        """The log of ``run``, the task's next attempt if it was not seen before (the run a chunk is for
        is nearly always the task's last one: looked for from the end)."""
        runs = self._runs.get(task_id)
        if runs is None:
            runs = self._runs[task_id] = []
        elif runs[-1].run == run:
            return runs[-1]
        else:
            for log in reversed(runs):
                if log.run == run:
                    return log
        known = self._workers.get(worker)
        if known is None:  # one copy of a worker's id for all its runs, and its JSON for their records
            known = self._workers[worker] = (worker, encode_basestring(worker))
        log = RunLog(run, known[0], runs[-1].attempt + 1 if runs else 1, now)
        runs.append(log)
        return log

    def _write(self, line: bytes, now: float) -> int:
        """Append one record; where it starts in the segment, or -1 when the disk refused it (that chunk
        is lost, said once, never the state)."""
        try:
            segment = self._open_segment(now)
            position = self._segment_end
            segment.write(line)
        except OSError as exc:
            self._failed(exc)
            return -1
        self._segment_end += len(line)
        return position

    def _failed(self, exc: OSError) -> None:
        """Say the disk refused (once), and take the chunks not handed over yet for lost."""
        if not self._failing:
            logger.error("Task logs are not kept while %s cannot be written: %s", self._directory, exc)
        self._failing = True
        for log, at in self._unflushed:
            log.chunks[at] = log.chunks[at]._replace(position=-1)  # read as marked: the file is not sure
        self._unflushed.clear()
        if self._segment is not None:
            try:
                self._segment.close()  # a half-written line is skipped when the segment is read again
            except OSError:
                pass
            self._segment = None

    @staticmethod
    def _index(
        log: RunLog, segment: str, position: int, size: int, received: int, ended: bool, now: float
    ) -> None:
        """Note where a record's text is (``size``: its UTF-8 bytes; ``position`` -1: nowhere, it was not
        written) and what it says of the run."""
        if position < 0:
            return
        if size:
            log.chunks.append(_Chunk(segment, position, log.size, size))
            log.size += size
        log.received = max(log.received, received)
        log.updated = now
        if ended:
            log.ended = True

    def _open_segment(self, now: float) -> IO[bytes]:
        if self._segment is not None and self._segment_day == now // _DAY_SECONDS:
            return self._segment  # the usual case: no date to format for each chunk
        name = time.strftime("%Y-%m-%d", time.gmtime(now)) + _SEGMENT_SUFFIX
        self._segment_day = now // _DAY_SECONDS
        if self._segment is None or name != self._segment_name:
            if self._segment is not None:
                self._segment.close()
                self._unflushed.clear()  # all in the day's segment, which is closed
            self._segment = open(os.path.join(self._directory, name), "ab", buffering=SEGMENT_BUFFER_BYTES)
            self._segment_end = self._segment.tell()  # opened for appending: at the end
            self._segment_name = name
        return self._segment

    def flush_if_due(self) -> None:
        """Keep the chunks taken, and hand them to the operating system if the last hand-off was
        ``FLUSH_EVERY_SECONDS`` ago (``luigid`` calls it after it answers and on its timer)."""
        if self._clock() - self._flushed_at >= FLUSH_EVERY_SECONDS:
            self.flush()
        else:
            self.settle()

    def flush(self) -> None:
        """Keep the chunks taken and hand them to the operating system now."""
        self.settle()
        self._flushed_at = self._clock()
        if self._segment is None:
            return
        try:
            self._segment.flush()
        except OSError as exc:
            self._failed(exc)
            return
        self._unflushed.clear()
        if self._failing:
            self._failing = False
            logger.info("Task logs are kept again in %s", self._directory)

    def close(self) -> None:
        self.settle()
        if self._segment is not None:
            try:
                self._segment.close()
                self._unflushed.clear()
            except OSError as exc:
                self._failed(exc)
            self._segment = None

    # -- reading --------------------------------------------------------------------------------------

    def read(self, task_id: str, attempt: int | None, offset: int, running: Running = None) -> dict[str, Any]:
        """A chunk of one run's log from ``offset`` (the last attempt by default), and where to go on.

        ``running`` says who runs the task now: only the last attempt, if its worker runs the task still,
        can go on; every other run has ended (``cutShort`` when its worker never said so).
        """
        self.flush()  # every chunk taken is indexed, and in the segment where the read below looks
        runs = self._runs.get(task_id, [])
        log = runs[-1] if attempt is None and runs else next((r for r in runs if r.attempt == attempt), None)
        going = bool(runs) and runs[-1].still_going(running)
        attempts = [run.describe(going and run is runs[-1]) for run in runs]
        answer: dict[str, Any] = {"taskId": task_id, "attempts": attempts}
        if log is None:
            return {**answer, "attempt": None, "chunk": "", "nextOffset": 0, "ended": False,
                    "cutShort": False}  # fmt: skip
        data = self._bytes_from(log, max(0, offset))
        text = data.decode("utf-8", "ignore")  # a chunk cut inside a character leaves it for the next
        next_offset = max(0, offset) + len(text.encode("utf-8"))
        summary = log.describe(going and log is runs[-1])
        ended = summary["ended"] and next_offset >= log.size
        return {**answer, "attempt": log.attempt, "chunk": text, "nextOffset": next_offset, "ended": ended,
                "cutShort": ended and summary["cutShort"]}  # fmt: skip

    def _bytes_from(self, log: RunLog, offset: int) -> bytes:
        parts: list[bytes] = []
        total = 0
        for chunk in log.chunks:
            if chunk.offset + chunk.size <= offset:
                continue
            data = self._chunk_text(chunk).encode("utf-8")[max(0, offset - chunk.offset) :]
            parts.append(data[: MAX_ANSWER_BYTES - total])
            total += len(parts[-1])
            if total >= MAX_ANSWER_BYTES:
                break
        return b"".join(parts)

    def _chunk_text(self, chunk: _Chunk) -> str:
        """A chunk's text; one whose write the disk refused reads as a marker of the same size (so the
        offsets after it hold)."""
        if chunk.position < 0:
            return _lost_text(chunk.size)
        with open(os.path.join(self._directory, chunk.segment), "rb") as segment:
            segment.seek(chunk.position)
            line = segment.readline(6 * chunk.size + _MAX_RECORD_OVERHEAD)  # a damaged file: no endless line
        try:
            return str(json.loads(line)["d"])
        except (ValueError, KeyError, TypeError):
            return _lost_text(chunk.size)

    # -- keeping --------------------------------------------------------------------------------------

    def expire(self, now: float) -> None:
        """Delete the segments older than ``keep_days`` and forget the runs that had chunks there only."""
        if self._keep_days <= 0:
            return
        self.flush()  # the chunks kept since the last hand-off are found by place in their runs' lists
        oldest = (
            time.strftime("%Y-%m-%d", time.gmtime(now - self._keep_days * _DAY_SECONDS)) + _SEGMENT_SUFFIX
        )
        expired = {name for name in self._segment_names() if name < oldest and name != self._segment_name}
        if not expired:
            return
        for name in expired:
            os.remove(os.path.join(self._directory, name))
        for task_id, runs in list(self._runs.items()):
            kept = [run for run in runs if not run.chunks or run.chunks[-1].segment not in expired]
            for run in runs:
                run.chunks = [chunk for chunk in run.chunks if chunk.segment not in expired]
            if kept:
                self._runs[task_id] = kept
            else:
                del self._runs[task_id]

    def _segment_names(self) -> list[str]:
        return sorted(name for name in os.listdir(self._directory) if name.endswith(_SEGMENT_SUFFIX))

    def _load(self) -> None:
        """Rebuild the index from the segments; a line that does not parse (a torn last write) is skipped."""
        for name in self._segment_names():
            with open(os.path.join(self._directory, name), "rb") as segment:
                position = 0
                for line in segment:
                    self._load_line(line, name, position)
                    position += len(line)

    def _load_line(self, line: bytes, segment: str, position: int) -> None:
        try:
            record = json.loads(line)
            task_id, worker, run = str(record["t"]), str(record["w"]), str(record["r"])
        except (ValueError, KeyError, TypeError):
            logger.warning("Skipping an unreadable line of the task log segment %s", segment)
            return
        at = float(record.get("s", 0))
        log = self._run_log(task_id, worker, run, at)
        size, received = _utf8_size(str(record.get("d", ""))), int(record.get("n", 0))
        self._index(log, segment, position, size, received, bool(record.get("e")), at)


def _record_line(
    task_id: str, worker_json: str, run: str, text: str, received: int, now: float, ended: bool
) -> bytes:
    """A chunk's line in a segment, a JSON object formatted here (json's encoder costs twice as much);
    ``worker_json``: the worker's id already as a JSON string."""
    end = ',"e":1}\n' if ended else "}\n"
    return (
        f'{{"t":{encode_basestring(task_id)},"w":{worker_json},"r":{encode_basestring(run)},'
        f'"d":{encode_basestring(text)},"n":{int(received)},"s":{float(now)!r}{end}'
    ).encode()


def _lost_text(size: int) -> str:
    """The marker read in place of ``size`` bytes of log that never reached the disk: as long as they."""
    return _LOST[:size].ljust(size)


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def _unseen_part(chunk: str, offset: int, received: int) -> str:
    """The part of ``chunk`` (starting at ``offset``) past the ``received`` bytes; a gap is marked."""
    if offset > received:
        return f"\n[luigi: {offset - received} bytes of this log did not arrive]\n{chunk}"
    if offset == received:
        return chunk
    return chunk.encode("utf-8")[received - offset :].decode("utf-8", "ignore")


def open_task_logs_from_config(config: SchedulerConfig) -> TaskLogStore | None:
    """``luigid``'s task logs: in ``[scheduler] task_log_dir``, else ``task-logs`` beside the state file.

    None, with the reason logged, when that directory cannot be made: luigid then runs keeping no logs.
    """
    directory = config.task_log_dir or os.path.join(
        os.path.dirname(os.path.abspath(os.path.expanduser(config.state_path))), "task-logs"
    )
    try:
        return TaskLogStore(directory, config.task_log_keep_days)
    except OSError as exc:
        logger.error("Keeping no task logs: cannot use %s (set [scheduler] task_log_dir): %s", directory, exc)
        return None
