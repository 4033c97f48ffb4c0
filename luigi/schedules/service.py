"""``ScheduleService``: ``luigid``'s schedules, run on its asyncio loop, and the ``schedule_*`` RPC answers.

A timing task wakes at each schedule's next slot (or when a run ends or a button is pressed), asks
``luigi.schedules.timing.decide`` what to do, records it (``luigi.schedules.store``: a slot is claimed
durably before its process starts) and starts ``luigi <command> --scheduler-url <luigid>`` children
(``luigi.schedules.runner``). The same task wakes at a running run's deadline: a run judged late
(``luigi.schedules.deadlines``) has its verdict recorded before its alert goes out
(``luigi.schedules.alerts``, on a thread) and its sending recorded after, so a restart sends an alert
not yet sent and never one sent before. Every RPC method and store write runs on the same loop, so no
state here is shared between threads.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from luigi.database import StorageError
from luigi.schedules.alerts import LateAlert, send_late_alert, webhook_url_from_config
from luigi.schedules.deadlines import verdict
from luigi.schedules.runner import LOG_MAX_BYTES, ChildRun
from luigi.schedules.spec import ScheduleSpec, read_schedules
from luigi.schedules.store import RunKind, RunOutcome, RunRecord, ScheduleStore, StoredSchedule
from luigi.schedules.timing import Decision, ScheduleView, decide, local_time, next_wake, on_startup

__all__ = ["KEEP_RUNS", "SHOWN_RUNS", "ScheduleService", "exit_meaning", "schedules_directory"]

logger = logging.getLogger("luigi.schedules")

KEEP_RUNS = 100  # runs (and their logs) kept per schedule
SHOWN_RUNS = 10  # runs per schedule in the schedule_list answer
MAX_NAP_SECONDS = 1.0  # the timing task looks again at least this often (the wall clock may jump)
_OPEN = (RunOutcome.STARTING.value, RunOutcome.RUNNING.value)
_RETCODE_OPTIONS = (
    "unhandled_exception",
    "missing_data",
    "task_failed",
    "already_running",
    "scheduling_error",
    "not_run",
)


def schedules_directory(state_path: str | os.PathLike[str]) -> Path:
    """Where the schedules' state and run logs live: ``<state>.schedules/`` beside ``state_path``."""
    path = Path(state_path).expanduser().absolute()
    return path.with_name(f"{path.stem}.schedules")


def exit_meaning(code: int, retcodes: dict[str, int]) -> str:
    """What a ``luigi`` exit status says, after the ``[retcode]`` options in ``retcodes``."""
    if code == 0:
        return "success"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
        return f"killed by signal {-code}"
    names = [name for name, value in retcodes.items() if value == code]
    if names:
        return " or ".join(names)
    return f"exit code {code}: no [retcode] option has this value (the command failed before running?)"


@dataclass
class _Run:
    """A run in progress: its row, and its child once started."""

    id: int
    task: asyncio.Task[None] | None = None
    child: ChildRun | None = None
    due: float | None = None  # start + deadline, once started (None: no deadline)
    judged: bool = False  # its deadline verdict is recorded


@dataclass
class _Schedule:
    """One schedule's state in memory (the store holds the durable part)."""

    spec: ScheduleSpec
    watermark: float
    paused: bool = False
    catching_up: bool = False
    current: _Run | None = None

    def view(self) -> ScheduleView:
        running = self.current is not None
        return ScheduleView(self.watermark, running, self.paused, self.catching_up)


class ScheduleService:
    """Runs ``specs`` from ``directory`` (its SQLite file and ``logs/``); see the module docstring."""

    def __init__(
        self,
        specs: Sequence[ScheduleSpec],
        directory: Path,
        *,
        clock: Callable[[], float] = time.time,
        luigi_command: Sequence[str] = (sys.executable, "-m", "luigi"),
        retcodes: dict[str, int] | None = None,
        webhook_url: str | None = None,
    ) -> None:
        self.directory = directory
        self.store = ScheduleStore(directory / "schedules.sqlite")
        self._specs = list(specs)
        self._clock = clock
        self._luigi = tuple(luigi_command)
        self._retcodes = retcodes if retcodes is not None else _configured_retcodes()
        self._schedules: dict[str, _Schedule] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timing: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._url = ""
        self._stopping = False
        self._storage_problem: str | None = None
        self._webhook_url = webhook_url
        self._late_totals: dict[str, int] = {}
        self._deliveries: set[asyncio.Task[None]] = set()  # late alerts on their way

    @classmethod
    def from_config(cls, config: Any = None, state_path: str | None = None) -> ScheduleService | None:
        """The service for the ``[schedule:<name>]`` sections, or None when there are none.

        Raises ScheduleConfigError naming the first bad section and key.
        """
        from luigi import configuration
        from luigi.scheduler.settings import SchedulerConfig

        config = config if config is not None else configuration.get_config()
        specs = read_schedules(config)
        if not specs:
            return None
        directory = schedules_directory(state_path or SchedulerConfig.from_config().state_path)
        return cls(specs, directory, webhook_url=webhook_url_from_config(config))

    @property
    def names(self) -> list[str]:
        return [spec.name for spec in self._specs]

    # -- life cycle --------------------------------------------------------------------------------------

    def open(self) -> None:
        """Open the store and settle each schedule: runs a killed luigid left become lost, and the slots
        missed while it was down are queued (``catchup``) or recorded as missed. StorageError if unusable."""
        (self.directory / "logs").mkdir(parents=True, exist_ok=True)
        self.store.open()
        started_at = self._clock()
        for run_id in self.store.lose_unfinished(started_at):
            logger.warning(
                "Schedule run #%d was still going when luigid last stopped: recorded as lost", run_id
            )
        for spec in self._specs:
            self._schedules[spec.name] = self._settle(spec, started_at)
        totals = self.store.late_totals()
        self._late_totals = {name: totals.get(name, 0) for name in self._schedules}
        for record in self.store.undecided():  # they all ended (or were lost) before this start
            if record.schedule in self._schedules:
                self._judge(self._schedules[record.schedule], record.id, started_at)

    def _settle(self, spec: ScheduleSpec, started_at: float) -> _Schedule:
        stored = self.store.schedule(spec.name)
        startup = on_startup(spec.cadence, stored.watermark if stored else None, started_at, spec.catchup)
        paused = stored.paused if stored else False
        if stored is None:
            self.store.save_schedule(spec.name, StoredSchedule(False, startup.watermark))
        missed = startup.missed
        if missed is not None:
            note = (
                f"{missed.count} slot(s) from {self._when(spec, missed.first)} to "
                f"{self._when(spec, missed.last)} passed while luigid was down; not run (catchup = false)"
            )
            self.store.record_unrun(spec.name, RunOutcome.MISSED, [missed.last], started_at, note)
            logger.info("Schedule %s: %s", spec.name, note)
        if startup.catching_up:
            logger.info(
                "Schedule %s: running the slots missed while luigid was down (catchup = true)", spec.name
            )
        return _Schedule(spec, startup.watermark, paused, startup.catching_up)

    def start(self, scheduler_url: str) -> None:
        """Start the timing task on the running loop; children get ``--scheduler-url scheduler_url``."""
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._url = scheduler_url
        self._timing = self._loop.create_task(self._keep_time(), name="luigid-schedules")
        logger.info("Running %d schedule(s): %s", len(self._specs), ", ".join(self.names))
        for record in self.store.unalerted():  # judged late before this start, or while it opened
            if record.schedule in self._schedules:
                self._raise_alert(self._schedules[record.schedule].spec, record)

    async def stop(self) -> None:
        """Stop timing, stop the running children (SIGTERM, then SIGKILL) and record how they ended."""
        self._stopping = True
        if self._timing is not None:
            self._timing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._timing
        runs = [s.current for s in self._schedules.values() if s.current is not None]
        await asyncio.gather(*(run.child.stop() for run in runs if run.child is not None))
        await asyncio.gather(*(run.task for run in runs if run.task is not None), return_exceptions=True)
        await asyncio.gather(*self._deliveries, return_exceptions=True)
        self._loop = None

    def close(self) -> None:
        """Release the store (after ``stop``)."""
        self.store.close()

    # -- the timing task ---------------------------------------------------------------------------------

    async def _keep_time(self) -> None:
        while True:
            self._wake.clear()
            now = self._clock()
            for schedule in self._schedules.values():
                try:
                    self._step(schedule, now)
                except Exception:  # a bug in one schedule must not stop the others' timing; logged
                    logger.exception("Schedule %s: deciding what is due failed", schedule.spec.name)
            self._watch_deadlines(now)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._nap(self._clock()))

    def _nap(self, now: float) -> float:
        wakes = [next_wake(s.spec.cadence, s.view()) for s in self._schedules.values()]
        wakes += self._open_dues()
        return min([MAX_NAP_SECONDS, *(max(0.0, wake - now) for wake in wakes)])

    def _step(self, schedule: _Schedule, now: float) -> None:
        decision = decide(schedule.spec.cadence, schedule.view(), now)
        schedule.catching_up = decision.catching_up
        try:
            self._apply(schedule, decision, now)
        except StorageError as exc:  # nothing started; the same slots are due again at the next look
            self._report_storage(exc)
        else:
            self._report_storage(None)

    def _apply(self, schedule: _Schedule, decision: Decision, now: float) -> None:
        name = schedule.spec.name
        if decision.passed is not None:
            self.store.move_watermark(name, decision.passed)
        if decision.start is not None:
            kind = RunKind.CATCH_UP if decision.catching_up else RunKind.SLOT
            self._claim_and_launch(schedule, kind, decision.start, decision.start, now)
        if decision.skip:
            going = f"run #{schedule.current.id}" if schedule.current else "an earlier run"
            note = f"{going} of this schedule was still going"
            self.store.record_unrun(name, RunOutcome.SKIPPED, list(decision.skip), now, note)
            logger.info("Schedule %s: %d slot(s) skipped, %s", name, len(decision.skip), note)
        if decision.watermark is not None:
            schedule.watermark = max(schedule.watermark, decision.watermark)

    def _claim_and_launch(
        self, schedule: _Schedule, kind: RunKind, slot: float | None, scheduled_time: float, now: float
    ) -> int | None:
        """Claim the run durably, then start it; None when the slot was already claimed."""
        spec = schedule.spec
        run_id = self.store.claim(spec.name, kind, slot, scheduled_time, now, deadline=spec.deadline)
        if run_id is None:
            logger.warning("Schedule %s: slot %s was claimed before; not run again", schedule.spec.name, slot)
            return None
        assert self._loop is not None
        run = schedule.current = _Run(run_id)
        run.task = self._loop.create_task(self._execute(schedule, run, scheduled_time))
        return run_id

    async def _execute(self, schedule: _Schedule, run: _Run, scheduled_time: float) -> None:
        try:
            await self._run_child(schedule, run, scheduled_time)
        except Exception:  # a bug or a storage failure must not stop the other schedules; it is logged
            logger.exception("Schedule %s: run #%d failed inside luigid", schedule.spec.name, run.id)
        finally:
            schedule.current = None
            if schedule.spec.deadline is not None and not run.judged:
                self._judge_safely(schedule, run)
            self._prune(schedule)
            self._wake.set()

    async def _run_child(self, schedule: _Schedule, run: _Run, scheduled_time: float) -> None:
        spec = schedule.spec
        argv = [*self._luigi, *spec.arguments_for(scheduled_time), "--scheduler-url", self._url]
        try:
            child = await ChildRun.start(argv, spec.cwd, {**os.environ, **spec.env}, self.log_path(run.id))
        except OSError as exc:
            note = f"could not start {' '.join(argv[:3])} in {spec.cwd or os.getcwd()}: {exc}"
            self.store.finish(run.id, RunOutcome.NOT_STARTED, self._clock(), note=note)
            logger.error("Schedule %s: run #%d %s", spec.name, run.id, note)
            return
        run.child = child
        started = self._clock()
        self.store.mark_started(run.id, child.pid, started)
        if spec.deadline is not None:
            run.due = started + spec.deadline
            self._wake.set()  # the timing task's nap now ends at this deadline at the latest
        logger.info("Schedule %s: run #%d started (pid %d): %s", spec.name, run.id, child.pid, argv[3:])
        if self._stopping:
            await child.stop()
        code = await child.wait()
        outcome = RunOutcome.STOPPED if self._stopping else RunOutcome.ENDED
        meaning = exit_meaning(code, self._retcodes)
        ended = self._clock()
        self.store.finish(run.id, outcome, ended, exit_code=code, meaning=meaning, log_bytes=child.log.size)
        logger.info(
            "Schedule %s: run #%d %s with exit code %d (%s) after %.1fs",
            *(spec.name, run.id, outcome.value, code, meaning, ended - started),
        )

    def _prune(self, schedule: _Schedule) -> None:
        try:
            gone = self.store.prune(schedule.spec.name, KEEP_RUNS)
        except StorageError as exc:
            self._report_storage(exc)
            return
        for run_id in gone:
            with contextlib.suppress(FileNotFoundError):
                self.log_path(run_id).unlink()

    # -- deadlines ---------------------------------------------------------------------------------------

    def _open_dues(self) -> list[float]:
        """The deadlines of running runs not judged yet."""
        runs = [schedule.current for schedule in self._schedules.values()]
        return [run.due for run in runs if run is not None and run.due is not None and not run.judged]

    def _watch_deadlines(self, now: float) -> None:
        """Judge the running runs whose deadline has come (the tick wakes at the nearest deadline)."""
        for schedule in self._schedules.values():
            run = schedule.current
            if run is not None and run.due is not None and not run.judged and now >= run.due:
                self._judge_safely(schedule, run)

    def _judge_safely(self, schedule: _Schedule, run: _Run) -> None:
        """``_judge`` for a run of this luigid; a storage failure leaves it open, judged again later (the
        next tick, or the next start for a run that ended)."""
        try:
            run.judged = self._judge(schedule, run.id, self._clock())
        except StorageError as exc:
            self._report_storage(exc)

    def _judge(self, schedule: _Schedule, run_id: int, now: float) -> bool:
        """Record run ``run_id``'s verdict once it is known and alert when it is late; whether it is known."""
        record = self.store.run(schedule.spec.name, run_id)
        if record is None or record.deadline is None:
            return True  # pruned, or no deadline: nothing to judge
        late = verdict(record, now)
        if late is None:
            return False
        if self.store.record_verdict(run_id, late) and late:
            name = schedule.spec.name
            self._late_totals[name] = self._late_totals.get(name, 0) + 1
            logger.warning(
                "Schedule %s: run #%d is late: it did not end well within %gs of its start (%s)",
                *(name, run_id, record.deadline, record.outcome),
            )
            self._raise_alert(schedule.spec, record)
        return True

    def _raise_alert(self, spec: ScheduleSpec, record: RunRecord) -> None:
        """Send the late run's alert on a thread; before ``start`` it waits for it (the store keeps it)."""
        if self._loop is None:
            return
        task = self._loop.create_task(self._deliver(LateAlert.of(record, spec.command, spec.zone)))
        self._deliveries.add(task)
        task.add_done_callback(self._deliveries.discard)

    async def _deliver(self, alert: LateAlert) -> None:
        """Send ``alert`` once, off the loop (SMTP and HTTP block), then record that it went out."""
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, send_late_alert, alert, self._webhook_url)
        except Exception:  # a broken e-mail method must not stop luigid: logged; the run's record shows it
            logger.exception(
                "Schedule %s: sending the late alert for run #%d failed", alert.schedule, alert.run
            )
        try:
            self.store.mark_alerted(alert.run, self._clock())  # tried once: never sent again
        except StorageError as exc:  # it is sent again at the next start
            self._report_storage(exc)

    def schedule_late_totals(self) -> dict[str, int]:
        """How many runs of each schedule were late, ever (``luigid_schedule_late_total``)."""
        return dict(self._late_totals)

    def _report_storage(self, problem: StorageError | None) -> None:
        """Log a storage failure when it first happens or changes, and when it is over."""
        text = None if problem is None else str(problem)
        if text is not None and text != self._storage_problem:
            logger.error("Schedules: %s (nothing is started until it can be recorded)", text)
        elif text is None and self._storage_problem is not None:
            logger.info("Schedules: the schedules' state can be written again")
        self._storage_problem = text

    # -- the RPC methods ---------------------------------------------------------------------------------

    def schedule_list(self) -> list[dict[str, Any]]:
        """Each schedule: how it is configured, its next due time, paused flag and last runs."""
        now = self._clock()
        return [self._describe(schedule, now) for schedule in self._schedules.values()]

    def schedule_pause(self, name: str) -> dict[str, Any]:
        """Let the schedule's slots pass without running them, until resumed (kept across restarts)."""
        return self._set_paused(name, True)

    def schedule_resume(self, name: str) -> dict[str, Any]:
        """Run the schedule's slots again from the next one on (the ones passed while paused are not run)."""
        return self._set_paused(name, False)

    def schedule_trigger(self, name: str) -> dict[str, Any]:
        """Start a run of the schedule now, as for a slot at this moment (paused or not)."""
        schedule = self._lookup(name)
        if self._loop is None or self._stopping:
            raise ValueError(
                "luigid is not running its schedules right now (starting or stopping); try again"
            )
        if schedule.current is not None:
            raise ValueError(
                f"schedule {name!r} is running already (run #{schedule.current.id}); it runs once at a time"
            )
        now = self._clock()
        run_id = self._claim_and_launch(schedule, RunKind.MANUAL, None, now, now)
        logger.info("Schedule %s: run #%s started by hand", name, run_id)
        return {"name": name, "run": run_id, "scheduled_time": now}

    def schedule_log(self, name: str, run: int) -> dict[str, Any]:
        """The log of one run of the schedule (its output so far while it runs)."""
        self._lookup(name)
        record = self.store.run(name, run)
        if record is None:
            raise ValueError(f"schedule {name!r} has no run #{run} (it may have been pruned)")
        path = self.log_path(run)
        try:
            with open(path, "rb") as log:
                data = log.read(LOG_MAX_BYTES + 4096)
        except FileNotFoundError:
            data = None
        return {
            "name": name,
            "run": run,
            "outcome": record.outcome,
            "ended": record.outcome not in _OPEN,
            "has_log": data is not None,
            "text": (data or b"").decode("utf-8", errors="replace"),
            "bytes": len(data or b""),
        }

    def log_path(self, run_id: int) -> Path:
        """The log file of run ``run_id``."""
        return self.directory / "logs" / f"{run_id}.log"

    def _set_paused(self, name: str, paused: bool) -> dict[str, Any]:
        schedule = self._lookup(name)
        if paused and not schedule.paused and self._loop is not None:
            # From now on: slots already due are still decided as they would have been.
            self._step(schedule, self._clock())
        self.store.set_paused(name, paused)
        schedule.paused = paused
        if not paused:
            schedule.watermark = max(
                schedule.watermark, schedule.spec.cadence.last_at_or_before(self._clock())
            )
            self.store.move_watermark(name, schedule.watermark)
        logger.info("Schedule %s %s", name, "paused" if paused else "resumed")
        self._wake.set()
        return self._describe(schedule, self._clock())

    def _lookup(self, name: str) -> _Schedule:
        schedule = self._schedules.get(name)
        if schedule is None:
            known = ", ".join(self._schedules) or "none"
            raise ValueError(f"luigid has no schedule named {name!r} (it runs: {known})")
        return schedule

    def _describe(self, schedule: _Schedule, now: float) -> dict[str, Any]:
        spec = schedule.spec
        cadence = spec.cadence
        upcoming = schedule.watermark if schedule.catching_up else max(schedule.watermark, now)
        runs = [record.as_json() for record in self.store.last_runs(spec.name, SHOWN_RUNS)]
        for entry in runs:
            if entry["outcome"] in _OPEN:
                entry["log_bytes"] = _size(self.log_path(entry["id"]))
        return {
            "name": spec.name,
            "cadence": cadence.description,
            "command": spec.command,
            "timezone": spec.zone.key,
            "catchup": spec.catchup,
            "cwd": spec.cwd,
            "env": sorted(spec.env),  # names only: values may be secrets
            "deadline": spec.deadline,
            "paused": schedule.paused,
            "catching_up": schedule.catching_up,
            "running": schedule.current.id if schedule.current else None,
            "next_due": cadence.next_after(upcoming),
            "runs": runs,
        }

    def _when(self, spec: ScheduleSpec, moment: float) -> str:
        return local_time(moment, spec.zone).isoformat()


def _configured_retcodes() -> dict[str, int]:
    from luigi.retcodes import retcode

    options = retcode()
    return {name: int(getattr(options, name)) for name in _RETCODE_OPTIONS}


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None
