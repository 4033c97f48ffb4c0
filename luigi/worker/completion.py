"""Asking tasks whether they are complete: once each, optionally cached, optionally in a thread pool.

``complete()`` usually probes a filesystem or a database, so many checks overlap well in threads; threads
also avoid pickling tasks, which a process pool would need.
"""

from __future__ import annotations

import logging
import os
import queue
import traceback
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any

logger = logging.getLogger("luigi-interface")


class CompletionCheckError(Exception):
    """``complete()`` raised; ``trace`` is the formatted traceback for logs and emails."""

    def __init__(self, task: Any, trace: str) -> None:
        super().__init__(f"complete() of {task} raised an exception:\n{trace}")
        self.trace = trace


def check_complete(task: Any, completion_cache: dict[str, bool] | None = None) -> bool:
    """``task.complete()``, answered from (and stored in) ``completion_cache`` when one is given.

    Only positive answers are cached: a complete task stays complete, an incomplete one may become complete.
    Raises ``TypeError`` naming the task when ``complete()`` returns something other than a boolean.
    """
    if completion_cache is not None and completion_cache.get(task.task_id):
        return True
    is_complete = task.complete()
    if is_complete not in (True, False):  # numpy booleans compare equal and are fine
        raise TypeError(f"Return value of {task}.complete() must be boolean (was {is_complete!r})")
    if is_complete and completion_cache is not None:
        completion_cache[task.task_id] = True
    return bool(is_complete)


def _checked(task: Any, completion_cache: dict[str, bool] | None) -> tuple[Any, bool | CompletionCheckError]:
    """(task, answer), with an exception from ``complete()`` turned into a CompletionCheckError."""
    logger.debug("Checking if %s is complete", task)
    try:
        return task, check_complete(task, completion_cache)
    except KeyboardInterrupt:
        raise
    except BaseException:  # any error in user code makes the task unschedulable; the trace is reported
        return task, CompletionCheckError(task, traceback.format_exc())


class CompletionChecker:
    """Checks submitted tasks and hands back ``(task, bool | CompletionCheckError)`` pairs.

    Serial by default (each check runs inside ``next_result``); with ``processes`` it runs checks in a
    thread pool and returns answers in the order they finish.
    """

    def __init__(self, completion_cache: dict[str, bool] | None, parallel: bool = False, processes: int = 0):
        self._cache = completion_cache
        self._pending: deque[Any] = deque()
        self._results: queue.SimpleQueue[tuple[Any, Any]] = queue.SimpleQueue()
        self._in_flight = 0
        self._pool: ThreadPoolExecutor | None = None
        if parallel:
            self._pool = ThreadPoolExecutor(
                max_workers=processes if processes > 0 else (os.cpu_count() or 1),
                thread_name_prefix="luigi-complete-check",
            )

    def submit(self, task: Any) -> None:
        """Queue ``task`` for a completeness check."""
        self._in_flight += 1
        if self._pool is None:
            self._pending.append(task)
        else:
            self._pool.submit(self._check_into_queue, task)

    def _check_into_queue(self, task: Any) -> None:
        self._results.put(_checked(task, self._cache))

    @property
    def outstanding(self) -> int:
        """How many submitted tasks have not been handed back yet."""
        return self._in_flight

    def next_result(self) -> tuple[Any, bool | CompletionCheckError]:
        """The next finished check (blocks for the pool); call only while ``outstanding`` is non-zero."""
        self._in_flight -= 1
        if self._pool is None:
            return _checked(self._pending.popleft(), self._cache)
        return self._results.get()

    def close(self) -> None:
        """Stop the pool, abandoning checks nobody will collect."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
