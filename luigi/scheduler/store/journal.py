"""The write journal of a SQLite state file: an append-only file of lines, one per flush.

``SqlStore`` appends each flush's rows here before the server answers, folds the lines into the
database in one transaction off the request path, then empties the file; at start-up it replays what
is left. The file is ``<database>.journal`` (SQLite itself owns ``<database>-journal``).
``JournaledRows`` keeps that bookkeeping; ``Journal`` is the file.
"""

from __future__ import annotations

import io
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from luigi.scheduler.store.base import CorruptStateError, StateStoreError
from luigi.scheduler.store.rows import RowChanges

logger = logging.getLogger("luigi.scheduler")

_TAIL_BLOCK = 1 << 16  # how much of the end is read at a time when looking for the last whole line
# Folds come in slices of the oldest pending keys, so that no request waits behind a long transaction.
# After an answer, while the worker that asked is busy with what it was told, the server folds this many
# once this many wait: one short transaction (~0.3 ms here), over before that worker asks again.
ANSWER_SLICE_KEYS = 8
# Past this many pending keys (rows not yet in the database) a flush folds the oldest CAP_SLICE_KEYS
# itself; past JOURNAL_BYTES_CAP of journal it folds them all, since the file is emptied only once
# nothing is pending. The caps bound memory, the file and the replay at start; the server's slices
# normally keep well below them.
PENDING_CAP = 20_000
CAP_SLICE_KEYS = 1_000
JOURNAL_BYTES_CAP = 128 * 1024 * 1024
# A flush changing this many tasks or more skips the journal: its rows go straight into the database,
# in one transaction with what is pending, a chunk at a time (``SqlStore``).
DIRECT_WRITE_KEYS = PENDING_CAP
JOURNAL_SUFFIX = ".journal"  # SQLite's own rollback journal is ``<database>-journal``


def journal_file_for(database: Path) -> Path:
    """Where the journal of the SQLite file ``database`` lives: beside it, named ``<database>.journal``."""
    return Path(f"{database}{JOURNAL_SUFFIX}")


class JournaledRows:
    """A SQLite file's journal and the changes it holds that are not yet in the file.

    ``pending`` is the journal's lines merged (a key's last row wins), so that a fold writes each key
    once without reading the file back. The database is written through a callable that runs one
    transaction; its errors are the caller's to interpret.
    """

    def __init__(self, path: Path) -> None:
        self.journal = Journal(path)
        self.pending = RowChanges()
        self.size = 0  # bytes appended since the journal was last emptied

    @property
    def path(self) -> Path:
        """The journal file."""
        return self.journal.path

    def record(self, rows: RowChanges) -> None:
        """Append one flush's rows (StateStoreError if they cannot be)."""
        try:
            line = rows.to_json()
        except (TypeError, ValueError) as exc:
            raise StateStoreError(f"Cannot write the scheduler journal {self.path}: {exc}") from exc
        self.journal.append(line)
        self.pending.merge(rows)
        self.size += len(line) + 1

    def over_cap(self) -> int:
        """How many pending keys the flush that just recorded must fold itself (0: none)."""
        if self.size >= JOURNAL_BYTES_CAP:
            return len(self.pending)
        return CAP_SLICE_KEYS if len(self.pending) >= PENDING_CAP else 0

    @property
    def due(self) -> bool:
        """Whether enough changes are pending for a slice between requests."""
        return len(self.pending) >= ANSWER_SLICE_KEYS

    def fold(self, write: Callable[[RowChanges], None], limit: int | None = None) -> None:
        """``write`` the pending changes, at most ``limit`` keys of them (the oldest), and empty the
        journal once none is left; if ``write`` fails, everything is kept.

        The journal keeps the lines of keys already folded until then: replaying them writes the same
        rows again, and the later lines still win.
        """
        if limit is not None and len(self.pending) > limit:
            part = self.pending.take(limit)
            try:
                write(part)
            except BaseException:
                part.merge(self.pending)
                self.pending = part
                raise
            return
        if self.pending:
            write(self.pending)
            self.forget_pending()
        self.journal.clear()

    def forget(self) -> None:
        """The database holds exactly the state: what was journaled before is obsolete."""
        self.journal.clear()
        self.forget_pending()

    def forget_pending(self) -> None:
        """What is pending is in the database, or went with a journal that was moved aside."""
        self.pending = RowChanges()
        self.size = 0

    def replay(self, write: Callable[[RowChanges], None], database: str) -> None:
        """``write`` what a stopped process left in the journal, then empty it.

        In a damaged journal (a line that is not a whole, well-formed line) the lines before the damage
        are written; the file is then moved aside with a warning, and what follows the damage is lost.
        """
        journaled, damage = self._read_until_damaged()
        if journaled:
            write(journaled)
        self.forget_pending()  # it was in the journal, so it is in the database now
        if damage is None:
            self.journal.clear()
            return
        self.journal.close()
        moved = move_aside(self.path, sides=())
        logger.warning(
            "The scheduler journal %s is damaged (%s); the changes before the damage were written to %s, "
            "the journal was moved to %s and the changes after it are lost",
            self.path,
            damage,
            database,
            moved,
        )

    def close(self) -> None:
        """Close the journal file (what is pending stays in it, for the next start)."""
        self.journal.close()

    def _read_until_damaged(self) -> tuple[RowChanges, str | None]:
        """The journaled changes up to the first damaged line, and what is wrong with that line (if any)."""
        merged = RowChanges()
        for number, line in enumerate(self.journal.read_lines(), 1):
            try:
                merged.merge(RowChanges.from_json(line.decode("utf-8")))
            except UnicodeDecodeError as exc:
                return merged, f"line {number} is not UTF-8 text ({exc})"
            except CorruptStateError as exc:
                return merged, f"line {number}: {exc}"
        return merged, None


class Journal:
    """An append-only file of text lines (created by the first append).

    Durability: ``append`` is one ``write(2)`` to a file opened with ``O_APPEND``, with no ``fsync``. Once
    it returns, the line is in the operating system's cache and survives the process being killed
    (``kill -9``, a crash), as a commit in SQLite's WAL mode with ``synchronous=NORMAL`` does; a power cut
    or an operating-system crash may lose the last lines. One process writes a journal at a time.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: io.FileIO | None = None
        self._torn = False  # a failed append left part of a line at the end, to cut before the next one

    def append(self, text: str) -> None:
        """Add ``text`` (one line, without its newline); StateStoreError naming the file if it cannot."""
        data = (text + "\n").encode("utf-8")
        try:
            if self._torn:
                self._cut_torn_tail()
            self._write_all(self._fd(), data)
        except OSError as exc:
            if self._torn:
                try:
                    self._cut_torn_tail()
                except OSError:
                    pass  # the next append cuts it first, and fails while it cannot
            raise StateStoreError(f"Cannot append to the scheduler journal {self.path}: {exc}") from exc

    def read(self) -> list[str]:
        """The complete lines as text, oldest first; CorruptStateError when a line is not UTF-8 text."""
        texts = []
        for number, line in enumerate(self.read_lines(), 1):
            try:
                texts.append(line.decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise CorruptStateError(f"line {number} is not UTF-8 text ({exc})") from None
        return texts

    def read_lines(self) -> list[bytes]:
        """The complete lines, oldest first, without their newlines.

        A last line without its newline is a write cut short by a kill, so never acknowledged: it is
        dropped with a warning.
        """
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StateStoreError(f"Cannot read the scheduler journal {self.path}: {exc}") from exc
        lines = data.split(b"\n")
        torn = lines.pop()  # empty when the file ends with a newline
        if torn:
            logger.warning(
                "The scheduler journal %s ends with %d bytes of a line cut short (the process stopped while "
                "writing it, before the change was acknowledged); they are ignored",
                self.path,
                len(torn),
            )
        return lines

    def clear(self) -> None:
        """Empty the file (its lines are in the database now)."""
        try:
            if self._file is not None:
                os.ftruncate(self._file.fileno(), 0)
            else:
                os.truncate(self.path, 0)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StateStoreError(f"Cannot empty the scheduler journal {self.path}: {exc}") from exc
        self._torn = False

    def close(self) -> None:
        """Close the file (the next append opens it again)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def _fd(self) -> int:
        if self._file is None:
            self._file = io.FileIO(self.path, "a+")  # O_RDWR | O_APPEND | O_CREAT, not inherited
        return self._file.fileno()

    def _write_all(self, fd: int, data: bytes) -> None:
        """One ``write`` of the line, continued after a short write (a full disk, a signal)."""
        view = memoryview(data)
        while view:
            try:
                written = os.write(fd, view)
            except OSError:
                self._torn = len(view) < len(data)  # part of the line is in the file
                raise
            if written <= 0:
                self._torn = len(view) < len(data)
                raise OSError(f"the write of {len(view)} bytes wrote nothing")
            view = view[written:]

    def _cut_torn_tail(self) -> None:
        """Truncate the file after its last newline, so that the next line starts on a line of its own."""
        fd = self._fd()
        end = size = os.fstat(fd).st_size
        keep = 0
        while end > 0:
            start = max(0, end - _TAIL_BLOCK)
            newline = os.pread(fd, end - start, start).rfind(b"\n")
            if newline >= 0:
                keep = start + newline + 1
                break
            end = start
        if keep != size:
            os.ftruncate(fd, keep)
        self._torn = False


def move_aside(path: Path, sides: tuple[str, ...]) -> Path:
    """Rename the damaged state file ``path`` to ``<path>.corrupt-<timestamp>``, never overwriting; its
    non-empty side files ``<path><suffix>`` for each of ``sides`` (WAL, journal) follow it."""
    base = f"{path}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}"
    target, n = Path(base), 1
    while target.exists():
        target, n = Path(f"{base}-{n}"), n + 1
    try:
        os.rename(path, target)
        for suffix in sides:
            side = Path(f"{path}{suffix}")
            if side.exists() and side.stat().st_size > 0:  # an empty one says nothing: left for the new file
                os.rename(side, f"{target}{suffix}")
    except OSError as exc:
        raise StateStoreError(
            f"The scheduler state file {path} cannot be read and cannot be moved aside ({exc}); "
            "move or delete it, or set [scheduler] state_path elsewhere"
        ) from None
    return target
