"""The worker's task slots: child processes that run its tasks, watched and, when needed, killed.

Forking a fresh process per task makes the worker pay for copying its page tables (and then for
copy-on-write faults) on every task, which caps a large graph at a few hundred tasks a second. So each
slot is forked once and runs many tasks (see ``luigi.worker.slots.child``). A slot only runs tasks it
already knows, so a task object reaches it exactly as the worker built it; for a task scheduled after the
slot was forked, an idle slot is replaced by a fresh fork. A task that times out is killed with its slot
and every process either started (found by the run's tag, ``luigi.worker.process_tree``); a slot that dies
is reported with its exit code, and what its task started is killed. Exits are noticed
through pidfds (or by polling), so nothing waits on a child that died without a word.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import select
import signal
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from luigi.event import Event
from luigi.task_status import FAILED
from luigi.worker import process_tree
from luigi.worker.slots.child import slot_main
from luigi.worker.slots.pipe import ClaimPipe, JsonLineReader, JsonLineWriter
from luigi.worker.task_process import FORWARDABLE_REPORTS, TaskOutcome, TaskProcess, TaskRunOptions

logger = logging.getLogger("luigi-interface")

# Without pidfds a child's exit is only seen by polling; this bounds how late we notice it.
_EXIT_POLL_INTERVAL = 0.05
# How long an idle slot may take to exit after its job pipe is closed before it is killed.
_RETIRE_GRACE_SECONDS = 5.0
# A slot whose last task ran shorter than this (seconds) is handed the next tasks while it runs one, up to
# QUEUED_PER_SLOT of them: it starts each as the last ends, without waiting for the worker to read the
# outcome and ask the scheduler, and the worker's reads and writes carry several tasks at once. A queued
# task is taken back for an idle slot once the task before it has run this long, so nothing waits behind
# a long task while a slot is free.
SHORT_RUN = 0.02
QUEUED_PER_SLOT = 3
# Once as many slots as processors are busy, a granted task waits up to SHORT_RUN for one of them to take it
# in its queue (the first task of a fresh slot runs slower: up to FIRST_RUN_GRACE) before a slot is forked
# for it: a slot beyond the processors only shares them, and its fork costs the worker.
FIRST_RUN_GRACE = 0.1
_PROCESSORS = os.cpu_count() or 1


# The run options a slot is told with each job: not dataclasses.asdict, which would deep-copy the completion
# cache for every task, and not the fields the slot has its own of.
_SENT_OPTIONS = tuple(
    field.name
    for field in dataclasses.fields(TaskRunOptions)
    if field.name not in ("completion_cache", "in_child_process")
)


@dataclasses.dataclass
class _Job:
    """A granted task's run: waiting in the pool, then handed to a slot (number ``number`` there), running
    from ``started`` (``time.time()``, when the slot was free for it) until its ``outcome`` is read."""

    task_process: TaskProcess
    tag: str
    fixed_deadline: float | None = None  # (wall clock) instead of the task's timeout from its start
    number: int = -1
    started: float | None = None
    deadline: float | None = None
    outcome: TaskOutcome | None = None
    messages: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # sent again if it moves

    @property
    def task_id(self) -> str:
        return str(self.task_process.task.task_id)

    def begin(self, now: float) -> None:
        """The slot is free for this job: its time (``worker_timeout``) counts from now."""
        timeout = self.task_process.timeout
        self.started = now
        self.deadline = self.fixed_deadline or (now + timeout if timeout else None)

    def message(self) -> dict[str, Any]:
        """The job's line, without its run options (``options``)."""
        return {
            "kind": "job",
            "task_id": self.task_id,
            "number": self.number,
            "timeout": self.task_process.timeout,
            "tag": self.tag,
        }

    def options(self) -> dict[str, Any]:
        run_options = self.task_process.options  # (built at each read)
        return {name: getattr(run_options, name) for name in _SENT_OPTIONS}


class TaskSlot:
    """One slot process, seen from the worker: its pipes, its jobs (the first runs, the rest are queued
    behind it), the jobs that ended, and whether it still lives."""

    def __init__(
        self,
        pid: int,
        job_writer: JsonLineWriter,
        reader: JsonLineReader,
        claims: ClaimPipe,
        known_ids: frozenset[str],
    ):
        self.pid = pid
        self.jobs: collections.deque[_Job] = collections.deque()
        self.ended: list[_Job] = []  # outcomes read, not collected yet
        self.exitcode: int | None = None
        self.retiring = False  # it said it exits after its job, or a write to it failed: hand it nothing
        self.ran_short = False  # whether its last task ran under SHORT_RUN (tasks may queue behind one)
        self.ran_any = False  # whether it has finished a task
        self._job_writer = job_writer
        self._reader = reader
        self._claims = claims
        self._known_ids = known_ids
        self._numbers = 0
        self._options_sent: dict[str, Any] | None = None  # the run options of the last job line written
        self._pidfd = _open_pidfd(pid)

    @classmethod
    def spawn(
        cls, tasks: Mapping[str, Any], completion_cache: dict[str, bool] | None, fds_to_close: Iterable[int]
    ) -> TaskSlot:
        """Fork a slot that knows ``tasks``; ``fds_to_close`` are other slots' pipes, closed in the child."""
        job_read, job_write = os.pipe()
        result_read, result_write = os.pipe()
        claim_read, claim_write = os.pipe()
        worker_pid = os.getpid()
        pid = os.fork()
        if pid == 0:
            fds = [job_write, result_read, claim_write, *fds_to_close]
            slot_main(job_read, result_write, claim_read, tasks, completion_cache, fds, worker_pid)
        os.close(job_read)
        os.close(result_write)
        try:
            os.setpgid(pid, pid)  # the slot does this too; whichever runs first wins the race
        except OSError:
            pass
        writer = JsonLineWriter(job_write, nonblocking=True)
        claims = ClaimPipe(claim_read, claim_write)
        return cls(pid, writer, JsonLineReader(result_read), claims, frozenset(tasks))

    @property
    def job(self) -> _Job | None:
        """The job running (or about to), if any."""
        return self.jobs[0] if self.jobs else None

    def knows(self, task_id: str) -> bool:
        return task_id in self._known_ids

    def parent_fds(self) -> list[int]:
        return [self._job_writer.fileno(), self._reader.fileno(), *self._claims.fds()]

    def fds(self) -> list[int]:
        """Descriptors that become readable when the slot has something to say or exits."""
        watched = [] if self._reader.at_eof else [self._reader.fileno()]
        if self._pidfd is not None:
            watched.append(self._pidfd)
        return watched

    @property
    def exit_is_polled(self) -> bool:
        return self._pidfd is None and self.exitcode is None

    def hand(self, jobs: list[_Job], now: float) -> bool:
        """Queue ``jobs`` in the slot in one write, each after its token, with the messages sent to it so
        far; False if the slot cannot take them (it is then retiring, and they are not its to run)."""
        for job in jobs:
            job.number = self._numbers
            self._numbers += 1
        offered = self._claims.offer([job.number for job in jobs])  # before the jobs: a slot never lacks one
        lines = []
        for job in jobs[:offered]:
            self.jobs.append(job)
            lines.append(self._line_of(job))
            lines.extend({"kind": "message", **message} for message in job.messages)
        if self.jobs and self.jobs[0].started is None:
            self.jobs[0].begin(now)
        if len(lines) < len(jobs) or not self._job_writer.send_all(lines):
            self.retiring = True  # the caller takes back what the slot has not started
            return False
        return True

    def _line_of(self, job: _Job) -> dict[str, Any]:
        """The job's line, with its run options only when they differ from the last ones written (the slot
        keeps them: they are the same for every run but a traced one)."""
        line, options = job.message(), job.options()
        if options != self._options_sent:
            line["options"] = self._options_sent = options
        return line

    def take_back(self) -> _Job | None:
        """Take back the oldest job the slot has not started (it never will); None if it started all."""
        token = self._claims.take_oldest()
        if token is None:
            return None
        job = next(job for job in self.jobs if job.number % 256 == token)
        was_running_next = job is self.jobs[0]
        self.jobs.remove(job)
        job.number, job.started, job.deadline = -1, None, None
        if was_running_next and self.jobs:
            self.jobs[0].begin(time.time())
        return job

    def take_back_all(self) -> list[_Job]:
        """Take back every job the slot has not started, oldest first."""
        taken = []
        while (job := self.take_back()) is not None:
            taken.append(job)
        return taken

    def deliver_message(self, job: _Job, message: dict[str, Any]) -> bool:
        """Pass a scheduler message to ``job``'s task (kept, to be sent again should the job move)."""
        job.messages.append(message)
        return self._job_writer.send({"kind": "message", **message})

    def service(self, now: float) -> None:
        """Read what the slot sent (applying its reports, ending jobs) and notice whether it has exited."""
        self._drain(now)
        if self.exitcode is None and self._reap(os.WNOHANG):
            self._drain(now)

    def _drain(self, now: float) -> None:
        self._reader.pump()
        for message in self._reader.take_all():
            if isinstance(message, dict) and "outcome" in message and self.jobs:
                outcome = TaskOutcome.from_message(message["outcome"])
                self._end_job(outcome, bool(message.get("retiring")), now)
            elif isinstance(message, dict) and message.get("report") in FORWARDABLE_REPORTS and self.jobs:
                self._apply_report(self.jobs[0].task_process, message["report"], message.get("args", []))
            else:
                logger.warning("Ignoring an unexpected message from task slot %s: %r", self.pid, message)

    def _end_job(self, outcome: TaskOutcome, retiring: bool, now: float) -> None:
        """The running job ended; the next one, if any, starts now."""
        job = self.jobs.popleft()
        job.outcome = outcome
        self.ended.append(job)
        self.retiring = self.retiring or retiring
        self.ran_short = job.started is not None and now - job.started < SHORT_RUN
        self.ran_any = True
        if self.jobs:
            self.jobs[0].begin(now)

    @staticmethod
    def _apply_report(task_process: TaskProcess, name: str, args: list[Any]) -> None:
        try:
            getattr(task_process.status_reporter, name)(*args)
        except Exception:  # a failed progress report must not take the worker down; it is logged
            logger.exception("Could not forward %s for %s", name, task_process.task)

    def _reap(self, options: int) -> bool:
        try:
            pid, status = os.waitpid(self.pid, options)
        except ChildProcessError:
            pid, status = self.pid, 255 << 8  # reaped elsewhere: how it ended is unknown
        if pid == 0:
            return False
        self.exitcode = os.waitstatus_to_exitcode(status)
        self._close_pidfd()
        return True

    def kill(self) -> None:
        """Kill the slot and every process its task started (a task over its time), then reap it."""
        tag = self.job.tag if self.job is not None else None
        if self.exitcode is None:
            process_tree.kill_tree(self.pid, tag)
            self._reap(0)
        elif tag is not None:
            process_tree.kill_tree(None, tag)
        self._drain(time.time())

    def kill_orphans(self) -> None:
        """The slot died running a task: kill what that task started (its group and tagged processes)."""
        if self.job is not None:
            process_tree.kill_tree(None, self.job.tag)
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def retire(self) -> None:
        """Let an idle slot exit (it does on end of input), leaving alone what its tasks started."""
        self._job_writer.close()
        if self.exitcode is None and not self._wait_for_exit(_RETIRE_GRACE_SECONDS):
            logger.warning("Task slot %s did not exit when asked; killing it", self.pid)
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._reap(0)

    def _wait_for_exit(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self._reap(os.WNOHANG):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if self._pidfd is not None:
                select.select([self._pidfd], [], [], remaining)
            else:
                time.sleep(min(remaining, _EXIT_POLL_INTERVAL))
        return True

    def close(self) -> None:
        self._reader.close()
        self._job_writer.close()
        self._claims.close()
        self._close_pidfd()

    def _close_pidfd(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


class SlotPool:
    """The worker's slots: hands out tasks, waits for them, turns exits and timeouts into outcomes.

    A slot is forked knowing ``tasks`` (read at each fork). Up to ``worker_processes()`` slots run at once
    (the scheduler may change it). A task granted while every slot is busy waits in the pool; ``wait`` and
    ``collect`` queue waiting tasks in slots whose last task ran short (``room`` says how many the pool
    takes), take a queued task back for a slot that is free, and start waiting tasks in free slots.
    """

    def __init__(
        self,
        tasks: Mapping[str, Any],
        completion_cache: dict[str, bool] | None,
        worker_processes: Callable[[], int],
        worker_tag: str | None = None,
    ) -> None:
        self._tasks = tasks
        self._completion_cache = completion_cache
        self._worker_processes = worker_processes
        self._slots: list[TaskSlot] = []
        self._waiting: collections.deque[_Job] = collections.deque()  # granted, in no slot yet
        self._ready: list[TaskOutcome] = []  # to collect: FAILED as no slot could start them, or ended
        # in a slot killed for another task's sake
        self.worker_tag = worker_tag or process_tree.worker_tag()  # every task run here is tagged under it
        self._runs = 0

    def __len__(self) -> int:
        """How many tasks are running in slots, queued in one or waiting for one."""
        return sum(len(slot.jobs) for slot in self._slots) + len(self._waiting) + len(self._ready)

    def room(self, slots: int) -> int:
        """How many granted tasks the pool takes at a time for ``slots`` slots: one a slot, and
        QUEUED_PER_SLOT more for each slot whose last task ran short."""
        slots = max(1, slots)
        return slots + QUEUED_PER_SLOT * min(slots, sum(1 for slot in self._slots if slot.ran_short))

    def _slots_wanted(self) -> int:
        return max(1, self._worker_processes())

    def _holding(self, task_id: str) -> tuple[TaskSlot | None, _Job | None]:
        """The slot holding ``task_id``'s job (None while it waits) and the job (None: not held here).
        Also called from the keep-alive thread, hence the copies."""
        for slot in list(self._slots):
            for job in list(slot.jobs):
                if job.task_id == task_id:
                    return slot, job
        for job in list(self._waiting):
            if job.task_id == task_id:
                return None, job
        return None, None

    def holds(self, task_id: str) -> bool:
        """Whether ``task_id`` runs in a slot, is queued in one or waits for one."""
        return self._holding(task_id)[1] is not None

    def deliver(self, task_id: str, message: dict[str, Any]) -> bool | None:
        """Pass a scheduler message to the task (kept until it starts if it waits); None if not held here,
        False if its slot could not take it."""
        slot, job = self._holding(task_id)
        if job is None:
            return None
        if slot is None:
            job.messages.append(message)
            return True
        return slot.deliver_message(job, message)

    def start(self, task_process: TaskProcess, deadline: float | None = None) -> None:
        """Run ``task_process`` in an idle slot that knows its task, or in a fresh fork while not every slot
        wanted is busy; else it waits, to be queued in a slot by the next ``wait`` or ``collect``. It waits
        too while a slot whose last task ran short is idle: that slot takes it with the tasks granted after
        it in one write at the next ``wait`` or ``collect`` (each write wakes the slot). Its time runs from
        its start, or out at ``deadline`` (wall clock) if given."""
        self._runs += 1
        job = _Job(task_process, process_tree.run_tag(self.worker_tag, self._runs), deadline)
        now = time.time()
        if self._may_start(now) and not self._idle_slot_ran_short():
            self._dispatch(job, now)  # OSError: the runner fails the task
        else:  # an idle slot whose last task ran short takes it with the next ones, in one write
            self._waiting.append(job)

    def _idle_slot_ran_short(self) -> bool:
        return any(slot.ran_short and not slot.jobs and not slot.retiring for slot in self._slots)

    def _busy(self) -> int:
        return sum(1 for slot in self._slots if slot.jobs)

    def _dispatch(self, job: _Job, now: float) -> None:
        """Hand ``job`` to an idle slot that knows its task (with waiting jobs queued behind it if its last
        task ran short), or to a fresh fork; OSError if none takes it."""
        slot = self._idle_slot_knowing(job.task_id)
        if slot is not None:
            queued = self._take_waiting_for(slot, QUEUED_PER_SLOT) if slot.ran_short else []
            if self._hand_idle(slot, [job, *queued], now):
                return
            self._requeue(queued)
            self._discard(slot)
        slot = TaskSlot.spawn(self._tasks, self._completion_cache, self._parent_fds())
        self._slots.append(slot)
        if not self._hand_idle(slot, [job], now):
            self._discard(slot)
            raise OSError(f"Could not hand {job.task_process.task} to a freshly forked task slot")

    @staticmethod
    def _hand_idle(slot: TaskSlot, jobs: list[_Job], now: float) -> bool:
        """Hand ``jobs`` to an idle slot; False (the jobs taken back from it) if the slot cannot take them."""
        if slot.hand(jobs, now):
            return True
        slot.take_back_all()
        slot.jobs.clear()  # a job whose line could not be written is not the slot's to start
        return False

    def _take_waiting_for(self, slot: TaskSlot, count: int) -> list[_Job]:
        """Up to ``count`` waiting jobs (oldest first) whose task ``slot`` knows, taken out of the wait."""
        batch = [job for job in self._waiting if slot.knows(job.task_id)][:count]
        for job in batch:
            self._waiting.remove(job)
        return batch

    def _idle_slot_knowing(self, task_id: str) -> TaskSlot | None:
        idle = [slot for slot in self._slots if not slot.jobs and not slot.retiring]
        for slot in idle:
            if slot.knows(task_id):
                return slot
        if idle:
            self._discard(idle[0])  # its snapshot predates this task; a fresh fork replaces it
        return None

    def _parent_fds(self) -> list[int]:
        return [fd for slot in self._slots for fd in slot.parent_fds()]

    # -- placing jobs: free slots first, then queues behind short tasks, then taken back for free slots --

    def _place(self, now: float) -> None:
        """Start waiting jobs in free slots, queue the rest behind short tasks, and move a queued job
        from behind a task running long to a free slot."""
        self._start_waiting(now)
        self._queue_waiting(now)
        while self._busy() < self._slots_wanted() and self._take_back_for_free_slot(now):
            pass

    def _may_start(self, now: float) -> bool:
        """Whether a job may start in a slot of its own: while fewer slots than wanted are busy, but not once
        as many as there are processors are busy and one of them may yet take it in its queue (its task has
        run under SHORT_RUN so far, or under FIRST_RUN_GRACE if it is the slot's first): another slot would
        only share the processors, and cost a fork. Past that, the job starts in a slot of its own."""
        busy = self._busy()
        if busy >= self._slots_wanted():
            return False
        return busy < _PROCESSORS or not any(_may_take_queue(slot, now) for slot in self._slots)

    def _start_waiting(self, now: float) -> None:
        while self._waiting and self._may_start(now):
            job = self._waiting.popleft()
            try:
                self._dispatch(job, now)
            except OSError as exc:  # e.g. fork() refused for lack of memory: the task fails, not the worker
                self._ready.append(could_not_start(job.task_process.task, exc))

    def _queue_waiting(self, now: float) -> None:
        for slot in self._slots:
            if not self._waiting:
                return
            room = QUEUED_PER_SLOT + 1 - len(slot.jobs)
            if not slot.ran_short or slot.retiring or room <= 0:
                continue
            batch = self._take_waiting_for(slot, room)
            if batch and not slot.hand(batch, now):
                taken = slot.take_back_all()
                self._requeue(taken + [job for job in batch if job not in slot.jobs and job not in taken])

    def _requeue(self, jobs: list[_Job]) -> None:
        """Jobs taken back unstarted wait again, first in line, in their order."""
        self._waiting.extendleft(reversed(jobs))

    def _take_back_for_free_slot(self, now: float) -> bool:
        """Move the oldest job queued behind a task running SHORT_RUN or longer to a free slot."""
        for slot in self._slots:
            head = slot.job
            if len(slot.jobs) > 1 and head is not None and head.started and now - head.started >= SHORT_RUN:
                job = slot.take_back()
                if job is not None:
                    self._waiting.appendleft(job)
                    self._start_waiting(now)
                    return True
        return False

    def _next_check(self, now: float) -> float | None:
        """When a queued job may next be taken back for a free slot, or a waiting job start in a slot of its
        own (``_may_start``) (None: no slot is free, or none waits)."""
        if self._busy() >= self._slots_wanted():
            return None
        checks = [
            slot.jobs[0].started + SHORT_RUN
            for slot in self._slots
            if len(slot.jobs) > 1 and slot.jobs[0].started
        ]
        if self._waiting:
            checks.extend(_end_of_youth(slot) for slot in self._slots if _may_take_queue(slot, now))
        return min(checks) if checks else None

    # -- waiting and collecting ------------------------------------------------------------------------

    def wait(self, longest: float, now: float) -> None:
        """Place waiting jobs, then block until a slot reports or exits, the nearest deadline passes, a
        queued job may be taken back for a free slot, or ``longest`` seconds."""
        self._place(now)
        if self._ready:
            return
        deadlines = [slot.job.deadline for slot in self._slots if slot.job and slot.job.deadline is not None]
        check = self._next_check(now)
        timeout = max(0.0, min([longest, *(deadline - now for deadline in deadlines)]))
        if check is not None:
            timeout = max(0.0, min(timeout, check - now))
        poller = select.poll()
        for slot in self._slots:
            for fd in slot.fds():
                poller.register(fd, select.POLLIN)
        if any(slot.exit_is_polled for slot in self._slots):
            timeout = min(timeout, _EXIT_POLL_INTERVAL)
        poller.poll(int(timeout * 1000) + 1)

    def collect(self, now: float) -> list[TaskOutcome]:
        """Outcomes of jobs that finished, whose slot died, or that ran past their deadline (killed), in
        the order read; then the freed slots take the jobs waiting."""
        outcomes, self._ready = self._ready, []
        for slot in list(self._slots):
            slot.service(now)
            outcomes.extend(self._ended_in(slot, now))
            if slot.retiring or slot.exitcode is not None:
                self._requeue(slot.take_back_all())
            if (slot.retiring and not slot.jobs) or slot.exitcode is not None:
                self._discard(slot)
        self._place(now)
        outcomes.extend(self._ready)
        self._ready = []
        return outcomes

    def _ended_in(self, slot: TaskSlot, now: float) -> list[TaskOutcome]:
        """Outcomes read from the slot, then of the job it died running or that ran out of its time."""
        outcomes = self._take_ended(slot)
        if slot.exitcode is not None:
            self._requeue(slot.take_back_all())
            if slot.job is not None:  # the job it died running (only one runs at a time)
                slot.kill_orphans()
                outcomes.append(_outcome_of_dead_slot(slot.job, slot.exitcode))
                slot.jobs.clear()
            return outcomes
        late = slot.job
        if late is None or late.deadline is None or now < late.deadline:
            return outcomes
        self._requeue(slot.take_back_all())
        if late not in slot.jobs:  # it had not started yet: it waits for a slot again
            return outcomes
        slot.kill()
        outcomes.extend(self._take_ended(slot))
        if late in slot.jobs:
            outcomes.append(_outcome_of_timed_out_job(late))
        # A job it had started as the late one ended was killed with the slot, by no fault of its own.
        self._requeue([other for other in slot.jobs if other is not late])
        slot.jobs.clear()
        return outcomes

    @staticmethod
    def _take_ended(slot: TaskSlot) -> list[TaskOutcome]:
        outcomes = [job.outcome for job in slot.ended if job.outcome is not None]
        slot.ended.clear()
        return outcomes

    def kill_job(self, task_id: str) -> bool:
        """Kill the run of ``task_id`` with every process of its task (and its slot), or take it back
        unstarted; its outcome is dropped. Other jobs queued in that slot wait for another."""
        slot, job = self._holding(task_id)
        if job is None:
            return False
        if slot is None:
            self._waiting.remove(job)
            return True
        taken = []
        while job in slot.jobs and (taken_back := slot.take_back()) is not None:
            taken.append(taken_back)
        self._requeue([other for other in taken if other is not job])
        if job in slot.jobs:  # it has started: the slot goes with it (nothing else of it has started)
            self._requeue(slot.take_back_all())
            slot.kill()
            slot.jobs.clear()
            slot.ended = [ended for ended in slot.ended if ended is not job]  # its outcome is dropped
            self._ready.extend(self._take_ended(slot))  # (collected with the next outcomes)
            slot.close()
            self._slots.remove(slot)
        return True

    def _discard(self, slot: TaskSlot) -> None:
        """Retire an idle slot, or kill a busy one with everything its task started."""
        if not slot.jobs:
            slot.retire()
        else:
            logger.info("Killing the process of unfinished task %s", slot.jobs[0].task_id)
            slot.kill()
        slot.close()
        if slot in self._slots:
            self._slots.remove(slot)

    def shut_down(self) -> None:
        """Retire idle slots, kill busy ones, and whatever finished tasks left running (the worker stops);
        jobs waiting for a slot are dropped unstarted."""
        ran_any = self._runs > 0
        self._waiting.clear()
        for slot in list(self._slots):
            self._discard(slot)
        if ran_any:
            process_tree.kill_tree(None, self.worker_tag, prefix=True)


def _end_of_youth(slot: TaskSlot) -> float:
    """When the busy slot's task stops being young enough for jobs to wait for its queue (``_may_start``)."""
    head = slot.job
    started = head.started if head is not None and head.started is not None else 0.0
    return started + (SHORT_RUN if slot.ran_any else FIRST_RUN_GRACE)


def _may_take_queue(slot: TaskSlot, now: float) -> bool:
    """Whether the busy slot may take jobs queued behind its task (now or, its queue full, soon): the task
    running is young."""
    head = slot.job
    if head is None or head.started is None or slot.retiring:
        return False
    return now < _end_of_youth(slot)


def could_not_start(task: Any, exc: OSError) -> TaskOutcome:
    """FAILED: no slot could be started or handed the task (the worker goes on)."""
    logger.error("Could not start a process for %s: %s", task, exc)
    return TaskOutcome(task.task_id, FAILED, f"Could not start a process for {task}: {exc}")


def _exit_description(exitcode: int) -> str:
    if exitcode < 0:
        try:
            return f"{exitcode} (killed by {signal.Signals(-exitcode).name})"
        except ValueError:
            pass
    return str(exitcode)


def _outcome_of_dead_slot(job: _Job, exitcode: int) -> TaskOutcome:
    """FAILED naming the exit code; fires PROCESS_FAILURE."""
    task = job.task_process.task
    message = f"Worker task {task.task_id} died unexpectedly with exit code {_exit_description(exitcode)}"
    logger.error(message)
    task.trigger_event(Event.PROCESS_FAILURE, task, message)
    return TaskOutcome(task.task_id, FAILED, message)


def _outcome_of_timed_out_job(job: _Job) -> TaskOutcome:
    """FAILED naming the timeout; fires TIMEOUT."""
    task = job.task_process.task
    timeout = job.task_process.timeout
    message = f"Worker task {task.task_id} timed out after {timeout} seconds and was terminated."
    logger.error(message)
    task.trigger_event(Event.TIMEOUT, task, message)
    return TaskOutcome(task.task_id, FAILED, message)


def kill_process_tree(pid: int) -> None:
    """SIGKILL ``pid``, its descendants and its process group (for callers outside the worker)."""
    process_tree.kill_tree(pid, None)


def _open_pidfd(pid: int) -> int | None:
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:
        return None
    try:
        return int(pidfd_open(pid))
    except OSError:
        return None
