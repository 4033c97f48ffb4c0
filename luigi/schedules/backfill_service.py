"""``BackfillService``: the backfills ``luigid`` runs on its asyncio loop, and the ``backfill_*`` answers.

Each backfill is one ``luigi`` child (``luigi.schedules.runner``, as a schedule's run: luigid's own
environment and working directory, its address as ``--scheduler-url``, a bounded log) running the
``RangeDaily``/``RangeHourly`` command of ``luigi.schedules.backfill``. Its row (``backfill_store``) is
committed before the child starts. A backfill still *running* when ``luigid`` stops (cleanly, or killed)
is started again at the next start: the Range task skips the days already complete, so none is redone.
After a ``kill -9`` its old child may still be alive: it is found by its pid and the mark in its
environment, and its process group killed before the new child starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from luigi.schedules.backfill import BackfillRequest
from luigi.schedules.backfill_store import BackfillRecord, BackfillState, BackfillStore
from luigi.schedules.runner import LOG_MAX_BYTES, ChildRun
from luigi.schedules.service import _configured_retcodes, exit_meaning

__all__ = ["MARK_VARIABLE", "BackfillService", "Progress"]

logger = logging.getLogger("luigi.schedules")

MARK_VARIABLE = "LUIGID_BACKFILL"  # in each child's environment: "<backfills file>#<id>", to know it again
# Given the backfills shown, how many of each one's instances the scheduler sees done (by id).
Progress = Callable[[list[dict[str, Any]]], dict[int, int]]


class BackfillService:
    """Runs the backfills recorded in ``directory``/backfills.sqlite (opened on first use)."""

    def __init__(
        self,
        directory: Path,
        *,
        clock: Callable[[], float] = time.time,
        luigi_command: Sequence[str] = (sys.executable, "-m", "luigi"),
        retcodes: dict[str, int] | None = None,
        idle_seconds: int = 1200,
    ) -> None:
        self.directory = directory
        self._idle_seconds = idle_seconds
        self.store = BackfillStore(directory / "backfills.sqlite")
        self._clock = clock
        self._luigi = tuple(luigi_command)
        self._retcodes = retcodes
        self._children: dict[int, ChildRun] = {}
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._cancelled: set[int] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._url = ""
        self._stopping = False

    # -- life cycle --------------------------------------------------------------------------------------

    def open(self) -> None:
        """Open the file if a backfill was ever started here (luigid without any creates nothing), and
        kill the children a killed luigid left behind. StorageError if unusable."""
        if not self.store.path.exists():
            return
        self.store.open()
        for record in self._unfinished():
            if record.pid is not None and self._is_ours(record.pid, record.id):
                logger.warning(
                    "Backfill #%d: killing its child %d, left by a luigid that was killed",
                    record.id,
                    record.pid,
                )
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(record.pid, signal.SIGKILL)

    def start(self, scheduler_url: str) -> None:
        """Start again, on the running loop, every backfill that was running when luigid stopped."""
        self._loop = asyncio.get_running_loop()
        self._url = scheduler_url
        if self._retcodes is None:
            self._retcodes = _configured_retcodes()
        for record in self._unfinished():
            logger.info("Backfill #%d: was running when luigid stopped; starting it again", record.id)
            self._launch(record.id, record.request)

    async def stop(self) -> None:
        """Stop the children (SIGTERM, then SIGKILL); their backfills stay running, resumed at next start."""
        self._stopping = True
        await asyncio.gather(*(child.stop() for child in self._children.values()))
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        self._loop = None

    def close(self) -> None:
        self.store.close()

    def _unfinished(self) -> list[BackfillRecord]:
        if not self.store.is_open:
            return []
        return [record for record in self.store.all() if record.state == BackfillState.RUNNING.value]

    def _mark(self, backfill_id: int) -> str:
        return f"{self.store.path}#{backfill_id}"

    def _is_ours(self, pid: int, backfill_id: int) -> bool:
        """Whether process ``pid`` is still this backfill's child (a pid may since have been reused)."""
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            return False
        return f"{MARK_VARIABLE}={self._mark(backfill_id)}".encode() in environ.split(b"\0")

    # -- running one -------------------------------------------------------------------------------------

    def _launch(self, backfill_id: int, request: BackfillRequest) -> None:
        assert self._loop is not None
        task = self._loop.create_task(
            self._execute(backfill_id, request), name=f"luigid-backfill-{backfill_id}"
        )
        self._tasks[backfill_id] = task

    async def _execute(self, backfill_id: int, request: BackfillRequest) -> None:
        try:
            await self._run_child(backfill_id, request)
        except Exception:  # a bug or a storage failure must not stop the other backfills; it is logged
            logger.exception("Backfill #%d: its run failed inside luigid", backfill_id)
        finally:
            self._children.pop(backfill_id, None)
            self._tasks.pop(backfill_id, None)

    async def _run_child(self, backfill_id: int, request: BackfillRequest) -> None:
        record = self.store.get(backfill_id)
        assert record is not None
        attempt = record.attempt + 1
        argv = [*self._luigi, *request.arguments(self._idle_seconds), "--scheduler-url", self._url]
        env = {**os.environ, MARK_VARIABLE: self._mark(backfill_id)}
        try:
            child = await ChildRun.start(argv, None, env, self.log_path(backfill_id, attempt))
        except OSError as exc:
            note = f"could not start {' '.join(argv[:3])} in {os.getcwd()}: {exc}"
            self.store.update(
                backfill_id, state=BackfillState.NOT_STARTED.value, ended=self._clock(), note=note
            )
            logger.error("Backfill #%d: %s", backfill_id, note)
            return
        self._children[backfill_id] = child
        self.store.update(backfill_id, attempt=attempt, pid=child.pid)
        logger.info(
            "Backfill #%d: attempt %d started (pid %d): %s", backfill_id, attempt, child.pid, argv[3:]
        )
        if self._stopping or backfill_id in self._cancelled:  # while it was being started
            await child.stop()
        code = await child.wait()
        self._record_end(backfill_id, code)

    def _record_end(self, backfill_id: int, code: int) -> None:
        assert self._retcodes is not None
        meaning = exit_meaning(code, self._retcodes)
        if self._stopping and backfill_id not in self._cancelled:
            self.store.update(
                backfill_id, pid=None, note="stopped with luigid; started again at its next start"
            )
            logger.info(
                "Backfill #%d: stopped with luigid (%s); resumed at the next start", backfill_id, meaning
            )
            return
        state = BackfillState.CANCELLED if backfill_id in self._cancelled else BackfillState.ENDED
        values = {"pid": None, "exit_code": code, "meaning": meaning, "ended": self._clock()}
        self.store.update(backfill_id, state=state.value, **values)
        logger.info("Backfill #%d: %s with exit code %d (%s)", backfill_id, state.value, code, meaning)

    def log_path(self, backfill_id: int, attempt: int) -> Path:
        """The log of one attempt (one child) of a backfill."""
        return self.directory / "logs" / f"backfill-{backfill_id}-{attempt}.log"

    # -- the RPC methods ---------------------------------------------------------------------------------

    def backfill_start(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Record the backfill of ``arguments`` (``BackfillRequest.checked``'s, by name) and start its
        child; BackfillError (a ValueError) naming a bad field."""
        request = BackfillRequest.checked(**arguments)
        if self._loop is None or self._stopping:
            raise ValueError(
                "luigid is not running its backfills right now (starting or stopping); try again"
            )
        if not self.store.is_open:
            (self.directory / "logs").mkdir(parents=True, exist_ok=True)
            self.store.open()
        backfill_id = self.store.add(request, self._clock())
        self._launch(backfill_id, request)
        logger.info(
            "Backfill #%d: %s over [%s, %s) started", backfill_id, request.family, request.start, request.stop
        )
        return self._shown(backfill_id)

    def backfill_list(self, progress: Progress) -> list[dict[str, Any]]:
        """Every backfill, newest first, with ``done`` out of ``total`` as the scheduler last saw it."""
        if not self.store.is_open:
            return []
        entries = [record.as_json() for record in self.store.all()]
        unfinished = [entry for entry in entries if entry["done"] < entry["total"]]
        seen = {entry["id"]: entry for entry in entries}
        for backfill_id, done in progress(unfinished).items():
            if done != seen[backfill_id]["done"]:
                self.store.update(backfill_id, done=done)
                seen[backfill_id]["done"] = done
        return [self._with_log(entry) for entry in entries]

    def backfill_cancel(self, backfill_id: int) -> dict[str, Any]:
        """Stop a running backfill's child (its process group) and mark the backfill cancelled."""
        record = self.store.get(backfill_id) if self.store.is_open else None
        if record is None:
            raise ValueError(f"luigid has no backfill #{backfill_id}: see backfill_list for the ids")
        if record.state != BackfillState.RUNNING.value:
            raise ValueError(f"backfill #{backfill_id} is {record.state}, not running: nothing to cancel")
        self._cancelled.add(backfill_id)
        self.store.update(backfill_id, state=BackfillState.CANCELLED.value, ended=self._clock())
        child = self._children.get(backfill_id)
        if child is not None and self._loop is not None:
            self._loop.create_task(child.stop())
        logger.info("Backfill #%d cancelled", backfill_id)
        return self._shown(backfill_id)

    def backfill_log(self, backfill_id: int) -> dict[str, Any]:
        """The output of the backfill's latest child (so far, while it runs)."""
        record = self.store.get(backfill_id) if self.store.is_open else None
        if record is None:
            raise ValueError(f"luigid has no backfill #{backfill_id}: see backfill_list for the ids")
        try:
            with open(self.log_path(backfill_id, record.attempt), "rb") as log:
                data = log.read(LOG_MAX_BYTES + 4096)
        except FileNotFoundError:
            data = b""
        return {
            "id": backfill_id,
            "attempt": record.attempt,
            "state": record.state,
            "text": data.decode("utf-8", errors="replace"),
        }

    def _shown(self, backfill_id: int) -> dict[str, Any]:
        record = self.store.get(backfill_id)
        assert record is not None
        return self._with_log(record.as_json())

    def _with_log(self, entry: dict[str, Any]) -> dict[str, Any]:
        entry["running"] = entry["id"] in self._children
        return entry
