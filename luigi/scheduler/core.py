"""``Scheduler``: the RPC methods of the central planner, thin over the state, rules and queries.

Every public method is one RPC of ``luigi.rpc_methods`` with the same keyword arguments; the HTTP
server calls them after validating the request, and workers call them directly in local mode. The
methods Luigi declares with ``**kwargs`` (those the registry marks ``lenient``) ignore unknown keywords,
so that clients newer or older than this scheduler keep working. The others are what ``luigid`` calls
itself, never routed: its ``luigi.server.served.ServedScheduler`` (load, flush, checkpoint, dump, close,
prune_if_due, note_alive).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from luigi.metrics import CollectorExtras, MetricsCollector, MetricsCollectors
from luigi.scheduler.backfills import BackfillDesk, NoBackfills
from luigi.scheduler.extensions import ExtensionMethods
from luigi.scheduler.hooks import (
    FailureBatcher,
    default_batch_notifier,
    default_history,
    default_notifier,
    record_history,
)
from luigi.scheduler.model.changes import ChangeSet
from luigi.scheduler.model.clock import Clock, system_time
from luigi.scheduler.model.luigi_names import TaskView
from luigi.scheduler.model.records import TaskRecord
from luigi.scheduler.model.shared import collector_paused
from luigi.scheduler.model.state import SchedulerState
from luigi.scheduler.reads import ReadMethods
from luigi.scheduler.rules import leases
from luigi.scheduler.rules.get_work import GetWork, Selection
from luigi.scheduler.rules.intake import ReportIntake, TaskReport, unbatched_params
from luigi.scheduler.rules.pruning import prune as prune_state
from luigi.scheduler.rules.resources import check_resource_amounts
from luigi.scheduler.rules.transitions import Notifier, StatusRules
from luigi.scheduler.schedules import NoSchedules, ScheduleDesk
from luigi.scheduler.settings import RetryPolicy, SchedulerConfig
from luigi.scheduler.store.base import NullStore, StateStore
from luigi.scheduler.store.task_logs import TaskLogStore
from luigi.scheduler.views import queries
from luigi.scheduler.views.serialize import serialize_task
from luigi.scheduler.views.vitals import SchedulerVitals
from luigi.task import Config
from luigi.task_history import TaskHistory
from luigi.task_status import (
    DISABLED,
    DONE,
    FAILED,
    PENDING,
    RUNNING,
)

logger = logging.getLogger("luigi.scheduler")

LOG_EXPIRY_EVERY_SECONDS = 3600.0  # how often prune() deletes task logs past [scheduler] task_log_keep_days


class Scheduler(ReadMethods, ExtensionMethods):
    """Keeps the task graph, decides which worker runs what, and answers the visualiser.

    Args:
        config: the settings (a ``SchedulerConfig``, or Luigi's ``scheduler`` Config instance); read from
            ``[scheduler]``/``[resources]`` when None.
        resources: capacities that replace ``[resources]`` (Luigi's second argument).
        task_history_impl: where transitions are recorded (Luigi's name; ``task_history`` is ours).
        clock: the source of time (default: ``time.time`` looked up at each call).
        notifier: ``notifier(subject, message, owners)`` when a task is disabled for failing too often.
        batch_notifier: collects failures for batched e-mails when ``batch_emails`` is on (default: a
            ``luigi.scheduler.BatchNotifier()``).
        store: where the state survives restarts (``luigid``: a ``SqlStore``); default: nowhere.
        task_logs: the run logs ``luigid`` keeps (``store.task_logs``); default: none kept.
        schedules: the schedules ``luigid`` runs (``luigi.schedules``); default: none.
        backfills: the backfills ``luigid`` runs (``luigi.schedules.backfill_service``); default: none.
        overrides: ``[scheduler]`` option values that win over the config (``Scheduler(retry_delay=0)``).
    """

    def __init__(
        self,
        config: SchedulerConfig | Config | None = None,
        resources: Mapping[str, int] | None = None,
        task_history_impl: TaskHistory | None = None,
        *,
        clock: Clock | None = None,
        task_history: TaskHistory | None = None,
        notifier: Notifier | None = None,
        batch_notifier: FailureBatcher | None = None,
        store: StateStore | None = None,
        task_logs: TaskLogStore | None = None,
        schedules: ScheduleDesk | None = None,
        backfills: BackfillDesk | None = None,
        **overrides: Any,
    ) -> None:
        task_history = task_history_impl if task_history_impl is not None else task_history
        if resources is not None:
            overrides["resources"] = resources
        config = SchedulerConfig.resolve(config, **overrides)
        self._config = config
        self._clock: Clock = clock or system_time
        self._state = SchedulerState(config, self._clock)
        self._rules = StatusRules(self._state, notifier or default_notifier)
        self._pending = queries.PendingCounter(self._state)
        self._task_history = task_history if task_history is not None else default_history(config)
        if batch_notifier is None and config.batch_emails:
            batch_notifier = default_batch_notifier()
        self._batch_notifier = batch_notifier
        self._schedules: ScheduleDesk = schedules if schedules is not None else NoSchedules()
        self._watch_metrics(MetricsCollectors.get(config.metrics_collector, config.metrics_custom_import))
        self._intake = ReportIntake(self._state, self._rules, self._task_history, batch_notifier)
        self._get_work = GetWork(self._state, self._rules, self._task_history)
        self._store: StateStore = store if store is not None else NullStore()
        self._task_logs = task_logs  # luigid keeps the logs workers ship; the local scheduler asks for none
        self._logs_expired_at = 0.0
        if self._store.tracks_changes:
            self._state.changes = ChangeSet()
        self._backfills: BackfillDesk = backfills if backfills is not None else NoBackfills()

    @property
    def config(self) -> SchedulerConfig:
        """The settings this scheduler runs with."""
        return self._config

    def _watch_metrics(self, collector: MetricsCollector) -> None:
        """Tell ``collector`` of task transitions; one that reads the scheduler's figures (has its own
        ``watch_scheduler``) is shown them. The default collector reads none, so none are made."""
        self._state.use_collector(collector)
        watch = self._state.metrics_extras.watch_scheduler
        if watch is not None:
            watch(SchedulerVitals(self._state, self._task_history, self._schedules))

    def _generate_retry_policy(self, task_retry_policy_dict: Mapping[str, Any] | None) -> RetryPolicy:
        """Luigi's retry policy of a task: its ``retry_policy_dict`` (None values skipped) over ours."""
        policy = self._config.retry_policy_for(task_retry_policy_dict)
        return RetryPolicy(policy.retry_count, policy.disable_hard_timeout, policy.disable_window)

    @property
    def metrics_collector(self) -> MetricsCollector:
        """The collector told of task transitions (``[scheduler] metrics_collector``), served at /metrics."""
        return self._state.metrics

    @property
    def metrics_extras(self) -> CollectorExtras:
        """The optional hooks of that collector (``observe_rpc``: luigid times each RPC for it)."""
        return self._state.metrics_extras

    # -- durable state (not RPC methods) ----------------------------------------------------------------

    def load(self) -> None:
        """Replace the state with the stored one (``luigid`` start-up); a no-op without a durable store.

        Every loaded worker counts as just seen, so a worker that keeps pinging within
        ``worker_disconnect_delay`` keeps its RUNNING tasks; one that never returns loses them.
        """
        state = self._state
        if not self._store.tracks_changes:
            return
        state.changes = None  # what loading sets is already stored
        try:
            with collector_paused():  # a collection would walk every record loaded so far, again and again
                self._store.load(state)
                stale = state.settle_loaded(self._clock())
        finally:
            state.changes = ChangeSet()
        for task_id in stale:  # rebuilding dropped unknown workers from these
            state.mark_changed(task_id)

    def note_alive(self, worker: str) -> None:
        """A known worker pinged while its ping could not be served (the state cannot be saved): it is
        alive all the same, and is not dropped for silence (not an RPC method)."""
        self._state.note_alive(worker)

    def flush(self) -> None:
        """Make every change since the last flush durable, all or nothing (a no-op when nothing changed).

        The server calls this after each request, before answering, so an acknowledged change is durable
        (a SQLite file journals it; ``checkpoint`` writes it into the database later). On failure the
        changes stay marked and the next flush writes them.
        """
        changes = self._state.changes
        if changes is not None and changes:
            self._store.record_changes(self._state, changes)
            changes.clear()

    def checkpoint(self, due_only: bool = False, limit: int | None = None) -> None:
        """Fold journaled changes into the database, off the request path: all of them, or the oldest
        ``limit`` keys (the server's timer), or with ``due_only`` a short slice once enough are waiting
        (the server, right after answering).

        Raises StateStoreError when the database cannot be written; the journal keeps the changes.
        """
        if self._task_logs is not None:
            self._task_logs.flush_if_due()  # logs are not the state: not written at each request
        self._store.fold(due_only, limit)

    def dump(self) -> None:
        """Save the state at exit (as ``flush``) and send the batched e-mails collected so far."""
        try:
            self.flush()
        finally:
            self._send_batched_emails()

    def _send_batched_emails(self) -> None:
        if self._config.batch_emails and self._batch_notifier is not None:
            try:
                self._batch_notifier.send_email()
            except Exception:  # at exit, mail trouble is only logged: the state is what must be saved
                logger.exception("Could not send batched failure e-mails")

    def close(self) -> None:
        """Flush, then release the store (which folds its journal) and the task history (at exit)."""
        try:
            self.flush()
        finally:
            self._store.close()
            if self._task_logs is not None:
                self._task_logs.close()
            close_history = getattr(self._task_history, "close", None)
            if close_history is not None:
                close_history()

    @property
    def task_history(self) -> TaskHistory:
        """Where transitions are recorded (``NopHistory`` unless history is on); the history pages read it."""
        return self._task_history

    # -- tasks reported by workers ---------------------------------------------------------------------

    def add_task(
        self,
        task_id: str,
        status: str = PENDING,
        runnable: bool | None = True,
        deps: list[str] | None = None,
        new_deps: list[str] | None = None,
        expl: Any = None,
        resources: dict[str, Any] | None = None,
        priority: float = 0,
        family: str = "",
        module: str | None = None,
        params: dict[str, Any] | None = None,
        param_visibilities: dict[str, int] | None = None,
        accepts_messages: bool | None = False,
        assistant: bool = False,
        tracking_url: str | None = None,
        *,
        worker: str,
        batchable: bool | None = None,
        batch_id: str | None = None,
        retry_policy_dict: dict[str, Any] | None = None,
        owners: Any = None,
        task_log: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Create or update a task from a worker's report and apply the status rules (f.3).

        ``task_log`` (ours) is the last chunk of the run's log, sent with the run's final status so that a
        short run costs one call, not two (``append_task_log`` with ``ended``).
        """
        report = TaskReport(
            task_id=task_id,
            worker=worker,
            status=status,
            runnable=runnable,
            deps=deps,
            new_deps=new_deps,
            expl=expl,
            resources=resources,
            priority=priority,
            family=family,
            module=module,
            params=params,
            param_visibilities=param_visibilities,
            accepts_messages=accepts_messages,
            assistant=assistant,
            tracking_url=tracking_url,
            batchable=batchable,
            batch_id=batch_id,
            retry_policy_dict=retry_policy_dict,
            owners=owners,
        )
        self._intake.apply(report)
        if task_log is not None:
            self.append_task_log(
                task_id, worker, task_log["run"], task_log["offset"], task_log["chunk"], True
            )
        return None

    def add_task_batcher(
        self, worker: str, task_family: str, batched_args: list[str], max_batch_size: float = float("inf")
    ) -> None:
        """Let ``worker`` run tasks of ``task_family`` in batches over the ``batched_args`` parameters."""
        self._state.set_batcher(worker, task_family, batched_args, max_batch_size)

    # -- handing out work --------------------------------------------------------------------------------

    def get_work(
        self,
        worker: str,
        host: str | None = None,
        assistant: bool = False,
        current_tasks: list[str] | None = None,
        assume_done: list[str] | None = None,
        max_tasks: int = 1,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Grant the worker its next task or batch (f.4), with its ``count_pending`` figures.

        Two extensions for our serial worker, which asks while it runs a short task: with ``assume_done``,
        when nothing is ready, a task waiting only for those running tasks of this worker is granted ahead
        of them (the grant then names them in ``assumes_done``); with ``max_tasks`` > 1, up to that many
        single tasks are granted, the others in ``more_tasks`` (each may be granted ahead of the ones
        before it).
        """
        if self._config.prune_on_get_work:
            self.prune()
        record = self._state.touch_worker(worker, reference={"host": host}, get_work=True)
        if not record.enabled:
            return {
                "n_pending_tasks": 0,
                "running_tasks": [],
                "task_id": None,
                "n_unique_pending": 0,
                "worker_state": record.state,
            }
        if assistant:
            self.add_worker(worker, [("assistant", assistant)])
        selection: Selection | None = None
        if current_tasks is not None:
            selection = self._get_work.settle(worker, current_tasks)
        assumed = set(assume_done or ())
        if selection is None and not self._state.paused:
            selection = self._get_work.choose(worker, assistant, assumed)
        reply = self.count_pending(worker)
        if selection is None:
            reply["task_id"] = None
            return reply
        more = 1 if self._state.paused else max_tasks
        started = self._get_work.start(selection, worker, host, assistant, assumed, more)
        for task in started.tasks:
            self.update_metrics_task_started(task)
        reply.update(started.reply)
        return reply

    def count_pending(self, worker: str) -> dict[str, Any]:
        """How many PENDING/FAILED tasks list this worker (skipping those behind a DISABLED task)."""
        return self._pending.count(worker)

    # -- workers -----------------------------------------------------------------------------------------

    def add_worker(self, worker: str, info: Any, **kwargs: Any) -> None:
        """Merge facts about a worker (a dict or a list of pairs: host, username, pid, workers, ...)."""
        self._state.update_worker_info(worker, _info_dict(worker, info))

    def disable_worker(self, worker: str) -> None:
        """Give the worker no more tasks; its next ``get_work`` answers ``worker_state='disabled'``."""
        self._state.disable_worker(worker)

    def set_worker_processes(self, worker: str, n: int) -> None:
        """Ask the worker (through its next ``ping``) to run ``n`` processes."""
        self._state.queue_worker_message(worker, "set_worker_processes", n=n)

    def ping(self, worker: str, held: list[str] | None = None, **kwargs: Any) -> dict[str, Any]:
        """Keep the worker alive and hand it its queued messages; with ``held`` (the tasks our worker runs
        or holds granted ahead), also which of them it no longer owns (``handed_over``, and ``handed_to``:
        who runs those now), see ``rules.leases``."""
        reply: dict[str, Any] = {"rpc_messages": self._state.take_worker_messages(worker)}
        if held is not None:
            handed_over, renewed = leases.check_held(self._state, worker, held)
            for task in renewed:
                logger.info("Worker %s is back and still holds %s: it runs it again", worker, task.id)
                leases.renew(self._state, self._rules.set_status, task, worker)
                record_history(self._task_history, task, RUNNING)
            reply["handed_over"] = handed_over
            reply["handed_to"] = leases.new_owners(self._state, handed_over)
        return reply

    def worker_list(self, include_running: bool = True, **kwargs: Any) -> list[dict[str, Any]]:
        """Active workers, newest first, with their info, running tasks and pending counts."""
        self.prune()
        return queries.worker_list(self._state, include_running)

    # -- operator actions on tasks -----------------------------------------------------------------------

    def re_enable_task(self, task_id: str) -> dict[str, Any]:
        """Lift a scheduler disable: the task becomes FAILED with its failures forgotten."""
        task = self._state.tasks.get(task_id)
        if task is None or task.status != DISABLED or task.scheduler_disable_time is None:
            return {}
        self._rules.re_enable(task)
        return serialize_task(task, self._config.send_messages)

    def forgive_failures(self, task_id: str) -> dict[str, Any]:
        """FAILED becomes PENDING (the failures stay counted)."""
        task = self._state.tasks.get(task_id)
        if task is None:
            return {"task_id": task_id, "status": None}
        if task.status == FAILED:
            record_history(self._task_history, task, PENDING)
            self._rules.set_status(task, PENDING)
        return {"task_id": task_id, "status": task.status}

    def mark_as_done(self, task_id: str) -> dict[str, Any]:
        """RUNNING, FAILED or DISABLED becomes DONE."""
        task = self._state.tasks.get(task_id)
        if task is None:
            return {"task_id": task_id, "status": None}
        if task.status in (RUNNING, FAILED, DISABLED):
            record_history(self._task_history, task, DONE)
            self._rules.set_status(task, DONE)
        return {"task_id": task_id, "status": task.status}

    def set_task_status_message(self, task_id: str, status_message: Any) -> None:
        """Set the message a running task shows in the visualiser (batch members too)."""
        task = self._state.tasks.get(task_id)
        if task is not None:
            for target in self._with_batch_members(task):
                self._state.set_fields(target, status_message=status_message)

    def get_task_status_message(self, task_id: str) -> dict[str, Any]:
        """``{taskId, statusMessage}`` (empty for an unknown task)."""
        task = self._state.tasks.get(task_id)
        return {"taskId": task_id, "statusMessage": task.status_message if task is not None else ""}

    def set_task_progress_percentage(self, task_id: str, progress_percentage: Any) -> None:
        """Set a running task's progress (batch members too)."""
        task = self._state.tasks.get(task_id)
        if task is not None:
            for target in self._with_batch_members(task):
                self._state.set_fields(target, progress_percentage=progress_percentage)

    def get_task_progress_percentage(self, task_id: str) -> dict[str, Any]:
        """``{taskId, progressPercentage}`` (None for an unknown task)."""
        task = self._state.tasks.get(task_id)
        return {
            "taskId": task_id,
            "progressPercentage": task.progress_percentage if task is not None else None,
        }

    def decrease_running_task_resources(self, task_id: str, decrease_resources: dict[str, Any]) -> None:
        """Release part of a RUNNING task's resources (never below 0)."""
        decrease = check_resource_amounts(
            "decrease_running_task_resources: decrease_resources", decrease_resources
        )
        task = self._state.tasks.get(task_id)
        if task is None or task.status != RUNNING:
            return None
        for target in self._with_batch_members(task):
            self._state.release_resources(target, decrease)
        return None

    def get_running_task_resources(self, task_id: str) -> dict[str, Any]:
        """``{taskId, resources}``: what the task holds while it runs."""
        task = self._state.tasks.get(task_id)
        held = task.resources_running if task is not None else None
        return {"taskId": task_id, "resources": None if held is None else dict(held)}

    def _with_batch_members(self, task: TaskRecord) -> list[TaskRecord]:
        """The task plus, when it leads a running batch, the batch's members."""
        if task.status == RUNNING and task.batch_id is not None:
            return [task, *(m for m in self._state.batch_members(task.batch_id) if m is not task)]
        return [task]

    # -- messages to running tasks -----------------------------------------------------------------------

    def send_scheduler_message(self, worker: str, task: str, content: Any) -> dict[str, Any]:
        """Queue a message for a task running on ``worker``; it is delivered through ``ping``."""
        if not self._config.send_messages:
            return {"message_id": None}
        import uuid  # here: few runs send messages, and a local run's start should not pay for it

        message_id = str(uuid.uuid4())
        self._state.queue_worker_message(
            worker, "dispatch_scheduler_message", task_id=task, message_id=message_id, content=content
        )
        return {"message_id": message_id}

    def add_scheduler_message_response(self, task_id: str, message_id: str, response: Any) -> None:
        """Store a running task's answer to a scheduler message."""
        task = self._state.tasks.get(task_id)
        if task is not None:
            self._state.add_message_response(task, message_id, response)

    def get_scheduler_message_response(self, task_id: str, message_id: str) -> dict[str, Any]:
        """The response to a message, handed out once."""
        task = self._state.tasks.get(task_id)
        if task is None:
            return {"response": None}
        return {"response": self._state.take_message_response(task, message_id)}

    # -- resources, pause, housekeeping, hooks -------------------------------------------------------------

    def update_resources(self, **resources: Any) -> None:
        """Merge capacities into the resource table."""
        checked = check_resource_amounts("update_resources", resources)
        for name, amount in checked.items():
            self._state.set_resource(name, amount)

    def update_resource(self, resource: str, amount: Any) -> bool:
        """Set one capacity; False (and no change) unless ``amount`` is a non-negative int."""
        if isinstance(amount, bool) or not isinstance(amount, int) or amount < 0:
            return False
        self._state.set_resource(resource, amount)
        return True

    def has_task_history(self) -> bool:
        """Whether task history is recorded (the visualiser then links to it)."""
        return self._config.record_task_history

    def is_pause_enabled(self) -> dict[str, bool]:
        """``{enabled}``: whether ``pause`` is allowed."""
        return {"enabled": self._config.pause_enabled}

    def is_paused(self) -> dict[str, bool]:
        """``{paused}``."""
        return {"paused": self._state.paused}

    def pause(self) -> None:
        """Stop handing out work (when ``pause_enabled``)."""
        if self._config.pause_enabled:
            self._state.set_paused(True)

    def unpause(self) -> None:
        """Hand out work again."""
        self._state.set_paused(False)

    def prune(self) -> None:
        """Apply what is due: worker disconnects, failed runs, retries, re-enables and removals (f.5)."""
        prune_state(self._state, self._rules)
        if self._task_logs is not None:
            now = self._clock()
            if now - self._logs_expired_at >= LOG_EXPIRY_EVERY_SECONDS:
                self._logs_expired_at = now
                self._task_logs.expire(now)
        if self._config.batch_emails and self._batch_notifier is not None:
            try:
                self._batch_notifier.update()
            except Exception:  # mail trouble must not stop pruning; the batcher keeps its queue
                logger.exception("Could not send batched failure e-mails")

    def prune_if_due(self) -> bool:
        """Prune if a deadline (a silent worker's, a retry, a removal) has come; True if it pruned.

        Cheap (a look at the heads of two heaps), so luigid calls it often: a dead worker's tasks fail
        within ``worker_disconnect_delay`` plus the server's tick, not at the next periodic prune.
        """
        due = self._state.deadlines.next_due()
        if due is None or due > self._clock():
            return False
        self.prune()
        return True

    def announce_scheduling_failure(
        self,
        task_name: str,
        family: str,
        params: dict[str, Any],
        expl: Any,
        owners: Any,
        worker: str,
        **kwargs: Any,
    ) -> None:
        """A worker could not schedule a task; collected for batched e-mails when ``batch_emails`` is on."""
        if not self._config.batch_emails or self._batch_notifier is None:
            return None
        unbatched = unbatched_params(self._state, worker, family, params)
        try:
            self._batch_notifier.add_scheduling_fail(task_name, family, unbatched, expl, owners)
        except Exception:  # the batcher is replaceable: mail trouble must not fail the worker's call
            logger.exception("Could not queue the batched e-mail about %s", task_name)
        return None

    def update_metrics_task_started(self, task: Any) -> None:
        """Tell the metrics collector a task was handed out (a record or its view, or over RPC the id of a
        known task)."""
        if isinstance(task, TaskView):
            task = task.record
        record = task if isinstance(task, TaskRecord) else self._state.tasks.get(_task_id_of(task) or "")
        if record is None:
            return None
        try:
            self._state.metrics.handle_task_started(self._state.task_view(record))
        except Exception:  # a collector is a plug-in: its bug must not fail the grant
            logger.exception("Metrics collector failed on %s starting", record.id)
        return None

    def report_task_statistics(self, task_id: str, statistics: Any) -> None:
        """Pass a running task's statistics to the metrics collector (ignored for an unknown task)."""
        task = self._state.tasks.get(task_id)
        if task is None:
            return None
        try:
            self._state.metrics.handle_task_statistics(self._state.task_view(task), statistics)
        except Exception:  # a collector is a plug-in: its bug must not fail the worker's report
            logger.exception("Metrics collector failed on statistics of %s", task_id)
        return None


def _task_id_of(task: Any) -> str | None:
    """The id in an RPC's ``task`` argument: the id itself, or an object with an ``id``."""
    if isinstance(task, str):
        return task
    if isinstance(task, dict) and isinstance(task.get("id"), str):
        return str(task["id"])
    return None


def _info_dict(worker: str, info: Any) -> dict[str, Any]:
    """Worker info as a dict, from a dict or a list of (name, value) pairs."""
    if isinstance(info, dict):
        return info
    try:
        return dict(info)
    except (TypeError, ValueError):
        raise ValueError(
            f"add_worker {worker}: info must be an object or a list of [name, value] pairs, got {info!r}"
        ) from None
