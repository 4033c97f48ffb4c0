"""Leases that mean what they say (issue 16, point 4), on a manual clock.

Grants made ahead that a lost worker never started go back to PENDING, not FAILED. A worker that was cut
off and comes back cannot overwrite the run of the worker the task was handed to.
"""

from __future__ import annotations

from helpers.scheduler import add_runnable, lose_silent_workers, make_scheduler, status_of

from luigi.task_status import DONE, FAILED, PENDING, RUNNING

DELAY = 60


def test_grants_made_ahead_that_a_lost_worker_never_started_go_back_to_pending():
    sch, clock = make_scheduler(worker_disconnect_delay=DELAY, retry_delay=900)
    add_runnable(sch, "w1", "A", "B", "C", "D")
    reply = sch.get_work(worker="w1", current_tasks=[], assume_done=["X"], max_tasks=4)
    grants = [reply["task_id"], *(more["task_id"] for more in reply["more_tasks"])]
    assert len(grants) == 4
    # the worker reports the first one running to its end, so the second one has started
    sch.add_task(worker="w1", task_id=grants[0], status=DONE)
    lose_silent_workers(sch, clock)
    statuses = {task_id: status_of(sch, task_id) for task_id in grants}
    assert statuses == {grants[0]: DONE, grants[1]: FAILED, grants[2]: PENDING, grants[3]: PENDING}


def test_an_ordinary_grant_of_a_lost_worker_fails_as_in_luigi():
    sch, clock = make_scheduler(worker_disconnect_delay=DELAY, retry_delay=900)
    add_runnable(sch, "w1", "A")
    assert sch.get_work(worker="w1")["task_id"] == "A"
    lose_silent_workers(sch, clock)
    assert status_of(sch, "A") == FAILED


def test_a_cut_off_workers_late_result_does_not_overwrite_the_new_owners_run():
    sch, clock = make_scheduler(worker_disconnect_delay=DELAY, retry_delay=0)
    add_runnable(sch, "w1", "A")
    add_runnable(sch, "w2", "A")
    assert sch.get_work(worker="w1")["task_id"] == "A"
    lose_silent_workers(sch, clock, worker_alive="w2")  # w1 is cut off: A fails, and is PENDING again
    clock.advance(1)
    sch.prune()
    assert sch.get_work(worker="w2")["task_id"] == "A"
    sch.add_task(worker="w1", task_id="A", status=FAILED)
    assert status_of(sch, "A") == RUNNING
    sch.add_task(worker="w2", task_id="A", status=DONE)
    assert status_of(sch, "A") == DONE


def test_a_cut_off_workers_result_counts_when_nobody_took_the_task_over():
    sch, clock = make_scheduler(worker_disconnect_delay=DELAY, retry_delay=900)
    add_runnable(sch, "w1", "A")
    assert sch.get_work(worker="w1")["task_id"] == "A"
    lose_silent_workers(sch, clock)
    assert status_of(sch, "A") == FAILED
    sch.add_task(worker="w1", task_id="A", status=DONE)
    assert status_of(sch, "A") == DONE


def test_a_running_task_another_worker_found_complete_is_done_once_its_runner_is_lost():
    sch, clock = make_scheduler(worker_disconnect_delay=DELAY, retry_delay=900)
    add_runnable(sch, "w1", "A")
    assert sch.get_work(worker="w1")["task_id"] == "A"
    # w2's graph walk finds A's output there: as in Luigi, only the runner may end the run
    sch.add_task(worker="w2", task_id="A", status=DONE, runnable=False)
    sch.add_task(worker="w2", task_id="B", status=PENDING, runnable=True, deps=["A"])
    assert status_of(sch, "A") == RUNNING
    assert sch.get_work(worker="w2")["task_id"] is None
    # w1 (whose report was lost with it) is never heard of again: A is done, not failed and stranded,
    # since w2 reported it DONE and so is not among the workers that may run it
    lose_silent_workers(sch, clock, worker_alive="w2")
    assert status_of(sch, "A") == DONE
    assert sch.get_work(worker="w2")["task_id"] == "B"


def test_a_claim_that_a_running_task_is_complete_ends_with_that_run():
    sch, clock = make_scheduler(worker_disconnect_delay=DELAY, retry_delay=0)
    add_runnable(sch, "w1", "A")
    assert sch.get_work(worker="w1")["task_id"] == "A"
    sch.add_task(worker="w2", task_id="A", status=DONE, runnable=False)
    sch.add_task(worker="w1", task_id="A", status=FAILED)  # the runner ends its run: its word stands
    assert status_of(sch, "A") == FAILED
    clock.advance(1)
    sch.prune()
    assert sch.get_work(worker="w1")["task_id"] == "A"  # a new run, which nobody found complete
    lose_silent_workers(sch, clock, worker_alive="w2")
    assert status_of(sch, "A") == FAILED
