"""Routing scheduler messages to running tasks, including those that arrive before their task started.

The keep-alive thread fetches messages with each ping, and a ping can land between the moment a task is
granted to this worker and the moment the task can take messages (the worker is still building it, or
forking the slot that runs it). Such a message is held and delivered when the task opens for messages;
a message for a task that finished here, or that refuses messages, is dropped with a warning.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("luigi-interface")

MAX_HELD_MESSAGES = 100  # messages waiting for tasks that have not started; more are dropped, with a warning

Message = dict[str, Any]  # task_id, message_id, content and any extra fields the scheduler sent


class MessageRouter:
    """Holds each message until its task is open for messages; thread-safe (ping thread and main loop)."""

    def __init__(self, deliver: Callable[[Message], None]) -> None:
        self._deliver = deliver
        self._lock = threading.Lock()
        self._open: set[str] = set()
        self._finished: set[str] = set()  # ran here since they last opened: a late message is dropped
        self._held: dict[str, list[Message]] = {}

    def dispatch(self, message: Message) -> None:
        """Deliver ``message`` now if its task is open, else hold it until the task opens."""
        task_id = message["task_id"]
        with self._lock:
            if task_id in self._open:
                self._deliver(message)
            elif task_id in self._finished:
                logger.warning(
                    "Dropping scheduler message %s: task %s already finished here",
                    message["message_id"],
                    task_id,
                )
            elif sum(len(held) for held in self._held.values()) >= MAX_HELD_MESSAGES:
                logger.warning(
                    "Dropping scheduler message %s: %d messages already wait for tasks that have not started",
                    message["message_id"],
                    MAX_HELD_MESSAGES,
                )
            else:
                self._held.setdefault(task_id, []).append(message)

    def open(self, task_id: str) -> None:
        """The task can take messages now: deliver those that arrived before, in order."""
        with self._lock:
            self._finished.discard(task_id)
            self._open.add(task_id)
            for message in self._held.pop(task_id, ()):
                self._deliver(message)

    def close(self, task_id: str) -> None:
        """The task finished here: later messages for it are dropped (until it opens again)."""
        with self._lock:
            self._open.discard(task_id)
            self._finished.add(task_id)
            self._held.pop(task_id, None)
