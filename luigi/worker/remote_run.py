"""One task's run on a cluster's worker process (Dask, Ray), as a local run would do it.

``run_remote`` runs the task with ``TaskProcess`` (in a forked, killable task slot when the task has a
timeout) and sends back to the luigi worker, on the run's channel, while it runs:
- its progress reports (``set_status_message``, ``set_progress_percentage``, message responses, ...);
- the events it fires (START, PROCESSING_TIME, ...), as long as their arguments travel as plain data.
Each message on the channel carries its number in the run (``seq``): a transport may deliver them out of
order (Ray's async actor) and need not wait for each, since the luigi worker applies them in their order.
From the first event that does not (a FAILURE carrying its exception), events are kept in order and sent
back with the outcome in ``RemoteRun``, so the luigi worker fires every event once, in the order fired.
Scheduler messages for a task that accepts them arrive in the run's ``Mailbox``; an operator's cancel of a
run in a task slot is asked for through ``cancel_reason`` (the slot is killed with everything its task
started). Each cluster module (``dask_remote``, ``ray_remote``) supplies the channel's transport, the
mailbox and the cancel source.
"""

from __future__ import annotations

import os
import pickle
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, Pipe
from typing import TYPE_CHECKING, Any, Protocol

from luigi.task import Task
from luigi.task_status import FAILED
from luigi.worker.task_process import (
    FORWARDABLE_REPORTS,
    OutcomeBox,
    SchedulerMessage,
    TaskOutcome,
    TaskProcess,
    TaskRunOptions,
    make_task_process,
)

if TYPE_CHECKING:
    from luigi.worker.slots.pool import SlotPool

# How often a task slot on a cluster's worker is checked (its report pipe drained, messages passed on).
_SLOT_POLL_SECONDS = 0.2
EVENT = "event"
REPORT = "report"


@dataclass
class RemoteRun:
    """What a remote run sends back: the outcome, the events not sent live (in order), and counts.

    An event's arguments name the task as a ``TheTask``; an argument that does not pickle comes as its repr.
    ``sent`` says how many messages (reports and live events) went on the channel, so the luigi worker can
    wait for them all.
    """

    outcome: TaskOutcome
    events: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)
    pid: int = 0
    sent: int = 0


class TheTask:
    """Stands for the task itself among a recorded event's arguments (the worker puts its own task there)."""


class Mailbox(Protocol):
    """Where the scheduler messages of one run arrive, on the cluster's worker."""

    def get(self, timeout: float | None) -> dict[str, Any]:
        """The next message; queue.Empty when none came within ``timeout`` seconds (None: wait)."""

    def qsize(self) -> int:
        """How many messages wait."""

    def close(self) -> None:
        """Let go of the mailbox: the run has ended."""


def is_plain(value: Any) -> bool:
    """Whether ``value`` travels on a channel as it is (msgpack's plain data)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(is_plain(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(key, str) and is_plain(item) for key, item in value.items())
    return False


def _portable(value: Any) -> Any:
    try:
        pickle.dumps(value)
    except Exception:  # anything that does not pickle (an exception holding a socket...) travels as text
        return repr(value)
    return value


class EventChannel:
    """The luigi worker's end of one run, seen from the cluster's worker: ``send`` carries each report and
    live event there (tagged with the task, the run and its number in the run, ``seq``)."""

    def __init__(self, send: Callable[[dict[str, Any]], None], run_key: str, task: Task) -> None:
        self._send_out = send
        self._run_key = run_key
        self.task = task
        self.kept: list[tuple[str, tuple[Any, ...]]] = []
        self.sent = 0

    def send_report(self, name: str, args: list[Any]) -> None:
        """Forward a progress report of the task."""
        self._send({"kind": REPORT, "report": name, "args": list(args)})

    def fire(self, event: str, args: tuple[Any, ...]) -> None:
        """Send ``event`` now if its arguments are plain data and no event was kept before; else keep it."""
        at_task = [index for index, arg in enumerate(args) if arg is self.task or isinstance(arg, TheTask)]
        plain = [None if index in at_task else arg for index, arg in enumerate(args)]
        if not self.kept and is_plain(plain):
            self._send({"kind": EVENT, "event": event, "args": plain, "task_at": at_task})
        else:
            self.kept.append(
                (event, tuple(TheTask() if i in at_task else _portable(a) for i, a in enumerate(args)))
            )

    def _send(self, message: dict[str, Any]) -> None:
        seq, self.sent = self.sent, self.sent + 1
        self._send_out({"task_id": self.task.task_id, "run": self._run_key, "seq": seq, **message})


class ForwardingReporter:
    """A status reporter on a cluster's worker: each report goes to the luigi worker on the run's channel."""

    def __init__(self, channel: EventChannel, scheduler_messages: Any) -> None:
        self._channel = channel
        self.scheduler_messages = scheduler_messages

    def __getattr__(self, name: str) -> Callable[..., None]:
        if name not in FORWARDABLE_REPORTS:
            raise AttributeError(name)
        return lambda *args: self._channel.send_report(name, list(args))


class RemoteMessageQueue:
    """``scheduler_messages`` of a task run on a cluster's worker: messages read from the run's mailbox.

    Offers the Queue methods tasks use: ``get(block, timeout)``, ``get_nowait()``, ``empty()``, ``qsize()``.
    """

    def __init__(self, mailbox: Mailbox, task_id: str, responder: ForwardingReporter | None = None) -> None:
        self._mailbox = mailbox
        self._task_id = task_id
        self.responder = responder

    def get(self, block: bool = True, timeout: float | None = None) -> SchedulerMessage:
        if not block or (timeout is not None and timeout <= 0):
            if self._mailbox.qsize() == 0:
                raise queue.Empty
            timeout = None
        return self.message_of(self._mailbox.get(timeout))

    def message_of(self, raw: dict[str, Any]) -> SchedulerMessage:
        payload = {k: v for k, v in raw.items() if k not in ("message_id", "content", "task_id")}
        responder: Any = self.responder
        return SchedulerMessage(
            responder, self._task_id, str(raw.get("message_id")), raw.get("content"), **payload
        )

    def get_nowait(self) -> SchedulerMessage:
        return self.get(block=False)

    def empty(self) -> bool:
        return self.qsize() == 0

    def qsize(self) -> int:
        return int(self._mailbox.qsize())

    def take_all(self) -> list[dict[str, Any]]:
        """Every message waiting now (for a task slot, which gets them on its own pipe)."""
        return [self._mailbox.get(None) for _ in range(self.qsize())]


def run_remote(
    task: Task,
    options: TaskRunOptions,
    channel: EventChannel,
    mailbox: Mailbox | None,
    timeout: float | None,
    deadline: float | None,
    cancel_reason: Callable[[], str | None],
) -> RemoteRun:
    """Run ``task`` here as a local run would; with a ``timeout``, in a killable slot.

    ``mailbox``: the run's scheduler messages (None unless the task accepts them); ``deadline`` (wall
    clock): when the timeout, counted from the submission, runs out; ``cancel_reason()``: why the luigi
    worker cancelled the run, or None (asked while a slot runs).
    """
    messages = RemoteMessageQueue(mailbox, task.task_id) if mailbox is not None else None
    reporter = ForwardingReporter(channel, messages)
    if messages is not None:
        messages.responder = reporter
    try:
        if timeout is None or deadline is None:
            task.trigger_event = lambda event, *args, **_: channel.fire(event, args)  # type: ignore[method-assign]
            results = OutcomeBox()
            make_task_process(task, reporter, options, None, results).run()
            outcome = results.take(task.task_id)
        else:
            process = make_task_process(task, reporter, options, timeout, None)
            outcome = _run_in_slot(process, deadline, channel, messages, cancel_reason)
    finally:
        if mailbox is not None:
            mailbox.close()
    return RemoteRun(outcome, channel.kept, os.getpid(), channel.sent)


def _run_in_slot(
    process: TaskProcess,
    deadline: float,
    channel: EventChannel,
    messages: RemoteMessageQueue | None,
    cancel_reason: Callable[[], str | None],
) -> TaskOutcome:
    """Run ``process`` in a forked task slot, killed (with what it started) once ``deadline`` passes or
    when the luigi worker cancels the run (FAILED with the reason it sent).

    The slot fires the task's events into a pipe of this process, which passes them to ``channel``; the
    events the slot pool fires here (TIMEOUT, PROCESS_FAILURE) go to the channel directly.
    """
    from luigi.worker.slots.pool import SlotPool

    task = process.task
    events_in, events_out = Pipe(duplex=False)
    task.trigger_event = _firing_from_slot(os.getpid(), channel, events_out)
    pool = SlotPool({task.task_id: task}, None, lambda: 1)
    try:
        pool.start(process, deadline)
        while True:
            pool.wait(_SLOT_POLL_SECONDS, time.time())
            _pass_slot_events(events_in, channel)
            _pass_messages(pool, task.task_id, messages)
            outcomes = pool.collect(time.time())
            reason = None if outcomes else cancel_reason()
            if reason is not None:
                pool.kill_job(task.task_id)
                outcomes = [TaskOutcome(task.task_id, FAILED, reason)]
            if outcomes:
                _pass_slot_events(events_in, channel)
                return outcomes[0]
    finally:
        pool.shut_down()
        events_in.close()
        events_out.close()


def _firing_from_slot(owner: int, channel: EventChannel, pipe: Connection) -> Callable[..., None]:
    """A ``trigger_event``: in the slot (a fork), it sends the event down ``pipe``; here, to ``channel``."""

    def fire(event: str, *args: Any, **_: Any) -> None:
        if os.getpid() == owner:
            channel.fire(event, args)
        else:
            task = channel.task
            pipe.send((event, tuple(TheTask() if arg is task else _portable(arg) for arg in args)))

    return fire


def _pass_slot_events(pipe: Connection, channel: EventChannel) -> None:
    while pipe.poll():
        try:
            event, args = pipe.recv()  # our own fork on the other end of a local pipe
        except EOFError:
            return
        channel.fire(event, args)


def _pass_messages(pool: SlotPool, task_id: str, messages: RemoteMessageQueue | None) -> None:
    if messages is None or not pool.holds(task_id):
        return
    for raw in messages.take_all():
        pool.deliver(task_id, {**raw, "task_id": task_id})
