"""What runs on a Dask worker for ``[worker] executor = dask``: one task's run, as a local run would do it.

``run_on_dask_worker`` runs the task with ``TaskProcess`` (in a forked, killable task slot when the task
has a timeout) and sends back to the luigi worker, on a Dask event topic of its runner, while it runs:
- its progress reports (``set_status_message``, ``set_progress_percentage``, message responses, ...);
- the events it fires (START, PROCESSING_TIME, ...), as long as their arguments travel as plain data.
From the first event that does not (a FAILURE carrying its exception), events are kept in order and sent
back with the outcome in ``RemoteRun``, so the luigi worker fires every event once, in the order fired.
Scheduler messages for a task that accepts them arrive on a Dask queue named after the run; an operator's
cancel of a run in a task slot arrives on another (the slot is killed with everything its task started).
"""

from __future__ import annotations

import os
import pickle
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, Pipe
from typing import Any

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

# How often a task slot on a Dask worker is checked (its report pipe drained, messages passed on).
_SLOT_POLL_SECONDS = 0.2
_EVENT = "event"
_REPORT = "report"


@dataclass
class RemoteRun:
    """What ``run_on_dask_worker`` sends back: the outcome, the events not sent live (in order), and counts.

    An event's arguments name the task as a ``TheTask``; an argument that does not pickle comes as its repr.
    ``live_events`` says how many events went on the topic, so the luigi worker can wait for them all.
    """

    outcome: TaskOutcome
    events: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)
    pid: int = 0
    live_events: int = 0


class TheTask:
    """Stands for the task itself among a recorded event's arguments (the worker puts its own task there)."""


def messages_queue_name(run_key: str) -> str:
    """The Dask queue that carries scheduler messages to the run ``run_key``."""
    return f"luigi-messages-{run_key}"


def cancel_queue_name(run_key: str) -> str:
    """The Dask queue on which the luigi worker asks the run ``run_key`` (in a task slot) to stop, and why."""
    return f"luigi-cancel-{run_key}"


def is_plain(value: Any) -> bool:
    """Whether ``value`` travels on a Dask event topic as it is (msgpack's plain data)."""
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
    """The luigi worker's end of one run, seen from the Dask worker: reports and events go on ``topic``."""

    def __init__(self, topic: str, run_key: str, task: Task) -> None:
        from distributed import get_worker

        self._worker = get_worker()
        self._topic = topic
        self._run_key = run_key
        self.task = task
        self.kept: list[tuple[str, tuple[Any, ...]]] = []
        self.live = 0

    def send_report(self, name: str, args: list[Any]) -> None:
        """Forward a progress report of the task."""
        self._send({"kind": _REPORT, "report": name, "args": list(args)})

    def fire(self, event: str, args: tuple[Any, ...]) -> None:
        """Send ``event`` now if its arguments are plain data and no event was kept before; else keep it."""
        at_task = [index for index, arg in enumerate(args) if arg is self.task or isinstance(arg, TheTask)]
        plain = [None if index in at_task else arg for index, arg in enumerate(args)]
        if not self.kept and is_plain(plain):
            self._send({"kind": _EVENT, "event": event, "args": plain, "task_at": at_task})
            self.live += 1
        else:
            self.kept.append(
                (event, tuple(TheTask() if i in at_task else _portable(a) for i, a in enumerate(args)))
            )

    def _send(self, message: dict[str, Any]) -> None:
        self._worker.log_event(self._topic, {"task_id": self.task.task_id, "run": self._run_key, **message})


class _ForwardingReporter:
    """A status reporter on a Dask worker: each report goes to the luigi worker on the run's channel."""

    def __init__(self, channel: EventChannel, scheduler_messages: Any) -> None:
        self._channel = channel
        self.scheduler_messages = scheduler_messages

    def __getattr__(self, name: str) -> Callable[..., None]:
        if name not in FORWARDABLE_REPORTS:
            raise AttributeError(name)
        return lambda *args: self._channel.send_report(name, list(args))


class DaskMessageQueue:
    """``scheduler_messages`` of a task run on a Dask worker: messages read from the run's Dask queue.

    Offers the Queue methods tasks use: ``get(block, timeout)``, ``get_nowait()``, ``empty()``, ``qsize()``.
    """

    def __init__(self, run_key: str, task_id: str, responder: _ForwardingReporter | None = None) -> None:
        import distributed

        queue_class: Any = distributed.Queue  # untyped
        self._queue = queue_class(messages_queue_name(run_key))
        self._task_id = task_id
        self.responder = responder

    def get(self, block: bool = True, timeout: float | None = None) -> SchedulerMessage:
        if not block or (timeout is not None and timeout <= 0):
            if self._queue.qsize() == 0:
                raise queue.Empty
            timeout = None
        try:
            raw = self._queue.get(timeout=timeout)
        except TimeoutError:
            raise queue.Empty from None
        return self.message_of(raw)

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
        return int(self._queue.qsize())

    def take_all(self) -> list[dict[str, Any]]:
        """Every message waiting now (for a task slot, which gets them on its own pipe)."""
        return [self._queue.get() for _ in range(self.qsize())]

    def close(self) -> None:
        self._queue.close()


def run_on_dask_worker(
    task: Task,
    options: TaskRunOptions,
    topic: str,
    run_key: str,
    timeout: float | None,
    deadline: float | None,
) -> RemoteRun:
    """Run ``task`` on this Dask worker as a local run would; with a ``timeout``, in a killable slot.

    ``deadline`` (wall clock) is when the timeout, counted from the submission, runs out.
    """
    channel = EventChannel(topic, run_key, task)
    messages = DaskMessageQueue(run_key, task.task_id) if task.accepts_messages else None
    reporter = _ForwardingReporter(channel, messages)
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
            outcome = _run_in_slot(process, deadline, channel, messages, run_key)
    finally:
        if messages is not None:
            messages.close()
    return RemoteRun(outcome, channel.kept, os.getpid(), channel.live)


def _run_in_slot(
    process: TaskProcess,
    deadline: float,
    channel: EventChannel,
    messages: DaskMessageQueue | None,
    run_key: str,
) -> TaskOutcome:
    """Run ``process`` in a forked task slot, killed (with what it started) once ``deadline`` passes or
    when the luigi worker cancels the run (FAILED with the reason it sent).

    The slot fires the task's events into a pipe of this process, which passes them to ``channel``; the
    events the slot pool fires here (TIMEOUT, PROCESS_FAILURE) go to the channel directly.
    """
    import distributed

    from luigi.worker.slots.pool import SlotPool

    task = process.task
    events_in, events_out = Pipe(duplex=False)
    task.trigger_event = _firing_from_slot(os.getpid(), channel, events_out)
    queue_class: Any = distributed.Queue  # untyped
    cancels = queue_class(cancel_queue_name(run_key))
    pool = SlotPool({task.task_id: task}, None, lambda: 1)
    try:
        pool.start(process, deadline)
        while True:
            pool.wait(_SLOT_POLL_SECONDS, time.time())
            _pass_slot_events(events_in, channel)
            _pass_messages(pool, task.task_id, messages)
            outcomes = pool.collect(time.time())
            if not outcomes and cancels.qsize():
                pool.kill_job(task.task_id)
                outcomes = [TaskOutcome(task.task_id, FAILED, str(cancels.get()))]
            if outcomes:
                _pass_slot_events(events_in, channel)
                return outcomes[0]
    finally:
        pool.shut_down()
        cancels.close()
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


def _pass_messages(pool: Any, task_id: str, messages: DaskMessageQueue | None) -> None:
    if messages is None or not pool.holds(task_id):
        return
    for raw in messages.take_all():
        pool.deliver(task_id, {**raw, "task_id": task_id})
