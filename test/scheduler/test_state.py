"""The state's two notes stay apart: ``recheck`` (for the next prune) and ``mark_changed`` (for the next
flush), and every write an RPC makes to a task reaches the flush through the model's methods."""

from __future__ import annotations

from helpers.scheduler import WORKER, make_scheduler

from luigi.scheduler.model.changes import ChangeSet
from luigi.scheduler.settings import TaskRetryPolicy


def tracked_scheduler():
    """A scheduler whose state records changes (as with a durable store), with one PENDING task A."""
    sch, clock = make_scheduler()
    sch.add_task(worker=WORKER, task_id="A", family="A")
    state = sch._state
    state.changes = ChangeSet()
    state.to_recheck.clear()
    return sch, state, clock


def test_a_recheck_is_not_a_change_to_persist():
    sch, state, _ = tracked_scheduler()
    state.recheck("A")
    assert state.to_recheck == {"A"}
    assert not state.changes


def test_a_plain_field_write_is_persisted_but_not_rechecked():
    sch, state, _ = tracked_scheduler()
    state.set_fields(state.tasks["A"], expl="boom", tracking_url="http://x")
    assert state.changes.tasks == {"A": None}
    assert state.to_recheck == set()
    assert (state.tasks["A"].expl, state.tasks["A"].tracking_url) == ("boom", "http://x")


def test_starting_a_task_marks_it_for_the_flush_and_the_next_prune():
    sch, state, _ = tracked_scheduler()
    assert sch.get_work(worker=WORKER)["task_id"] == "A"
    assert "A" in state.changes.tasks
    assert "A" in state.to_recheck
    assert state.tasks["A"].worker_running == WORKER


def test_operator_writes_to_a_running_task_are_marked():
    sch, state, _ = tracked_scheduler()
    sch.get_work(worker=WORKER)
    for write in (
        lambda: sch.set_task_status_message("A", "half way"),
        lambda: sch.set_task_progress_percentage("A", 50),
        lambda: sch.add_scheduler_message_response("A", "m1", "yes"),
        lambda: sch.get_scheduler_message_response("A", "m1"),
    ):
        state.changes.clear()
        write()
        assert state.changes.tasks == {"A": None}


def test_a_failure_outside_the_window_is_forgotten_when_the_next_one_is_recorded():
    sch, state, clock = tracked_scheduler()
    task = state.tasks["A"]
    task.retry_policy = TaskRetryPolicy(retry_count=3, disable_hard_timeout=10**9, disable_window=100)
    state.record_failure(task, clock())
    clock.advance(150)
    state.record_failure(task, clock())
    assert task.failure_times == [clock()]
    assert task.first_failure_time == clock() - 150
    assert "A" in state.changes.tasks
