"""What runs on a Ray worker for ``[worker] executor = ray``: one task's run (``luigi.worker.remote_run``)
over a Ray actor of the luigi worker's runner, its ``RunChannel``.

The channel carries the run's reports and live events to the luigi worker, its scheduler messages to the
run, and an operator's cancel of a run in a task slot. The task comes by reference
(``luigi.worker.remote_task``) and is rebuilt here, so only the Ray workers need the task's module.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from typing import Any

from luigi.worker.remote_run import EventChannel, RemoteRun, run_remote
from luigi.worker.remote_task import TaskPayload, task_of
from luigi.worker.task_process import TaskRunOptions

# How long one wait of a mailbox without a timeout lasts on the actor before it asks again.
_LONGEST_MESSAGE_WAIT = 30.0


class RunChannel:
    """A Ray actor (made by the runner with ``ray.remote``) between the luigi worker and its runs.

    Runs ``report`` their reports and events; the luigi worker ``take_reports``. The luigi worker posts
    scheduler messages and cancels by run key; runs read them.
    """

    def __init__(self) -> None:
        self._reports: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._mailboxes: dict[str, asyncio.Queue[dict[str, Any]]] = {}
        self._cancels: dict[str, str] = {}

    async def report(self, messages: list[dict[str, Any]]) -> None:
        for message in messages:
            self._reports.put_nowait(message)

    async def take_reports(self, timeout: float) -> list[dict[str, Any]]:
        """Every report waiting; if none, the first to arrive within ``timeout`` seconds (or none)."""
        try:
            first = await asyncio.wait_for(self._reports.get(), timeout)
        except asyncio.TimeoutError:
            return []
        taken = [first]
        while not self._reports.empty():
            taken.append(self._reports.get_nowait())
        return taken

    def _mailbox(self, run_key: str) -> asyncio.Queue[dict[str, Any]]:
        return self._mailboxes.setdefault(run_key, asyncio.Queue())

    async def post_message(self, run_key: str, message: dict[str, Any]) -> None:
        self._mailbox(run_key).put_nowait(message)

    async def next_message(self, run_key: str, timeout: float) -> dict[str, Any] | None:
        try:
            return await asyncio.wait_for(self._mailbox(run_key).get(), timeout)
        except asyncio.TimeoutError:
            return None

    async def pending_messages(self, run_key: str) -> int:
        return self._mailbox(run_key).qsize()

    async def cancel(self, run_key: str, reason: str) -> None:
        self._cancels[run_key] = reason

    async def cancel_reason(self, run_key: str) -> str | None:
        return self._cancels.get(run_key)

    async def forget(self, run_key: str, after: Any = None) -> None:
        """Drop the run's mailbox and cancel reason. ``after``: the reference of a call that must land first
        (Ray runs this only once it resolved; calls to an async actor may otherwise run out of order)."""
        self._mailboxes.pop(run_key, None)
        self._cancels.pop(run_key, None)

    async def runs_held(self) -> int:
        """How many runs it holds a mailbox or a cancel reason for: each is forgotten once its run ended."""
        return len(self._mailboxes.keys() | self._cancels.keys())


class _Sender:
    """Sends a run's reports and live events to the channel from a thread, without waiting for the channel
    to take them: those that wait together go in one call (an actor call costs both ends CPU)."""

    def __init__(self, channel: Any) -> None:
        self._channel = channel
        self._waiting: queue.SimpleQueue[dict[str, Any] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._send_all, name="luigi-ray-sender", daemon=True)
        self._thread.start()

    def send(self, message: dict[str, Any]) -> None:
        self._waiting.put(message)

    def close(self) -> None:
        """Send what waits, then stop (the run ends once all its messages are on their way)."""
        self._waiting.put(None)
        self._thread.join()

    def _send_all(self) -> None:
        ended = False
        while not ended:
            batch = [self._waiting.get()]
            while not self._waiting.empty():
                batch.append(self._waiting.get_nowait())
            ended = batch[-1] is None  # close() puts the last one
            messages = [message for message in batch if message is not None]
            if messages:
                self._channel.report.remote(messages)


class RayMailbox:
    """The run's scheduler messages, on the runner's ``RunChannel`` (a ``remote_run.Mailbox``)."""

    def __init__(self, channel: Any, run_key: str) -> None:
        self._channel = channel
        self._run_key = run_key

    def get(self, timeout: float | None) -> dict[str, Any]:
        import ray

        while True:
            wait = _LONGEST_MESSAGE_WAIT if timeout is None else timeout
            message = ray.get(self._channel.next_message.remote(self._run_key, wait))
            if message is not None:
                return dict(message)
            if timeout is not None:
                raise queue.Empty

    def qsize(self) -> int:
        import ray

        return int(ray.get(self._channel.pending_messages.remote(self._run_key)))

    def close(self) -> None:
        """Nothing: the luigi worker's runner forgets the run's mailbox when the run ends."""


def run_on_ray_worker(
    payload: TaskPayload,
    options: TaskRunOptions,
    channel: Any,
    run_key: str,
    timeout: float | None,
    deadline: float | None,
) -> RemoteRun:
    """Run the task on this Ray worker as a local run would; with a ``timeout``, in a killable slot.

    ``payload`` names the task by reference (rebuilt here) or is the task itself; ``channel`` is the
    runner's ``RunChannel`` actor; ``deadline`` (wall clock): when the timeout runs out.
    """
    import ray

    task = task_of(payload)
    # Sent without waiting for the channel to take each: the luigi worker puts them back in order by ``seq``
    # (an async actor may run calls out of their order) and waits for them all before the outcome.
    sender = _Sender(channel)
    events = EventChannel(sender.send, run_key, task)
    mailbox = RayMailbox(channel, run_key) if task.accepts_messages else None

    def cancel_reason() -> str | None:
        reason: str | None = ray.get(channel.cancel_reason.remote(run_key))
        return reason

    try:
        return run_remote(task, options, events, mailbox, timeout, deadline, cancel_reason)
    finally:
        sender.close()
