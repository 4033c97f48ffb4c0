"""Status changes with Luigi's rules: disabling after repeated failures, re-enabling, batch propagation."""

from __future__ import annotations

import logging
from collections.abc import Callable

from luigi.scheduler.model.records import TaskRecord
from luigi.scheduler.model.state import ACTIVE_RUN_STATUSES, SchedulerState
from luigi.scheduler.rules import leases, policy
from luigi.task_status import BATCH_RUNNING, DISABLED, DONE, FAILED, PENDING, RUNNING

logger = logging.getLogger("luigi.scheduler")

# notifier(subject, message, owners): told when the scheduler disables a task.
Notifier = Callable[[str, str, list[str]], None]


class StatusRules:
    """Applies a requested status to a task the way Luigi's ``set_status`` does."""

    def __init__(self, state: SchedulerState, notifier: Notifier) -> None:
        self.state = state
        self.config = state.config
        self.notifier = notifier

    def set_status(self, task: TaskRecord, new_status: str) -> None:
        """Move ``task`` towards ``new_status``, applying the DISABLED, FAILED and batch rules."""
        if new_status == DISABLED and task.status in ACTIVE_RUN_STATUSES:
            return
        remove_on_failure = task.batch_id is not None and not task.batchable
        if task.status == DISABLED:
            if new_status == DONE:
                self.re_enable(task, to_failed=False)
            elif task.scheduler_disable_time is not None and new_status != DISABLED:
                return  # workers may not override a scheduler disable before it expires
        if task.status == RUNNING and task.batch_id is not None and new_status != RUNNING:
            self._end_batch(task, new_status)
        if new_status != PENDING:
            leases.forget_loss(self.state, task)  # a report or a start ends a lost run's lease
        now = self.state.clock()
        old_status = task.status
        if new_status == FAILED and task.status != DISABLED:
            self.state.record_failure(task, now)
            if policy.has_excessive_failures(task, now):
                self.state.set_scheduler_disabled(task, now)
                new_status = DISABLED
                if not self.config.batch_emails:
                    self._notify_disabled(task)
        elif new_status == DISABLED:
            self.state.set_scheduler_disabled(task, None)  # an explicit disable lasts until DONE
        self.state.change_status(task, new_status)
        if new_status != old_status:
            self._report_transition(task, new_status)
        if new_status == FAILED and task.cancel_requested is not None:
            self.state.clear_retry(task)  # cancelled by an operator: run again only when forgiven
        elif new_status == FAILED:
            self.state.set_retry(task, now + policy.retry_delay(task, self.config.retry_delay))
            if remove_on_failure:
                self.state.set_removal(task, now)

    def re_enable(self, task: TaskRecord, to_failed: bool = True) -> None:
        """Lift a disable and forget the failures; ``to_failed`` then retries it like a failed task."""
        self.state.set_scheduler_disabled(task, None)
        self.state.clear_failures(task)
        if to_failed:
            self.set_status(task, FAILED)
            self.state.clear_failures(task)

    def start_batch_member(self, task: TaskRecord, batch_id: str, worker_id: str) -> None:
        """Mark a task as running inside a batch led by another (combined) task."""
        self.set_status(task, BATCH_RUNNING)
        self.state.set_batch_id(task, batch_id)
        self.state.start_run(task, worker_id, dict(task.resources))

    def put_back(self, task: TaskRecord) -> None:
        """A RUNNING task granted ahead of a dependency that did not finish DONE never started: PENDING."""
        logger.info("Task %r was granted ahead of a dependency that did not finish: back to PENDING", task.id)
        self.state.clear_runner(task, release=True)
        self.set_status(task, PENDING)

    def fail_if_runner_lost(self, task: TaskRecord, assistants: set[str]) -> None:
        """A running task whose worker is neither a stakeholder nor an assistant any more has FAILED
        (one still waiting for a dependency was granted ahead of it and never started: PENDING)."""
        runner = task.worker_running
        if task.status not in ACTIVE_RUN_STATUSES or not runner:
            return
        if runner in task.stakeholders or runner in assistants:
            return
        renewable = task.status == RUNNING and task.batch_id is None
        finder = self.state.done_elsewhere.get(task.id) if renewable else None
        if finder is not None:
            logger.info(
                "Task %r is marked as running by disconnected worker %r and was found complete by %r "
                "meanwhile -> marking as DONE",
                task.id,
                runner,
                finder,
            )
            self.state.clear_runner(task, release=False)
            self.set_status(task, DONE)
            return
        if task.status == RUNNING and (task.unfinished_deps or task.granted_ahead):
            ahead = task.granted_ahead
            self.put_back(task)  # it was waiting in the lost worker's queue: never started
            if renewable and task.status == PENDING:
                leases.record_loss(self.state, task, runner, ahead, None)
            return
        logger.info(
            "Task %r is marked as running by disconnected worker %r -> marking as FAILED "
            "with retry delay of %rs",
            task.id,
            runner,
            self.config.retry_delay,
        )
        self.state.clear_runner(task, release=False)
        self.set_status(task, FAILED)
        if renewable and task.status == FAILED:  # (not when the failure disabled it)
            failed_at = task.failure_times[-1] if task.failure_times else None
            leases.record_loss(self.state, task, runner, False, failed_at)

    def _end_batch(self, leader: TaskRecord, new_status: str) -> None:
        """The batch leader finished: its members take the same status and leave the batch."""
        assert leader.batch_id is not None
        for member in self.state.batch_members(leader.batch_id):
            if member is not leader:
                self.set_status(member, new_status)
                self.state.set_batch_id(member, None)
        self.state.set_batch_id(leader, None)

    def _report_transition(self, task: TaskRecord, new_status: str) -> None:
        """Tell the metrics collector that the task became DISABLED, DONE or FAILED."""
        metrics = self.state.metrics
        try:
            if new_status == DONE:
                metrics.handle_task_done(self.state.task_view(task))
            elif new_status == FAILED:
                metrics.handle_task_failed(self.state.task_view(task))
            elif new_status == DISABLED:
                metrics.handle_task_disabled(self.state.task_view(task), self.config)
        except Exception:  # a collector is a plug-in: its bug must not stop a status change half-way
            logger.exception("Metrics collector failed on %s becoming %s", task.id, new_status)

    def _notify_disabled(self, task: TaskRecord) -> None:
        subject, body = policy.disable_email(task, self.config.disable_persist)
        try:
            self.notifier(subject, body, list(task.owners))
        except Exception:  # a broken mail setup must not break scheduling: log it with the task
            logger.exception("Could not send the notice that task %s was disabled", task.id)


def reset_orphaned_batch_members(state: SchedulerState, rules: StatusRules, worker_id: str) -> None:
    """BATCH_RUNNING tasks of ``worker_id`` whose batch has no RUNNING leader go back to PENDING."""
    if not state.by_status[BATCH_RUNNING]:
        return  # no batch runs: nothing to look for (every get_work asks)
    led = {t.batch_id for t in state.tasks_with_status(RUNNING) if t.worker_running == worker_id}
    for task in state.tasks_with_status(BATCH_RUNNING):
        if task.worker_running == worker_id and task.batch_id not in led:
            rules.set_status(task, PENDING)
            state.set_batch_id(task, None)
