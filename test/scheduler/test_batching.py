"""Batching (LUIGI_COMPAT f.4 steps 10-12, f.3 batch rules): one run for many pending tasks."""

from __future__ import annotations

import hashlib

from helpers.scheduler import WORKER, granted, make_scheduler, status_of

from luigi.scheduler import Scheduler


def add_days(sch: Scheduler, days, kind="x", resources=None, batchable=True, family="Daily") -> list[str]:
    ids = []
    for day in days:
        task_id = f"{family}_{kind}_{day}"
        sch.add_task(
            worker=WORKER,
            task_id=task_id,
            family=family,
            params={"day": str(day), "kind": kind},
            batchable=batchable,
            resources=resources,
        )
        ids.append(task_id)
    return ids


def batching_scheduler(max_batch_size=float("inf"), **options):
    sch, clock = make_scheduler(**options)
    sch.add_task_batcher(
        worker=WORKER, task_family="Daily", batched_args=["day"], max_batch_size=max_batch_size
    )
    return sch, clock


def test_pending_tasks_of_a_batched_family_are_granted_as_one_batch():
    sch, _ = batching_scheduler(max_batch_size=3)
    ids = add_days(sch, [1, 2, 3, 4])
    reply = sch.get_work(worker=WORKER)
    expected_id = hashlib.md5("|".join(ids[:3]).encode()).hexdigest()
    assert reply["task_id"] is None
    assert reply["batch_id"] == expected_id
    assert reply["batch_task_ids"] == ids[:3]
    assert reply["task_family"] == "Daily"
    assert reply["task_params"] == {"day": ["1", "2", "3"], "kind": "x"}
    assert [status_of(sch, task_id) for task_id in ids] == ["BATCH_RUNNING"] * 3 + ["PENDING"]


def test_tasks_differing_in_unbatched_params_or_resources_are_not_batched_together():
    sch, _ = batching_scheduler(resources={"r": 5})
    add_days(sch, [1, 2], kind="x")
    add_days(sch, [3], kind="y")
    add_days(sch, [4], kind="x", resources={"r": 1})
    assert sch.get_work(worker=WORKER)["batch_task_ids"] == ["Daily_x_1", "Daily_x_2"]


def test_non_batchable_tasks_and_families_without_a_batcher_run_alone():
    sch, _ = batching_scheduler()
    add_days(sch, [1, 2], batchable=False)
    add_days(sch, [1, 2], family="Other")
    assert [granted(sch) for _ in range(4)] == ["Daily_x_1", "Daily_x_2", "Other_x_1", "Other_x_2"]


def start_batch(sch: Scheduler, leader: str = "Daily_combined") -> tuple[str, list[str]]:
    reply = sch.get_work(worker=WORKER)
    sch.add_task(worker=WORKER, task_id=leader, status="RUNNING", batch_id=reply["batch_id"], family="Daily")
    return reply["batch_id"], reply["batch_task_ids"]


def test_the_batch_leader_takes_over_the_members_resources():
    sch, _ = batching_scheduler(resources={"r": 2})
    add_days(sch, [1, 2], resources={"r": 1})
    start_batch(sch)
    assert sch.get_running_task_resources(task_id="Daily_combined")["resources"] == {"r": 1}
    assert sch.task_list("RUNNING")["Daily_combined"]["worker_running"] == WORKER


def test_the_leaders_final_status_is_given_to_every_member():
    for final in ("DONE", "FAILED"):
        sch, _ = batching_scheduler()
        ids = add_days(sch, [1, 2, 3])
        start_batch(sch)
        sch.add_task(worker=WORKER, task_id="Daily_combined", status=final, expl='"why"')
        assert {status_of(sch, task_id) for task_id in ids} == {final}


def test_the_leader_may_be_one_of_the_members():
    sch, _ = batching_scheduler()
    ids = add_days(sch, [1, 2, 3])
    start_batch(sch, leader=ids[-1])
    assert status_of(sch, ids[-1]) == "RUNNING"
    sch.add_task(worker=WORKER, task_id=ids[-1], status="DONE")
    assert {status_of(sch, task_id) for task_id in ids} == {"DONE"}


def test_status_messages_progress_and_tracking_urls_reach_the_members():
    sch, _ = batching_scheduler()
    ids = add_days(sch, [1, 2])
    start_batch(sch)
    sch.set_task_status_message(task_id="Daily_combined", status_message="halfway")
    sch.set_task_progress_percentage(task_id="Daily_combined", progress_percentage=50)
    sch.add_task(worker=WORKER, task_id="Daily_combined", status="RUNNING", tracking_url="http://t/1")
    for task_id in ids:
        assert sch.get_task_status_message(task_id=task_id) == {"taskId": task_id, "statusMessage": "halfway"}
        assert sch.get_task_progress_percentage(task_id=task_id) == {
            "taskId": task_id,
            "progressPercentage": 50,
        }
        assert sch.task_list("BATCH_RUNNING")[task_id]["tracking_url"] == "http://t/1"


def test_members_of_a_batch_that_never_started_go_back_to_pending():
    sch, _ = batching_scheduler()
    ids = add_days(sch, [1, 2])
    sch.get_work(worker=WORKER)  # the batch grant is lost on the way
    sch.get_work(worker=WORKER, current_tasks=[])
    assert [status_of(sch, task_id) for task_id in ids] == ["BATCH_RUNNING"] * 2  # just re-granted
    reply = sch.get_work(worker=WORKER, current_tasks=[])
    assert reply["batch_task_ids"] == ids


def test_a_started_batch_is_kept_while_its_leader_runs():
    sch, _ = batching_scheduler()
    ids = add_days(sch, [1, 2])
    start_batch(sch)
    reply = sch.get_work(worker=WORKER, current_tasks=["Daily_combined"])
    assert reply["task_id"] is None and "batch_id" not in reply
    assert [status_of(sch, task_id) for task_id in ids] == ["BATCH_RUNNING"] * 2


def test_a_failed_combined_task_that_is_not_batchable_itself_is_removed():
    sch, clock = batching_scheduler()
    add_days(sch, [1, 2])
    start_batch(sch)
    sch.add_task(worker=WORKER, task_id="Daily_combined", status="FAILED")
    clock.advance(1)
    sch.prune()
    assert status_of(sch, "Daily_combined") is None
    assert status_of(sch, "Daily_x_1") == "FAILED"
