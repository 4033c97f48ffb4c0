"""The scheduler's state: task and worker records plus the indexes that keep every decision cheap.

Every write to a record goes through a method here, so the indexes stay exact (tasks by status and
family, reverse dependency edges with a per-task count of unfinished dependencies, ready queues,
per-worker pending counters, batch membership and deadlines) and so that marking a record for the
durable store (``mark_changed`` and its kin) happens here and nowhere else.

Two different notes are kept: ``to_recheck`` (``recheck``) lists tasks the next prune looks at for a
lost runner or lost stakeholders; ``changes`` (``mark_changed``) lists records the next flush writes.
Luigi's names for all this (``get_task``, ``_metrics_collector``, a task's ``failures``, ...) are views in
``luigi_names``; the writes they allow come back here.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any, TypedDict

from luigi.metrics import CollectorExtras, MetricsCollector, NoMetricsCollector
from luigi.scheduler.model.changes import ChangeSet
from luigi.scheduler.model.clock import Clock, system_time
from luigi.scheduler.model.deadlines import REENABLE, REMOVE, RETRY, Deadlines
from luigi.scheduler.model.luigi_names import LuigiStateNames
from luigi.scheduler.model.ready import ASSISTANTS, Owner, RankKey, ReadyQueues
from luigi.scheduler.model.records import (
    COUNTED_STATUSES,
    ResourceKey,
    TaskRecord,
    WorkerRecord,
    resource_key,
)
from luigi.scheduler.model.shared import (
    EMPTY_DICT,
    EMPTY_LIST,
    NO_IDS,
    collector_paused,
    interned,
    shared_dict,
    shared_ids,
    shared_keys,
)
from luigi.scheduler.settings import SchedulerConfig, TaskRetryPolicy
from luigi.task_status import BATCH_RUNNING, DISABLED, DONE, FAILED, PENDING, RUNNING, UNKNOWN

if TYPE_CHECKING:
    from typing_extensions import Unpack

STATUSES = (PENDING, RUNNING, DONE, FAILED, DISABLED, UNKNOWN, BATCH_RUNNING)
ACTIVE_RUN_STATUSES = (RUNNING, BATCH_RUNNING)
# A cancel request lasts while its run does and, once that run FAILED, until the task is forgiven.
CANCEL_KEPT_STATUSES = (RUNNING, FAILED)
# Up to this many dependents of a task are kept in a frozenset shared with equal ones; past it, a set.
SHARED_DEPENDENTS = 8


class PlainFields(TypedDict, total=False):
    """Task fields no index depends on, written with ``SchedulerState.set_fields``."""

    module: str | None
    expl: Any
    tracking_url: str | None
    accepts_messages: bool
    batchable: bool
    owners: list[str]
    status_message: str | None
    progress_percentage: Any
    retry_policy: TaskRetryPolicy
    time_running: float | None  # (written by users' tests through Luigi's names)
    updated: float


class SchedulerState(LuigiStateNames):
    """Tasks, workers, capacities and batchers, with indexes maintained on every change."""

    def __init__(self, config: SchedulerConfig, clock: Clock) -> None:
        self.config = config
        self.clock = clock
        self.tasks: dict[str, TaskRecord] = {}
        self.workers: dict[str, WorkerRecord] = {}
        self.resources: dict[str, Any] = dict(config.resources)
        self.batchers: dict[str, dict[str, tuple[list[str], float]]] = {}
        self.paused = False
        # derived indexes
        self.by_status: dict[str, dict[str, TaskRecord]] = {status: {} for status in STATUSES}
        self.dependents: dict[str, frozenset[str] | set[str]] = {}
        self.by_family: dict[str, set[str]] = {}
        self.by_batch: dict[str, set[str]] = {}
        self.assistants: set[str] = set()  # ids of the known workers that declared themselves assistants
        self.ready = ReadyQueues(self._entry_is_valid)
        self.deadlines = Deadlines()
        self.to_recheck: set[str] = set()  # tasks the next prune checks for lost stakeholders or runner
        # RUNNING tasks another worker reported DONE (its complete() was true) while the runner held them:
        # the report is refused (only the runner may end its run), but if the runner is lost the task is
        # DONE, not FAILED. By task id, the worker that reported it; not kept in the state.
        self.done_elsewhere: dict[str, str] = {}
        self.disabled_version = 0  # bumps when the set of tasks with a DISABLED upstream may change
        # Display names (family and parameters), for the search index: ``names_version`` bumps at any
        # change, ``names_rewritten`` only when a name changed or went (not when tasks were only added).
        self.names_version = 0
        self.names_rewritten = 0
        self.changes: ChangeSet | None = None  # records to persist at the next flush; None: no store
        self.metrics: MetricsCollector = NoMetricsCollector()  # told of transitions by the rules (not state)
        self.metrics_extras = CollectorExtras.of(self.metrics)

    def use_collector(self, collector: MetricsCollector) -> None:
        """Tell ``collector`` of task transitions from now on (its optional hooks are found once, here)."""
        self.metrics = collector
        self.metrics_extras = CollectorExtras.of(collector)

    # -- lookups ---------------------------------------------------------------------------------------

    def tasks_with_status(self, *statuses: str) -> Iterator[TaskRecord]:
        """The tasks in any of ``statuses`` (a snapshot: safe to change them while iterating)."""
        for status in statuses:
            yield from list(self.by_status.get(status, {}).values())

    def is_done(self, task_id: str) -> bool:
        """Whether the task exists and is DONE (a missing dependency is unfinished)."""
        task = self.tasks.get(task_id)
        return task is not None and task.status == DONE

    def batch_members(self, batch_id: str) -> list[TaskRecord]:
        """The BATCH_RUNNING tasks of a batch (Luigi's ``get_batch_running_tasks``)."""
        members = (self.tasks[task_id] for task_id in self.by_batch.get(batch_id, ()))
        return sorted((t for t in members if t.status == BATCH_RUNNING), key=rank_key)

    def assistant_ids(self) -> set[str]:
        """Ids of the known workers that are assistants (the index itself: read it, never change it)."""
        return self.assistants

    # -- task life cycle -------------------------------------------------------------------------------

    def create_task(
        self,
        task_id: str,
        status: str,
        retry_policy: TaskRetryPolicy,
        *,
        deps: Iterable[str] | None = None,
        priority: float = 0,
        family: str = "",
        module: str | None = None,
        params: dict[str, Any] | None = None,
        param_visibilities: dict[str, int] | None = None,
        resources: dict[str, Any] | None = None,
    ) -> TaskRecord:
        """Record a new task (Luigi's ``_make_task`` plus ``get_task(setdefault=...)``)."""
        task = _new_record(
            task_id,
            status,
            self.clock(),
            retry_policy,
            priority,
            family=interned(family or ""),
            module=interned(module) if module else module,
            param_visibilities=shared_dict(param_visibilities),
            resources=shared_dict(resources),
        )
        task.set_params(params)
        self._index_new_task(task, deps or ())
        return task

    def create_stubs(
        self, task_ids: Iterable[str], retry_policy: TaskRetryPolicy, priority: float, stakeholder: str
    ) -> None:
        """Record new UNKNOWN tasks that a report named as dependencies, kept by ``stakeholder``.

        What ``create_task`` and ``add_stakeholder`` do for each, in one pass: a wrapper naming a million
        dependencies makes a million of them in one call. They share one creation time (that of the report)
        and their containers (``model.shared``), so the store can write them as one run of equal rows.
        """
        now = self.clock()
        stake = shared_ids((stakeholder,))
        tasks, unknown = self.tasks, self.by_status[UNKNOWN]
        made = []
        with collector_paused():
            for task_id in task_ids:
                task = _new_record(task_id, UNKNOWN, now, retry_policy, priority, stakeholders=stake)
                tasks[task_id] = unknown[task_id] = task
                made.append(task_id)
        if not made:
            return
        self.by_family.setdefault("", set()).update(made)
        self.workers[stakeholder].stake.update(made)
        self.to_recheck.update(made)
        if self.changes is not None:
            self.changes.tasks.update(dict.fromkeys(made))
        self.names_version += 1

    def adopt_task(self, task: TaskRecord) -> None:
        """Add a record made outside the state (Luigi's ``get_task(setdefault=...)``). It must be new:
        workers, stakeholders and batches are added through the state, not brought in."""
        if task.id in self.tasks:
            raise ValueError(f"Task {task.id!r} is already known: read it with get_task({task.id!r})")
        if task.workers or task.stakeholders or task.batch_id is not None:
            raise ValueError(
                f"Task {task.id!r} brought its own workers, stakeholders or batch: add it without them, "
                "then report it with add_task(worker=...)"
            )
        deps, task.deps, task.unfinished_deps = set(task.deps), NO_IDS, 0
        self._index_new_task(task, deps)

    def _index_new_task(self, task: TaskRecord, deps: Iterable[str]) -> None:
        task.resource_key = resource_key(task.resources)
        self.tasks[task.id] = task
        self.by_status[task.status][task.id] = task
        self.by_family.setdefault(task.family, set()).add(task.id)
        if task.status == DONE:
            self._dependents_changed(task.id, -1)
        self.set_deps(task, deps)
        self.to_recheck.add(task.id)
        self.mark_changed(task.id)
        self.names_version += 1

    def remove_task(self, task: TaskRecord) -> None:
        """Forget a task; tasks depending on it see it as missing, hence unfinished."""
        self._count_pending(task, -1)
        for worker_id in task.workers:
            self.workers[worker_id].tasks.discard(task.id)
        for worker_id in task.stakeholders:
            worker = self.workers.get(worker_id)
            if worker is not None:
                worker.stake.discard(task.id)
        self._unlink_deps(task, task.deps)
        task.deps = NO_IDS
        self.set_batch_id(task, None)
        self._discard_from(self.by_family, task.family, task.id)
        del self.by_status[task.status][task.id]
        del self.tasks[task.id]
        self.done_elsewhere.pop(task.id, None)
        self.mark_changed(task.id)
        self._names_rewritten()
        if task.status == DONE:
            self._dependents_changed(task.id, +1)
        self.disabled_version += 1  # it may have been on a path to a DISABLED task

    def change_status(self, task: TaskRecord, new_status: str) -> None:
        """Move a task to another status and update every index that depends on it."""
        old_status = task.status
        if old_status == new_status:
            return
        if DISABLED in (old_status, new_status) or task.unfinished_deps:
            self.disabled_version += 1
        self._count_pending(task, -1)
        del self.by_status[old_status][task.id]
        self.by_status[new_status][task.id] = task
        task.status = new_status
        if self.done_elsewhere and old_status in ACTIVE_RUN_STATUSES:
            self.done_elsewhere.pop(task.id, None)  # the run ended: a claim made during it is over
        task.updated = self.clock()
        if task.cancel_requested is not None and new_status not in CANCEL_KEPT_STATUSES:
            task.cancel_requested = None  # done, forgiven or handed out again: the cancel is over
        self._count_pending(task, +1)
        if DONE in (old_status, new_status):
            self._dependents_changed(task.id, -1 if new_status == DONE else +1)
        self.to_recheck.add(task.id)
        self.mark_changed(task.id)
        self.refresh_ready(task)

    def set_deps(self, task: TaskRecord, deps: Iterable[str]) -> None:
        """Replace the dependencies."""
        new = frozenset(deps) or NO_IDS
        if new != task.deps:
            self._unlink_deps(task, task.deps - new)
            self._link_deps(task, new - task.deps)
            task.deps = new
            self.refresh_ready(task)
            self.mark_changed(task.id)

    def add_deps(self, task: TaskRecord, deps: Iterable[str]) -> None:
        """Extend the dependencies (dynamic dependencies found while running)."""
        added = set(deps) - task.deps
        if added:
            self._link_deps(task, added)
            task.deps = task.deps | added
            self.mark_changed(task.id)

    def set_resources(self, task: TaskRecord, resources: dict[str, Any]) -> None:
        """Replace the task's resource needs (it moves to another ready group)."""
        task.resources = shared_dict(resources)
        self.mark_changed(task.id)
        key = resource_key(task.resources)
        if key != task.resource_key:
            task.resource_key = key
            self.refresh_ready(task)

    def set_priority(self, task: TaskRecord, priority: float) -> None:
        """Change the task's priority (its ready entries are re-ranked)."""
        if priority != task.priority:
            task.priority = priority
            self.refresh_ready(task)
            self.mark_changed(task.id)

    def set_family(self, task: TaskRecord, family: str) -> None:
        """Name the family of a task first known as a stub."""
        self._discard_from(self.by_family, task.family, task.id)
        task.family = interned(family)
        task.pretty_cache = None
        self.mark_changed(task.id)
        self._names_rewritten()
        self.by_family.setdefault(family, set()).add(task.id)

    def mark_runnable(self, task: TaskRecord) -> None:
        """Some worker can run the task (so assistants may too)."""
        if not task.runnable:
            task.runnable = True
            self.refresh_ready(task)
            self.mark_changed(task.id)

    def set_batch_id(self, task: TaskRecord, batch_id: str | None) -> None:
        """Put the task in a batch, or out of it with None."""
        if task.batch_id is not None:
            self._discard_from(self.by_batch, task.batch_id, task.id)
        task.batch_id = batch_id
        if batch_id is not None:
            self.by_batch.setdefault(batch_id, set()).add(task.id)
        self.mark_changed(task.id)

    def add_task_worker(self, task: TaskRecord, worker_id: str) -> None:
        """List a worker as able to run the task (it lands in that worker's ready queue)."""
        if worker_id in task.workers:
            return
        self._count_pending(task, -1)
        task.workers = shared_keys((*task.workers, worker_id))
        self._count_pending(task, +1)
        self.workers[worker_id].tasks.add(task.id)
        self.refresh_ready(task)
        self.mark_changed(task.id)

    def remove_task_worker(self, task: TaskRecord, worker_id: str) -> None:
        """Stop listing a worker as able to run the task."""
        if worker_id not in task.workers:
            return
        self._count_pending(task, -1)
        task.workers = shared_keys(w for w in task.workers if w != worker_id)
        self._count_pending(task, +1)
        worker = self.workers.get(worker_id)
        if worker is not None:
            worker.tasks.discard(task.id)
        self.mark_changed(task.id)

    def add_stakeholder(self, task: TaskRecord, worker_id: str) -> None:
        """The worker wants the task kept (it added the task or a task depending on it)."""
        if worker_id not in task.stakeholders:
            task.stakeholders = shared_ids((*task.stakeholders, worker_id))
            self.mark_changed(task.id)
        self.workers[worker_id].stake.add(task.id)

    def remove_stakeholder(self, task: TaskRecord, worker_id: str) -> None:
        """The worker no longer keeps the task alive; without stakeholders it is due for removal."""
        if worker_id in task.stakeholders:
            task.stakeholders = shared_ids(w for w in task.stakeholders if w != worker_id)
            self.mark_changed(task.id)
        worker = self.workers.get(worker_id)
        if worker is not None:
            worker.stake.discard(task.id)
        if not task.stakeholders:
            self.to_recheck.add(task.id)

    def set_fields(self, task: TaskRecord, **fields: Unpack[PlainFields]) -> None:
        """Write fields no index depends on (explanation, tracking url, owners, ...)."""
        for name, value in fields.items():
            setattr(task, name, value)
        self.mark_changed(task.id)

    def fill_missing(
        self,
        task: TaskRecord,
        family: str,
        module: str | None,
        params: dict[str, Any] | None,
        param_visibilities: dict[str, int] | None,
    ) -> None:
        """Fill what a task first known as a stub lacks; fields it already has stay."""
        if not task.family and family:
            self.set_family(task, family)
        if not task.module and module != task.module:
            task.module = interned(module) if module else module
            self.mark_changed(task.id)
        if not task.param_visibilities and param_visibilities:
            task.param_visibilities = shared_dict(param_visibilities)
            task.pretty_cache = None
            self.mark_changed(task.id)
            self._names_rewritten()
        if not task.params and params:
            task.set_params(params)
            self.mark_changed(task.id)
            self._names_rewritten()

    def start_run(self, task: TaskRecord, worker_id: str, held: dict[str, Any] | None) -> None:
        """Record that ``worker_id`` runs the task from now, holding ``held`` (None: as before)."""
        task.worker_running = worker_id
        task.lost_lease = None  # someone started it: a lost run's lease cannot be renewed any more
        if held is not None:
            task.resources_running = held
        task.time_running = self.clock()
        self.to_recheck.add(task.id)
        self.mark_changed(task.id)

    def clear_runner(self, task: TaskRecord, release: bool) -> None:
        """Forget who runs the task; with ``release`` also what it holds."""
        task.worker_running = None
        task.granted_ahead = False
        if release:
            task.resources_running = None
        self.mark_changed(task.id)

    def note_done_elsewhere(self, task: TaskRecord, worker_id: str) -> None:
        """``worker_id`` found ``task`` complete while another worker runs it (``done_elsewhere``)."""
        self.done_elsewhere[task.id] = worker_id

    def request_cancel(self, task: TaskRecord, now: float) -> None:
        """Note that an operator asked at ``now`` to cancel the task's run (its failure is not retried)."""
        task.cancel_requested = now
        self.mark_changed(task.id)

    def release_resources(self, task: TaskRecord, decrease: dict[str, Any]) -> None:
        """Lower what a running task holds (never below 0)."""
        held = task.resources_running if task.resources_running is not None else {}
        for name, amount in decrease.items():
            if amount > 0 and name in held:
                held[name] = max(0, held[name] - amount)
        self.mark_changed(task.id)

    def record_failure(self, task: TaskRecord, now: float) -> None:
        """Remember one failure at ``now``; failures older than the task's window are forgotten, unless
        its hard timeout has passed (it is disabled then, whatever the window holds)."""
        if task.first_failure_time is None:
            task.first_failure_time = now
        times = [*task.failure_times, now]  # a new list: the empty one is shared (``model.shared``)
        policy = task.retry_policy
        if now < task.first_failure_time + policy.disable_hard_timeout:
            del times[: bisect.bisect_left(times, now - policy.disable_window)]
        task.failure_times = times
        self.mark_changed(task.id)

    def clear_failures(self, task: TaskRecord) -> None:
        """Forget every recorded failure (re-enabling)."""
        task.failure_times = EMPTY_LIST
        task.first_failure_time = None
        self.mark_changed(task.id)

    def forget_failure(self, task: TaskRecord, failed_at: float) -> None:
        """Take back the last failure recorded at ``failed_at`` (a lost run that was not lost after all)."""
        times = list(task.failure_times)  # a new list: the empty one is shared (``model.shared``)
        if failed_at not in times:
            return
        del times[len(times) - 1 - times[::-1].index(failed_at)]
        task.failure_times = times if times else EMPTY_LIST
        if not times and task.first_failure_time == failed_at:
            task.first_failure_time = None
        self.mark_changed(task.id)

    def add_message_response(self, task: TaskRecord, message_id: str, response: Any) -> None:
        """Keep a running task's answer to a scheduler message until it is asked for."""
        task.scheduler_message_responses = {**task.scheduler_message_responses, message_id: response}
        self.mark_changed(task.id)

    def take_message_response(self, task: TaskRecord, message_id: str) -> Any:
        """Hand out (and forget) the answer to a message; None when there is none."""
        if message_id not in task.scheduler_message_responses:
            return None
        self.mark_changed(task.id)
        responses = dict(task.scheduler_message_responses)
        response = responses.pop(message_id)
        task.scheduler_message_responses = responses or EMPTY_DICT
        return response

    def recheck(self, task_id: str) -> None:
        """Have the next prune check the task for a lost runner or lost stakeholders."""
        self.to_recheck.add(task_id)

    # -- leases (``rules.leases`` says when) --------------------------------------------------------------

    def mark_granted_ahead(self, task: TaskRecord, worker_id: str) -> None:
        """``task`` was granted to ``worker_id`` to start after the runs before it end (kept in the store:
        a restart or a standby's takeover rebuilds the worker's queue from the marks)."""
        task.granted_ahead = True
        self.worker(worker_id).ahead.append(task.id)
        self.mark_changed(task.id)

    def start_next_ahead(self, task: TaskRecord, worker_id: str) -> None:
        """``worker_id``'s run of ``task`` ended: the next of its grants made ahead has started now.

        Grants settled while they waited (put back, handed to another worker) are skipped.
        """
        task.granted_ahead = False
        worker = self.workers.get(worker_id)
        if worker is None or not worker.ahead:
            return
        queue = worker.ahead
        if task.id in queue:
            queue.remove(task.id)
        while queue:
            queued = self.tasks.get(queue.pop(0))
            if queued is not None and queued.granted_ahead and queued.worker_running == worker_id:
                queued.granted_ahead = False
                self.mark_changed(queued.id)
                return

    def set_lost_lease(self, task: TaskRecord, lease: dict[str, Any] | None) -> None:
        """Remember which worker lost the task's run and how (``rules.leases``); None: that lease is over."""
        task.lost_lease = lease
        self.mark_changed(task.id)

    # -- deadlines -------------------------------------------------------------------------------------

    def set_retry(self, task: TaskRecord, when: float) -> None:
        """A FAILED task becomes PENDING after ``when`` (unless retry_delay is negative)."""
        task.retry = when
        self.mark_changed(task.id)
        if self.config.retry_delay >= 0:
            self.deadlines.remind_task(when, RETRY, task.id, when)

    def clear_retry(self, task: TaskRecord) -> None:
        """A FAILED task stays FAILED until forgiven (its run was cancelled): no retry is due."""
        task.retry = None
        self.mark_changed(task.id)

    def set_removal(self, task: TaskRecord, when: float | None) -> None:
        """Delete the task at ``when`` (None: keep it)."""
        task.remove = when
        self.mark_changed(task.id)
        if when is not None:
            self.deadlines.remind_task(when, REMOVE, task.id, when)

    def set_scheduler_disabled(self, task: TaskRecord, when: float | None) -> None:
        """Record a scheduler disable at ``when`` (re-enabled after disable_persist), or clear it."""
        task.scheduler_disable_time = when
        self.mark_changed(task.id)
        if when is not None:
            self.deadlines.remind_task(when + self.config.disable_persist, REENABLE, task.id, when)

    # -- workers ---------------------------------------------------------------------------------------

    def worker(self, worker_id: str) -> WorkerRecord:
        """The worker's record, created on first mention (as Luigi's ``get_worker`` does)."""
        worker = self.workers.get(worker_id)
        if worker is None:
            now = self.clock()
            worker = self.workers[worker_id] = WorkerRecord(id=worker_id, started=now, last_active=now)
            self.deadlines.remind_worker(now + self.config.worker_disconnect_delay, worker_id, now)
            self.mark_worker_changed(worker_id)
        return worker

    def touch_worker(
        self, worker_id: str, reference: dict[str, Any] | None = None, get_work: bool = False
    ) -> WorkerRecord:
        """Note that the worker is alive (Luigi's ``_update_worker``)."""
        worker = self.worker(worker_id)
        if reference and reference != worker.reference:
            worker.reference = reference
            self.mark_worker_changed(worker_id)
        # last_active is not marked: loading gives every worker a fresh one anyway.
        worker.last_active = self.clock()
        if get_work:
            worker.last_get_work = worker.last_active
            self.mark_worker_changed(worker_id)
        return worker

    def note_alive(self, worker_id: str) -> None:
        """A known worker is alive; nothing saved changes (``last_active`` is not saved)."""
        worker = self.workers.get(worker_id)
        if worker is not None:
            worker.last_active = self.clock()

    def remove_worker(self, worker_id: str) -> None:
        """Forget a silent worker: it no longer runs or keeps alive any task."""
        worker = self.workers.get(worker_id)
        if worker is None:
            return
        for task_id in list(worker.tasks):
            self.remove_task_worker(self.tasks[task_id], worker_id)
        for task_id in list(worker.stake):
            self.remove_stakeholder(self.tasks[task_id], worker_id)
        del self.workers[worker_id]
        self.assistants.discard(worker_id)
        self.mark_worker_changed(worker_id)
        self.ready.drop_owner(worker_id)
        # A running task may have lost its runner's stake, or its runner's assistant status.
        self.to_recheck.update(task.id for task in self.tasks_with_status(*ACTIVE_RUN_STATUSES))
        if self.ready.has_owner(ASSISTANTS) and not self.assistant_ids():
            self.ready.drop_owner(ASSISTANTS)

    def disable_worker(self, worker_id: str) -> None:
        """Stop giving the worker tasks; it stays a stakeholder of what it added."""
        worker = self.worker(worker_id)
        for task_id in list(worker.tasks):
            self.remove_task_worker(self.tasks[task_id], worker_id)
        worker.disabled = True
        self.mark_worker_changed(worker_id)
        self.ready.drop_owner(worker_id)

    def update_worker_info(self, worker_id: str, info: dict[str, Any]) -> None:
        """Merge facts about a worker (host, username, pid, workers, assistant, ...)."""
        worker = self.worker(worker_id)
        worker.info.update(info)
        if worker.assistant:
            self.assistants.add(worker_id)
        else:
            self.assistants.discard(worker_id)
        self.mark_worker_changed(worker_id)

    def queue_worker_message(self, worker_id: str, name: str, **kwargs: Any) -> None:
        """Queue a message for the worker's next ``ping``."""
        self.worker(worker_id).add_rpc_message(name, **kwargs)
        self.mark_worker_changed(worker_id)

    def take_worker_messages(self, worker_id: str) -> list[dict[str, Any]]:
        """Note that the worker is alive and hand over (and forget) its queued messages."""
        messages = self.touch_worker(worker_id).fetch_rpc_messages()
        if messages:
            self.mark_worker_changed(worker_id)
        return messages

    def set_batcher(self, worker_id: str, family: str, names: list[str], max_size: float) -> None:
        """Let the worker run tasks of ``family`` in batches over the ``names`` parameters."""
        self.batchers.setdefault(worker_id, {})[family] = (list(names), max_size)
        self.mark_batcher_changed(worker_id)

    # -- resources and pause ---------------------------------------------------------------------------

    def set_resource(self, name: str, amount: Any) -> None:
        """Set one capacity at run time."""
        self.resources[name] = amount
        self.mark_resource_changed(name)

    def set_paused(self, paused: bool) -> None:
        """Stop (True) or resume (False) handing out work."""
        if paused != self.paused:
            self.paused = paused
            self.mark_paused_changed()

    # -- marks for the durable store (the only place records are marked) -------------------------------

    def mark_changed(self, task_id: str) -> None:
        """Note that a task's persisted fields changed (or it was removed), for the next flush."""
        if self.changes is not None:
            self.changes.tasks[task_id] = None

    def mark_worker_changed(self, worker_id: str) -> None:
        """Note that a worker's persisted fields changed (or it was removed)."""
        if self.changes is not None:
            self.changes.workers[worker_id] = None

    def mark_resource_changed(self, name: str) -> None:
        """Note that a resource capacity was set at run time."""
        if self.changes is not None:
            self.changes.resources[name] = None

    def mark_batcher_changed(self, worker_id: str) -> None:
        """Note that a worker's batcher registrations changed."""
        if self.changes is not None:
            self.changes.batchers[worker_id] = None

    def mark_paused_changed(self) -> None:
        """Note that the pause flag changed."""
        if self.changes is not None:
            self.changes.paused = True

    # -- restoring -------------------------------------------------------------------------------------

    def settle_loaded(self, now: float) -> list[str]:
        """Make freshly loaded records consistent: every worker counts as seen ``now`` and the indexes
        are rebuilt. Returns the tasks that named unknown workers (rebuilding dropped those ids)."""
        for worker in self.workers.values():
            worker.last_active = now
        return self.rebuild_indexes()

    def rebuild_indexes(self) -> list[str]:
        """Recompute every derived index from the task and worker records (after loading them).

        Ids of unknown workers are dropped from tasks' ``workers`` and ``stakeholders`` (the tasks that
        named any are returned); every task is re-checked at the next prune and its pending deadlines are
        scheduled again.
        """
        self.by_status = {status: {} for status in STATUSES}
        self.dependents, self.by_family, self.by_batch = {}, {}, {}
        self.ready = ReadyQueues(self._entry_is_valid)
        self.deadlines = Deadlines()
        self.assistants = {worker.id for worker in self.workers.values() if worker.assistant}
        self.disabled_version += 1
        self._names_rewritten()
        for worker in self.workers.values():
            worker.tasks, worker.stake = set(), set()
            worker.pending_counts = {status: [0, 0, 0] for status in COUNTED_STATUSES}
            self.deadlines.remind_worker(
                worker.last_active + self.config.worker_disconnect_delay, worker.id, worker.started
            )
        stale = [task_id for group in self._index_restored_tasks() for task_id in self._index_group(group)]
        done = self.by_status[DONE].keys()
        for task in self.tasks.values():
            if task.deps:
                task.unfinished_deps = len(task.deps) - len(done & task.deps)
        self._fill_ready_queues()
        self._rebuild_ahead_queues()
        self.to_recheck = set(self.tasks)
        return stale

    def _index_restored_tasks(self) -> Iterable[list[TaskRecord]]:
        """Index what is each loaded task's own, in one pass; returns the tasks grouped by what they
        share (the same workers and stakeholders containers, status and family) for ``_index_group``."""
        groups: dict[tuple[int, int, str, str], list[TaskRecord]] = {}
        resource_keys: dict[int, ResourceKey] = {}  # by resources container: most tasks share one
        by_status = self.by_status
        for task in self.tasks.values():
            by_status[task.status][task.id] = task
            shares = (id(task.workers), id(task.stakeholders), task.status, task.family)
            group = groups.get(shares)
            if group is None:
                group = groups[shares] = []
            group.append(task)
            rkey = resource_keys.get(id(task.resources))
            if rkey is None:
                rkey = resource_keys[id(task.resources)] = resource_key(task.resources)
            task.resource_key = rkey
            task.pretty_cache = None
            if task.deps:
                self._link_restored_deps(task)
            if task.batch_id is not None:
                self.by_batch.setdefault(task.batch_id, set()).add(task.id)
            if task.status == FAILED and task.retry is not None:
                self.set_retry(task, task.retry)
            if task.remove is not None:
                self.set_removal(task, task.remove)
            if task.scheduler_disable_time is not None:
                self.set_scheduler_disabled(task, task.scheduler_disable_time)
        return groups.values()

    def _link_restored_deps(self, task: TaskRecord) -> None:
        """Index a loaded task as a dependent of each of its dependencies (most have no other yet)."""
        dependents = self.dependents
        alone: frozenset[str] | None = None
        for dep_id in task.deps:
            if dep_id in dependents:
                self._add_dependent(dep_id, task.id)
            else:
                if alone is None:
                    alone = shared_ids((task.id,))
                dependents[dep_id] = alone

    def _index_group(self, group: list[TaskRecord]) -> list[str]:
        """Index loaded tasks that share their workers and stakeholders containers, status and family, at
        once; returns their ids when those named workers that are gone (they are dropped)."""
        first = group[0]
        ids = [task.id for task in group]
        known = self.workers.keys()
        stale = not (known >= first.workers.keys() and known >= first.stakeholders)
        if stale:
            kept_workers = shared_keys(w for w in first.workers if w in known)
            kept_stakeholders = shared_ids(w for w in first.stakeholders if w in known)
            for task in group:
                task.workers, task.stakeholders = kept_workers, kept_stakeholders
        self.by_family.setdefault(first.family, set()).update(ids)
        for worker_id in first.workers:
            self.workers[worker_id].tasks.update(ids)
        for worker_id in first.stakeholders:
            self.workers[worker_id].stake.update(ids)
        self._count_pending(first, len(group))
        return ids if stale else []

    def _fill_ready_queues(self) -> None:
        """Queue every ready loaded task for its workers at once (``refresh_ready`` for each, in bulk)."""
        ready: dict[str, list[tuple[RankKey, ResourceKey]]] = {}
        for task in self.by_status[PENDING].values():
            if task.unfinished_deps:
                continue
            entry = (rank_key(task), task.resource_key)
            for worker_id in task.workers:
                owned = ready.get(worker_id)
                if owned is None:
                    owned = ready[worker_id] = []
                owned.append(entry)
        for worker_id, entries in ready.items():
            self.ready.fill(worker_id, entries)

    def _rebuild_ahead_queues(self) -> None:
        """Each worker's grants made ahead, in the order granted (the time each was granted), from the
        tasks' kept ``granted_ahead`` marks (a mark without a known runner is dropped)."""
        for worker in self.workers.values():
            worker.ahead = []
        granted = []
        for task in self.tasks.values():
            task.granted_ahead = task.granted_ahead is True and task.worker_running in self.workers
            if task.granted_ahead:
                granted.append(task)
        granted.sort(key=lambda task: task.time_running or 0.0)
        for task in granted:
            self.workers[str(task.worker_running)].ahead.append(task.id)

    # -- ready queues ----------------------------------------------------------------------------------

    def refresh_ready(self, task: TaskRecord) -> None:
        """Queue the task for each of its workers (and assistants) if it is ready to run."""
        if task.status != PENDING or task.unfinished_deps:
            return
        key = rank_key(task)
        for worker_id in task.workers:
            self.ready.offer(worker_id, key, task.resource_key, len(self.workers[worker_id].tasks))
        if task.runnable and self.ready.has_owner(ASSISTANTS):
            self.ready.offer(ASSISTANTS, key, task.resource_key, len(self.by_status[PENDING]))

    def enable_assistant_queue(self) -> None:
        """Start queueing runnable tasks for assistants (built once, on the first assistant request)."""
        if self.ready.has_owner(ASSISTANTS):
            return
        self.ready.add_owner(ASSISTANTS)
        pending = list(self.by_status[PENDING].values())
        for task in pending:
            if task.runnable and not task.unfinished_deps:
                self.ready.offer(ASSISTANTS, rank_key(task), task.resource_key, len(pending))

    def _entry_is_valid(self, owner: Owner, key: RankKey, rkey: ResourceKey) -> bool:
        task = self.tasks.get(key[2])
        return (
            task is not None
            and task.status == PENDING
            and not task.unfinished_deps
            and task.resource_key == rkey
            and key == rank_key(task)
            and (task.runnable if owner is ASSISTANTS else owner in task.workers)
        )

    # -- index helpers ---------------------------------------------------------------------------------

    def _names_rewritten(self) -> None:
        self.names_version += 1
        self.names_rewritten += 1

    def _link_deps(self, task: TaskRecord, deps: AbstractSet[str]) -> None:
        for dep_id in deps:
            self._add_dependent(dep_id, task.id)
            if not self.is_done(dep_id):
                task.unfinished_deps += 1
        if deps:
            self.disabled_version += 1

    def _unlink_deps(self, task: TaskRecord, deps: AbstractSet[str]) -> None:
        for dep_id in deps:
            self._discard_dependent(dep_id, task.id)
            if not self.is_done(dep_id):
                task.unfinished_deps -= 1
        if deps:
            self.disabled_version += 1

    def _add_dependent(self, dep_id: str, task_id: str) -> None:
        """Index ``task_id`` as depending on ``dep_id``: a few dependents share a frozenset with other
        tasks that have the same ones, many get a set of their own (adding stays O(1))."""
        current = self.dependents.get(dep_id)
        if current is None:
            self.dependents[dep_id] = shared_ids((task_id,))
        elif type(current) is set:
            current.add(task_id)
        elif len(current) < SHARED_DEPENDENTS:
            self.dependents[dep_id] = shared_ids((*current, task_id))
        else:
            self.dependents[dep_id] = {*current, task_id}

    def _discard_dependent(self, dep_id: str, task_id: str) -> None:
        current = self.dependents.get(dep_id)
        if current is None or task_id not in current:
            return
        if len(current) == 1:
            del self.dependents[dep_id]
        elif type(current) is set:
            current.discard(task_id)
        else:
            self.dependents[dep_id] = shared_ids(t for t in current if t != task_id)

    def _dependents_changed(self, task_id: str, delta: int) -> None:
        """A task became DONE (-1) or stopped being DONE (+1): adjust its dependents' counters."""
        for dependent_id in self.dependents.get(task_id, ()):
            dependent = self.tasks[dependent_id]
            dependent.unfinished_deps += delta
            if delta < 0:
                self.refresh_ready(dependent)

    def _count_pending(self, task: TaskRecord, sign: int) -> None:
        """Add or remove the task's contribution to its workers' ``count_pending`` counters."""
        if task.status not in COUNTED_STATUSES or not task.workers:
            return
        unique = len(task.workers) == 1
        for worker_id in task.workers:
            counts = self.workers[worker_id].pending_counts[task.status]
            counts[0] += sign
            if unique:
                counts[1] += sign
        self.workers[next(reversed(task.workers))].pending_counts[task.status][2] += sign

    @staticmethod
    def _discard_from(index: dict[str, set[str]], key: str, task_id: str) -> None:
        members = index.get(key)
        if members is not None:
            members.discard(task_id)
            if not members:
                del index[key]


class SimpleTaskState(SchedulerState):
    """Luigi's name for the state, built as Luigi builds it: ``SimpleTaskState(state_path)`` (the
    ``[scheduler]`` defaults and the system clock; the state is kept by the Scheduler's store, not here)."""

    def __init__(self, state_path: str) -> None:
        super().__init__(SchedulerConfig(state_path=state_path), system_time)


def _new_record(
    task_id: str, status: str, now: float, retry_policy: TaskRetryPolicy, priority: float, **fields: Any
) -> TaskRecord:
    """A task record first known ``now`` (created and updated then)."""
    return TaskRecord(
        id=task_id,
        status=status,
        created=now,
        updated=now,
        retry_policy=retry_policy,
        priority=priority,
        **fields,
    )


def rank_key(task: TaskRecord) -> RankKey:
    """Grant order: highest priority, then oldest, then task id."""
    return (-task.priority, task.created, task.id)
