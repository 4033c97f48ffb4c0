"""Asking tasks whether they are complete: once each, optionally cached, optionally in a process pool.

``add(task, multiprocess=True, processes=N)`` checks ``complete()`` in ``multiprocessing.Pool(processes=N
or None)`` (forked, so tasks defined anywhere work), as Luigi does. Only the task goes to a pool process
and only the answer comes back, so the worker keeps its own task objects; a task that cannot be pickled
is checked in the worker instead.
"""

from __future__ import annotations

import functools
import logging
import multiprocessing
import queue
import traceback
from collections import deque
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from multiprocessing.pool import Pool  # the pool itself is imported only by a parallel add

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
        raise TypeError(f"Return value of Task.complete() must be boolean (was {is_complete!r})")
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


def _check_in_pool(task: Any) -> tuple[bool, str | None]:
    """In a pool process: (answer, None), or (False, traceback) when ``complete()`` raised."""
    _, answer = _checked(task, None)
    if isinstance(answer, CompletionCheckError):
        return False, answer.trace
    return answer, None


class CompletionChecker:
    """Checks submitted tasks and hands back ``(task, bool | CompletionCheckError)`` pairs.

    Serial by default (each check runs inside ``next_result``); with ``parallel`` it runs checks in a
    forked ``multiprocessing.Pool`` of ``processes`` processes (0: one per CPU) and returns answers in the
    order they finish. Positive answers land in ``completion_cache`` here, in the worker.
    """

    def __init__(self, completion_cache: dict[str, bool] | None, parallel: bool = False, processes: int = 0):
        self._cache = completion_cache
        self._pending: deque[Any] = deque()  # to check here, in order
        self._results: queue.SimpleQueue[tuple[Any, Any]] = queue.SimpleQueue()
        self._in_flight = 0
        self._pool: Pool | None = None
        if parallel:
            self._pool = _new_pool(processes)

    def submit(self, task: Any) -> None:
        """Queue ``task`` for a completeness check."""
        self._in_flight += 1
        if self._pool is None or (self._cache is not None and self._cache.get(task.task_id)):
            self._pending.append(task)
            return
        self._pool.apply_async(
            _check_in_pool,
            (task,),
            callback=functools.partial(self._answered, task),
            error_callback=functools.partial(self._not_sent, task),
        )

    def _answered(self, task: Any, answer: tuple[bool, str | None]) -> None:
        self._results.put((task, answer))

    def _not_sent(self, task: Any, error: BaseException) -> None:
        """The task did not reach a pool process (it does not pickle): it is checked here instead."""
        self._results.put((task, None))

    @property
    def outstanding(self) -> int:
        """How many submitted tasks have not been handed back yet."""
        return self._in_flight

    def next_result(self) -> tuple[Any, bool | CompletionCheckError]:
        """The next finished check (blocks for the pool); call only while ``outstanding`` is non-zero."""
        self._in_flight -= 1
        if self._pending:
            return _checked(self._pending.popleft(), self._cache)
        task, answer = self._results.get()
        if answer is None:
            return _checked(task, self._cache)
        is_complete, trace = answer
        if trace is not None:
            return task, CompletionCheckError(task, trace)
        if is_complete and self._cache is not None:
            self._cache[task.task_id] = True
        return task, bool(is_complete)

    def close(self) -> None:
        """Stop the pool: once every answer was collected its processes leave by themselves; checks
        still out (the walk failed) are abandoned by killing the processes that run them.

        Never with SIGTERM: the pool processes inherit this process's handler (Ray's init installs one
        that exits through Python, a user's may not exit at all), and a pool process that outlives its
        SIGTERM makes ``terminate()`` wait for it for ever.
        """
        if self._pool is None:
            return
        if self._in_flight == 0:
            self._pool.close()
        else:
            _terminate_with_sigkill(self._pool)
        self._pool.join()
        self._pool = None


def _terminate_with_sigkill(pool: Pool) -> None:
    """``pool.terminate()``, its processes stopped with SIGKILL, which no inherited handler can outlive.

    The kill is left to ``terminate()``, which sends it once it holds the pool's queue lock and has stopped
    replacing processes: a process killed earlier can die holding that lock, and ``terminate()`` then
    waits for the lock for ever. Left open: a pool process that dies by itself (its check killed it) in the
    instant between these lines and ``terminate()`` stopping the replacing is replaced by one sent SIGTERM.
    """
    for process in pool._pool:  # type: ignore[attr-defined]  # the Process objects; no public accessor
        process.terminate = process.kill  # what terminate() sends each process in place of SIGTERM
    pool.terminate()


def _new_pool(processes: int) -> Pool:
    """``multiprocessing.Pool(processes=processes or None)``, looked up now as Luigi's is (tests patch it).

    Its processes must fork, so that they already hold every task class (those of ``__main__`` and of tests
    too): where the default start method does not fork, the fork context's Pool is made instead.
    """
    size = processes or None
    default = multiprocessing.get_start_method(allow_none=True) or multiprocessing.get_all_start_methods()[0]
    if default == "fork" or "fork" not in multiprocessing.get_all_start_methods():
        return multiprocessing.Pool(processes=size)
    return multiprocessing.get_context("fork").Pool(processes=size)
