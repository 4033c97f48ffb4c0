"""Applying a worker's ``add_task`` report to the state (LUIGI_COMPAT f.2 ``add_task`` and f.3 rules)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from luigi.scheduler.hooks import FailureBatcher, record_history
from luigi.scheduler.model.records import TaskRecord, WorkerRecord
from luigi.scheduler.model.state import STATUSES, SchedulerState
from luigi.scheduler.rules.resources import check_resource_amounts
from luigi.scheduler.rules.transitions import StatusRules
from luigi.task_history import TaskHistory
from luigi.task_status import BATCH_RUNNING, DISABLED, DONE, FAILED, PENDING, RUNNING, SUSPENDED

logger = logging.getLogger("luigi.scheduler")


@dataclass
class TaskReport:
    """The arguments of one ``add_task`` call."""

    task_id: str
    worker: str
    status: str = PENDING
    runnable: bool | None = True
    deps: list[str] | None = None
    new_deps: list[str] | None = None
    expl: Any = None
    resources: dict[str, Any] | None = None
    priority: float = 0
    family: str = ""
    module: str | None = None
    params: dict[str, Any] | None = None
    param_visibilities: dict[str, int] | None = None
    accepts_messages: bool | None = False
    assistant: bool = False
    tracking_url: str | None = None
    batchable: bool | None = None
    batch_id: str | None = None
    retry_policy_dict: dict[str, Any] | None = None
    owners: Any = None


class ReportIntake:
    """Creates or updates tasks from worker reports, as Luigi's ``add_task`` does."""

    def __init__(
        self, state: SchedulerState, rules: StatusRules, history: TaskHistory, batcher: FailureBatcher | None
    ) -> None:
        self.state = state
        self.config = state.config
        self.rules = rules
        self.history = history
        self.batcher = batcher

    def apply(self, report: TaskReport) -> None:
        """Record the report: fields, status (if this worker may change it), graph, stake and priority."""
        report.status = _reported_status(report.task_id, report.status)
        resources = report.resources
        if type(resources) is dict and not resources:  # the usual report: nothing to check, a fresh copy
            report.resources = {}
        elif resources is not None:
            report.resources = check_resource_amounts(f"add_task {report.task_id}: resources", resources)
        retry_policy = self.config.retry_policy_for(report.retry_policy_dict)
        reporter = self.state.touch_worker(report.worker)
        task = self._task_for(report, reporter)
        if task is None:
            return
        ends_a_run = task.worker_running == report.worker and report.status in (DONE, FAILED, PENDING)
        self._fill_fields(task, report)
        self._apply_details(task, report)
        self._apply_status(task, report)
        if ends_a_run and task.status != RUNNING:
            self.state.start_next_ahead(task, report.worker)
        if report.status == FAILED and self.config.batch_emails:
            self._queue_failure_email(task, report)
        self._apply_graph(task, report, reporter)
        if task.retry_policy != retry_policy:  # set last: stub tasks learn their policy only here
            self.state.set_fields(task, retry_policy=retry_policy)
        if report.runnable and report.status != FAILED and reporter.enabled:
            self.state.add_task_worker(task, reporter.id)  # the record's id: one string for all its tasks
            self.state.mark_runnable(task)
        self.state.recheck(task.id)
        # Seen again now that the report is applied: a wrapper naming a million dependencies takes a while,
        # and its worker (whose pings wait meanwhile) must not count as silent for that long.
        self.state.note_alive(report.worker)

    def _task_for(self, report: TaskReport, reporter: WorkerRecord) -> TaskRecord | None:
        """The task to update, created if new; None when the report must be ignored."""
        task = self.state.tasks.get(report.task_id)
        if task is None:
            if not reporter.enabled:
                return None
            return self.state.create_task(
                report.task_id,
                PENDING,
                self.config.retry_policy(),
                deps=report.deps,
                priority=report.priority,
                family=report.family,
                module=report.module,
                params=report.params,
                param_visibilities=report.param_visibilities,
                resources=report.resources,
            )
        if not reporter.enabled and task.status != RUNNING:
            return None
        if report.status == PENDING and task.status == DONE and self._recently_done(task):
            return None  # another worker just finished it: this PENDING report is stale
        return task

    def _recently_done(self, task: TaskRecord) -> bool:
        return self.state.clock() - task.updated < self.config.stable_done_cooldown_secs

    def _fill_fields(self, task: TaskRecord, report: TaskReport) -> None:
        """Fill what a stub task lacks and record who runs a task reported RUNNING."""
        state = self.state
        state.fill_missing(task, report.family, report.module, report.params, report.param_visibilities)
        if report.batch_id is not None:
            state.set_batch_id(task, report.batch_id)
        if report.status == RUNNING and not task.worker_running:
            held = None
            if report.batch_id is not None:
                members = state.batch_members(report.batch_id)
                if members:  # the combined task holds the resources its members were granted
                    held = dict(members[0].resources_running or {})
            state.start_run(task, report.worker, held)

    def _apply_details(self, task: TaskRecord, report: TaskReport) -> None:
        """Messages flag, tracking url and explanation (shared with batch members), owners, removal."""
        state = self.state
        members = state.batch_members(task.batch_id) if task.batch_id is not None else []
        if report.accepts_messages is not None and task.accepts_messages != bool(report.accepts_messages):
            state.set_fields(task, accepts_messages=bool(report.accepts_messages))
        if report.tracking_url is not None or task.status != RUNNING:
            for target in [task, *members]:
                if target.tracking_url != report.tracking_url:
                    state.set_fields(target, tracking_url=report.tracking_url)
        if report.batchable is not None and task.batchable != bool(report.batchable):
            state.set_fields(task, batchable=bool(report.batchable))
        if task.remove is not None:
            state.set_removal(task, None)  # wanted again: not to be removed
        if report.expl is not None:
            for target in [task, *members]:
                state.set_fields(target, expl=report.expl)
        if report.owners:
            state.set_fields(task, owners=_owner_list(report.owners))

    def _apply_status(self, task: TaskRecord, report: TaskReport) -> None:
        """Only the worker running a task may change its status, unless it reports new dependencies."""
        status = report.status
        not_running = task.status not in (RUNNING, BATCH_RUNNING)
        started_a_run = status in (DONE, FAILED, RUNNING)
        if not_running or (started_a_run and task.worker_running == report.worker) or report.new_deps:
            if status != task.status or status == PENDING:
                record_history(self.history, task, status)
            self.rules.set_status(task, status)
        elif status == DONE and task.status == RUNNING and task.batch_id is None:
            self.state.note_done_elsewhere(task, report.worker)  # counts if the runner is lost

    def _apply_graph(self, task: TaskRecord, report: TaskReport, reporter: WorkerRecord) -> None:
        """Dependencies, resources, stakeholders (unknown deps become UNKNOWN stubs) and priorities."""
        state = self.state
        if report.deps is not None:
            state.set_deps(task, report.deps)
        if report.new_deps is not None:
            state.add_deps(task, report.new_deps)
        if report.resources is not None:
            state.set_resources(task, report.resources)
        if reporter.enabled and not report.assistant:
            state.add_stakeholder(task, reporter.id)
            unknown = []
            for dep_id in task.deps:
                dep = state.tasks.get(dep_id)
                if dep is None:
                    unknown.append(dep_id)
                else:
                    state.add_stakeholder(dep, reporter.id)
            state.create_stubs(unknown, self.config.retry_policy(), report.priority, reporter.id)
        self._raise_priority(task, report.priority)

    def _raise_priority(self, task: TaskRecord, priority: float) -> None:
        """A task's priority never drops, and flows to every dependency with a lower one."""
        effective = max(priority, task.priority)
        self.state.set_priority(task, effective)
        stack = [task]
        while stack:
            for dep_id in stack.pop().deps:
                dep = self.state.tasks.get(dep_id)
                if dep is not None and effective > dep.priority:
                    self.state.set_priority(dep, effective)
                    stack.append(dep)

    def _queue_failure_email(self, task: TaskRecord, report: TaskReport) -> None:
        if self.batcher is None:
            return
        unbatched = unbatched_params(self.state, report.worker, task.family, task.params)
        try:
            expl = json.loads(report.expl)
        except (TypeError, ValueError):
            expl = report.expl
        try:
            self.batcher.add_failure(task.pretty_id, task.family, unbatched, expl, report.owners)
            if task.status == DISABLED:
                self.batcher.add_disable(task.pretty_id, task.family, unbatched, report.owners)
        except Exception:  # the batcher is replaceable: mail trouble must not fail the worker's report
            logger.exception("Could not queue the batched e-mail about %s", task.id)


def unbatched_params(
    state: SchedulerState, worker: str, family: str, params: dict[str, Any]
) -> dict[str, Any]:
    """``params`` without the ones the worker batches for this family."""
    names, _ = state.batchers.get(worker, {}).get(family, (None, 1))
    return {k: v for k, v in params.items() if k not in names} if names else dict(params)


def _reported_status(task_id: str, status: str) -> str:
    """The status to apply (SUSPENDED is legacy for PENDING), or ValueError for an unknown one."""
    if status == SUSPENDED:
        return PENDING
    if status not in STATUSES:
        expected = ", ".join(STATUSES)
        raise ValueError(f"add_task {task_id}: unknown status {status!r} (expected one of {expected})")
    return status


def _owner_list(owners: Any) -> list[str]:
    """Owners as a list of e-mail addresses (a comma-separated string is accepted)."""
    if isinstance(owners, str):
        return [owner.strip() for owner in owners.split(",") if owner.strip()]
    return [str(owner) for owner in owners]
