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

import dataclasses
import logging
import os
import select
import signal
import time
from collections.abc import Iterable, Mapping
from typing import Any

from luigi.event import Event
from luigi.task_status import FAILED
from luigi.worker import process_tree
from luigi.worker.slots.child import slot_main
from luigi.worker.slots.pipe import JsonLineReader, JsonLineWriter
from luigi.worker.task_process import FORWARDABLE_REPORTS, TaskOutcome, TaskProcess

logger = logging.getLogger("luigi-interface")

# Without pidfds a child's exit is only seen by polling; this bounds how late we notice it.
_EXIT_POLL_INTERVAL = 0.05
# How long an idle slot may take to exit after its job pipe is closed before it is killed.
_RETIRE_GRACE_SECONDS = 5.0


@dataclasses.dataclass
class _Job:
    task_process: TaskProcess
    deadline: float | None
    tag: str
    outcome: TaskOutcome | None = None


class TaskSlot:
    """One slot process, seen from the worker: its pipes, its current job, and whether it still lives."""

    def __init__(
        self, pid: int, job_writer: JsonLineWriter, reader: JsonLineReader, known_ids: frozenset[str]
    ):
        self.pid = pid
        self.job: _Job | None = None
        self.exitcode: int | None = None
        self.retiring = False
        self._job_writer = job_writer
        self._reader = reader
        self._known_ids = known_ids
        self._pidfd = _open_pidfd(pid)

    @classmethod
    def spawn(
        cls, tasks: Mapping[str, Any], completion_cache: dict[str, bool] | None, fds_to_close: Iterable[int]
    ) -> TaskSlot:
        """Fork a slot that knows ``tasks``; ``fds_to_close`` are other slots' pipes, closed in the child."""
        job_read, job_write = os.pipe()
        result_read, result_write = os.pipe()
        worker_pid = os.getpid()
        pid = os.fork()
        if pid == 0:
            fds = [job_write, result_read, *fds_to_close]
            slot_main(job_read, result_write, tasks, completion_cache, fds, worker_pid)
        os.close(job_read)
        os.close(result_write)
        try:
            os.setpgid(pid, pid)  # the slot does this too; whichever runs first wins the race
        except OSError:
            pass
        writer = JsonLineWriter(job_write, nonblocking=True)
        return cls(pid, writer, JsonLineReader(result_read), frozenset(tasks))

    def knows(self, task_id: str) -> bool:
        return task_id in self._known_ids

    def parent_fds(self) -> list[int]:
        return [self._job_writer.fileno(), self._reader.fileno()]

    def fds(self) -> list[int]:
        """Descriptors that become readable when the slot has something to say or exits."""
        watched = [] if self._reader.at_eof else [self._reader.fileno()]
        if self._pidfd is not None:
            watched.append(self._pidfd)
        return watched

    @property
    def exit_is_polled(self) -> bool:
        return self._pidfd is None and self.exitcode is None

    def assign(self, task_process: TaskProcess, deadline: float | None, tag: str) -> bool:
        """Hand the slot a task to run, its processes tagged ``tag``; False if the slot cannot take it."""
        options = {  # not dataclasses.asdict: that would deep-copy the completion cache for every task
            field.name: getattr(task_process.options, field.name)
            for field in dataclasses.fields(task_process.options)
            if field.name not in ("completion_cache", "in_child_process")  # the slot has its own
        }
        job = {"kind": "job", "task_id": task_process.task.task_id, "timeout": task_process.timeout}
        if not self._job_writer.send({**job, "options": options, "tag": tag}):
            return False
        self.job = _Job(task_process, deadline, tag)
        return True

    def deliver_message(self, message: dict[str, Any]) -> bool:
        """Pass a scheduler message to the running task."""
        return self._job_writer.send({"kind": "message", **message})

    def service(self) -> None:
        """Read what the slot sent (applying its reports) and notice whether it has exited."""
        self._drain()
        if self.exitcode is None and self._reap(os.WNOHANG):
            self._drain()

    def _drain(self) -> None:
        self._reader.pump()
        for message in self._reader.take_all():
            if isinstance(message, dict) and "outcome" in message and self.job is not None:
                self.job.outcome = TaskOutcome.from_message(message["outcome"])
                self.retiring = bool(message.get("retiring"))
            elif isinstance(message, dict) and message.get("report") in FORWARDABLE_REPORTS and self.job:
                self._apply_report(self.job.task_process, message["report"], message.get("args", []))
            else:
                logger.warning("Ignoring an unexpected message from task slot %s: %r", self.pid, message)

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
        self._drain()

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
        self._close_pidfd()

    def _close_pidfd(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


class SlotPool:
    """The worker's slots: hands out tasks, waits for them, turns exits and timeouts into outcomes."""

    def __init__(self, worker_tag: str | None = None) -> None:
        self._slots: list[TaskSlot] = []
        self.worker_tag = worker_tag or process_tree.worker_tag()  # every task run here is tagged under it
        self._runs = 0

    def __len__(self) -> int:
        """How many tasks are running in slots."""
        return sum(1 for slot in self._slots if slot.job is not None)

    def slot_running(self, task_id: str) -> TaskSlot | None:
        """The slot running ``task_id`` (also called from the keep-alive thread, hence the copy)."""
        for slot in list(self._slots):
            if slot.job is not None and slot.job.task_process.task.task_id == task_id:
                return slot
        return None

    def start(
        self,
        task_process: TaskProcess,
        deadline: float | None,
        tasks: Mapping[str, Any],
        completion_cache: dict[str, bool] | None,
    ) -> None:
        """Run ``task_process`` in an idle slot that knows its task, forking a fresh slot if none does."""
        self._runs += 1
        tag = process_tree.run_tag(self.worker_tag, self._runs)
        slot = self._idle_slot_knowing(task_process.task.task_id)
        if slot is None or not slot.assign(task_process, deadline, tag):
            if slot is not None:
                self._discard(slot)
            slot = TaskSlot.spawn(tasks, completion_cache, self._parent_fds())
            self._slots.append(slot)
            if not slot.assign(task_process, deadline, tag):
                raise OSError(f"Could not hand {task_process.task} to a freshly forked task slot")

    def _idle_slot_knowing(self, task_id: str) -> TaskSlot | None:
        idle = [slot for slot in self._slots if slot.job is None]
        for slot in idle:
            if slot.knows(task_id):
                return slot
        if idle:
            self._discard(idle[0])  # its snapshot predates this task; a fresh fork replaces it
        return None

    def _parent_fds(self) -> list[int]:
        return [fd for slot in self._slots for fd in slot.parent_fds()]

    def wait(self, longest: float, now: float) -> None:
        """Block until a slot reports or exits, the nearest deadline passes, or ``longest`` seconds."""
        deadlines = [slot.job.deadline for slot in self._slots if slot.job and slot.job.deadline is not None]
        timeout = max(0.0, min([longest, *(deadline - now for deadline in deadlines)]))
        poller = select.poll()
        for slot in self._slots:
            for fd in slot.fds():
                poller.register(fd, select.POLLIN)
        if any(slot.exit_is_polled for slot in self._slots):
            timeout = min(timeout, _EXIT_POLL_INTERVAL)
        poller.poll(int(timeout * 1000) + 1)

    def collect(self, now: float) -> list[TaskOutcome]:
        """Outcomes of jobs that finished, whose slot died, or that ran past their deadline (killed)."""
        outcomes = []
        for slot in list(self._slots):
            slot.service()
            job = slot.job
            if job is not None and job.outcome is not None:
                outcomes.append(job.outcome)
            elif job is not None and slot.exitcode is not None:
                slot.kill_orphans()
                outcomes.append(_outcome_of_dead_slot(job, slot.exitcode))
            elif job is not None and job.deadline is not None and now >= job.deadline:
                slot.kill()
                outcomes.append(job.outcome or _outcome_of_timed_out_job(job))
            elif job is not None:
                continue
            slot.job = None
            if slot.retiring or slot.exitcode is not None:
                self._discard(slot)
        return outcomes

    def kill_job(self, task_id: str) -> bool:
        """Kill the slot running ``task_id`` and every process of its task; its outcome is dropped."""
        slot = self.slot_running(task_id)
        if slot is None:
            return False
        slot.kill()
        slot.job = None
        slot.close()
        self._slots.remove(slot)
        return True

    def _discard(self, slot: TaskSlot) -> None:
        """Retire an idle slot, or kill a busy one with everything its task started."""
        if slot.job is None:
            slot.retire()
        else:
            logger.info("Killing the process of unfinished task %s", slot.job.task_process.task.task_id)
            slot.kill()
        slot.close()
        self._slots.remove(slot)

    def shut_down(self) -> None:
        """Retire idle slots, kill busy ones, and whatever finished tasks left running (the worker stops)."""
        ran_any = self._runs > 0
        for slot in list(self._slots):
            self._discard(slot)
        if ran_any:
            process_tree.kill_tree(None, self.worker_tag, prefix=True)


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
