"""The state's two notes stay apart: ``recheck`` (for the next prune) and ``mark_changed`` (for the next
flush), and every write an RPC makes to a task reaches the flush through the model's methods."""

from __future__ import annotations

import ast
import dataclasses
import gc
from pathlib import Path

import pytest
from helpers.scheduler import WORKER, make_scheduler

import luigi.scheduler.rules
from luigi.scheduler.model.changes import ChangeSet
from luigi.scheduler.model.records import TaskRecord, WorkerRecord
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


def test_a_lost_run_and_its_renewed_lease_reach_the_flush_through_the_state():
    sch, state, clock = tracked_scheduler()
    assert sch.get_work(worker=WORKER)["task_id"] == "A"
    clock.advance(sch.config.worker_disconnect_delay + 1)
    sch.prune()  # the silent worker loses its run: the lease it lost is remembered, and stored
    assert state.tasks["A"].lost_lease is not None and state.tasks["A"].failure_times
    assert "A" in state.changes.tasks
    state.changes.clear()
    sch.ping(
        worker=WORKER, held=["A"]
    )  # it comes back holding A: the lease is renewed, the failure taken back
    task = state.tasks["A"]
    assert (task.lost_lease, task.failure_times, task.first_failure_time) == (None, [], None)
    assert state.changes.tasks == {"A": None}


# The locals in rules that carry record field names but are not records: an intake report and a reply.
NOT_RECORDS = {("intake.py", "report"), ("get_work.py", "started")}
MUTATORS = {"append", "remove", "pop", "clear", "update", "discard", "add", "extend", "insert", "setdefault"}


def record_writes_in(path: Path) -> list[str]:
    """Each statement of a rules module that assigns, deletes or mutates a record's field itself."""
    fields = {f.name for f in dataclasses.fields(TaskRecord)} | {
        f.name for f in dataclasses.fields(WorkerRecord)
    }
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS
        ):
            targets = [node.func.value]
        else:
            continue
        for target in targets:
            while isinstance(target, ast.Subscript):
                target = target.value
            if not isinstance(target, ast.Attribute) or target.attr not in fields:
                continue
            owner = ast.unparse(target.value)
            if owner != "self" and (path.name, owner) not in NOT_RECORDS:
                found.append(f"{path.name}:{node.lineno}: {ast.unparse(target)}")
    return found


def test_rules_write_records_only_through_the_state():
    rules = Path(luigi.scheduler.rules.__file__).parent
    assert [write for path in sorted(rules.glob("*.py")) for write in record_writes_in(path)] == []


def test_tasks_with_the_same_worker_stakeholder_visibilities_and_no_deps_share_one_container_each():
    # A million tasks of one run hold the same few things: one object each, not one per task.
    sch, _ = make_scheduler()
    for task_id in ("A", "B"):
        sch.add_task(
            worker=WORKER, task_id=task_id, family="F", params={"p": task_id}, param_visibilities={"p": 0}
        )
    a, b = sch._state.tasks["A"], sch._state.tasks["B"]

    for field in (
        "workers",
        "stakeholders",
        "param_visibilities",
        "resources",
        "deps",
        "owners",
        "failure_times",
    ):
        assert getattr(a, field) is getattr(b, field), field
    assert a.params == {"p": "A"} and b.params == {"p": "B"}


def test_a_shared_container_refuses_a_write_in_place_and_the_state_replaces_it_instead():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="A")
    sch.add_task(worker=WORKER, task_id="B")
    a = sch._state.tasks["A"]
    with pytest.raises(TypeError, match="shared between scheduler records and read-only"):
        a.workers["intruder"] = None  # type: ignore[index]
    with pytest.raises(TypeError, match="replace the field through SchedulerState"):
        a.failure_times.append(1.0)

    sch.add_task(worker="w2", task_id="A")
    assert list(a.workers) == [WORKER, "w2"] and list(sch._state.tasks["B"].workers) == [WORKER]


@pytest.mark.parametrize("collector_on", [True, False])
def test_stubs_made_at_once_leave_the_garbage_collector_as_it_was(collector_on):
    sch, _ = make_scheduler()
    was_on = gc.isenabled()
    (gc.enable if collector_on else gc.disable)()
    try:
        sch.add_task(worker=WORKER, task_id="Wide", deps=[f"Leaf_{n}" for n in range(1_000)])
        assert gc.isenabled() is collector_on
    finally:
        (gc.enable if was_on else gc.disable)()
    assert len(sch.task_list("UNKNOWN", "", limit=False)) == 1_000
