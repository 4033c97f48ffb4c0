"""The keep-alive thread: pings the scheduler so it knows the worker lives, and relays its messages."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from luigi.rpc import NoSchedulerError, RPCError
from luigi.scheduler_api import SchedulerAPI
from luigi.worker.get_work_reply import WorkGrant

if TYPE_CHECKING:
    from luigi.worker.work_source import WorkSource

logger = logging.getLogger("luigi-interface")


def serialized(scheduler: SchedulerAPI) -> SchedulerAPI:
    """``scheduler`` as the worker loop and its keep-alive thread share it: one lock around each call
    (the in-process ``Scheduler`` is plain data without locks; our ``RemoteScheduler`` needs none of this:
    it takes its own lock once per call)."""
    return cast(SchedulerAPI, SerializedScheduler(scheduler))  # each of its methods, behind the lock


class SerializedScheduler:
    """The scheduler seen through a lock: the keep-alive thread and the worker loop never call it at once."""

    def __init__(self, scheduler: SchedulerAPI) -> None:
        self._scheduler = scheduler
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._scheduler, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return method(*args, **kwargs)

        setattr(self, name, call)  # later lookups find it directly, without coming back here
        return call


class KeepAliveThread(threading.Thread):
    """Pings ``scheduler`` every ``ping_interval`` seconds and hands each rpc message to ``on_message``.

    A failed ping is logged and retried on the next interval; ``stop()`` wakes and ends the thread. A ping
    says what ``source`` holds, when it says anything (``WorkSource.held_for_ping``), and hands it the reply.
    """

    def __init__(
        self,
        scheduler: SchedulerAPI,
        worker_id: str,
        ping_interval: float,
        on_message: Callable[[dict[str, Any]], None],
        source: WorkSource | None = None,
    ) -> None:
        super().__init__(name="luigi-keep-alive", daemon=True)
        self._source = source
        self._scheduler = scheduler
        self._worker_id = worker_id
        self._ping_interval = ping_interval
        self._on_message = on_message
        self._should_stop = threading.Event()
        self._failing = False  # log a run of failed pings once, not every interval

    def stop(self) -> None:
        self._should_stop.set()

    def run(self) -> None:
        while not self._should_stop.wait(self._ping_interval):
            self.ping_once()
        logger.info("Worker %s was stopped. Shutting down Keep-Alive thread", self._worker_id)

    def ping_once(self) -> None:
        """One ping and the dispatch of the messages it returned (and of what it says was handed over)."""
        source = self._source
        held = source.held_for_ping() if source is not None else None
        try:
            if held is None:
                response = self._scheduler.ping(worker=self._worker_id)
            else:
                response = self._scheduler.ping(worker=self._worker_id, held=list(held))
        except RPCError as exc:  # the scheduler may be briefly unreachable; the next ping will tell
            if isinstance(exc, NoSchedulerError):  # the worker's own calls fail too, and say why once
                logger.debug("Failed pinging scheduler: it has not answered during this run")
            elif not self._failing:
                logger.warning("Failed pinging scheduler: %s", exc)
            self._failing = True
            return
        except Exception:  # not the scheduler's doing: the traceback says whose
            if not self._failing:
                logger.warning("Failed pinging scheduler", exc_info=True)
            self._failing = True
            return
        if self._failing:
            logger.info("Pinging the scheduler works again")
            self._failing = False
        if source is not None and held is not None and isinstance(response, dict):
            source.ping_answered(response, held)
        messages = response.get("rpc_messages", []) if isinstance(response, dict) else []
        for message in messages if isinstance(messages, list) else []:
            try:
                self._on_message(message)
            except Exception:  # one bad message must not stop the pings
                logger.exception("Error handling scheduler message %r", message)


def should_stay_alive(config: Any, grant: WorkGrant, assistant: bool, idle_seconds: float) -> bool:
    """With ``[worker] keep_alive``, whether an idle worker should wait for more work rather than exit.

    Assistants always wait; otherwise the worker waits while the scheduler reports pending tasks (counted
    as ``count_last_scheduled`` or ``count_uniques`` say), for at most ``max_keep_alive_idle_duration``.
    """
    if not config.keep_alive:
        return False
    if assistant:
        return True
    if config.count_last_scheduled:
        return grant.n_pending_last_scheduled > 0
    if config.count_uniques:
        return grant.n_unique_pending > 0
    if grant.n_pending_tasks == 0:
        return False
    idle_limit = config.max_keep_alive_idle_duration.total_seconds()
    return not idle_limit or idle_seconds < idle_limit
