"""A returning worker is told which of its tasks were handed over, and gets back those nobody took.

Issue 16, point 4: our worker's ``ping`` sends ``held`` (what it runs or holds granted ahead); the reply's
``handed_over`` names the held tasks that are no longer its own. A task the worker lost by being cut off,
that nobody has started since, is given back to it (its lease renewed) instead.
"""

from __future__ import annotations

from helpers.scheduler import add_runnable, lose_silent_workers, make_scheduler, status_of

from luigi.task_status import DISABLED, DONE, FAILED, PENDING, RUNNING

DELAY = 60


def test_a_plain_ping_gets_no_handed_over_list():
    sch, _ = make_scheduler()
    assert "handed_over" not in sch.ping(worker="w1")
    assert sch.ping(worker="w1", held=[]) == {"rpc_messages": [], "handed_over": [], "handed_to": {}}


def test_the_scheduler_says_it_understands_held_tasks():
    sch, _ = make_scheduler()
    assert sch.scheduler_features()["leases"] is True


def test_a_task_running_under_the_worker_is_still_held():
    sch, _ = make_scheduler(worker_disconnect_delay=DELAY)
    add_runnable(sch, "w1", "A")
    assert sch.get_work(worker="w1")["task_id"] == "A"
    assert sch.ping(worker="w1", held=["A"])["handed_over"] == []
    assert status_of(sch, "A") == RUNNING


def test_a_lost_run_nobody_took_over_is_given_back_without_the_failure():
    sch, clock = make_scheduler(worker_disconnect_delay=DELAY, retry_delay=900, retry_count=2)
    add_runnable(sch, "w1", "A")
    assert sch.get_work(worker="w1")["task_id"] == "A"
    lose_silent_workers(sch, clock)
    assert status_of(sch, "A") == FAILED
    assert sch.ping(worker="w1", held=["A"])["handed_over"] == []
    assert status_of(sch, "A") == RUNNING
    assert sch._state.tasks["A"].worker_running == "w1"
    sch.prune()
    assert status_of(sch, "A") == RUNNING  # kept: the worker is a stakeholder again
    sch.add_task(worker="w1", task_id="A", status=FAILED)
    assert status_of(sch, "A") == FAILED  # retry_count 2: had the loss counted, this would disable it


def test_a_lost_run_whose_retry_came_up_is_still_given_back():
    sch, clock = make_scheduler(worker_disconnect_delay=DELAY, retry_delay=0)
    add_runnable(sch, "w1", "A")
    add_runnable(sch, "w2", "A")
    assert sch.get_work(worker="w1")["task_id"] == "A"
    lose_silent_workers(sch, clock, worker_alive="w2")
    clock.advance(1)
    sch.prune()
    assert status_of(sch, "A") == PENDING  # retried, but not granted to anyone yet
    assert sch.ping(worker="w1", held=["A"])["handed_over"] == []
    assert status_of(sch, "A") == RUNNING
    assert sch.get_work(worker="w2")["task_id"] is None  # no double run


def test_a_task_another_worker_started_since_is_handed_over():
    sch, clock = make_scheduler(worker_disconnect_delay=DELAY, retry_delay=0)
    add_runnable(sch, "w1", "A")
    add_runnable(sch, "w2", "A")
    assert sch.get_work(worker="w1")["task_id"] == "A"
    lose_silent_workers(sch, clock, worker_alive="w2")
    clock.advance(1)
    sch.prune()
    assert sch.get_work(worker="w2")["task_id"] == "A"
    reply = sch.ping(worker="w1", held=["A"])
    assert (reply["handed_over"], reply["handed_to"]) == (["A"], {"A": "w2"})
    sch.add_task(worker="w2", task_id="A", status=DONE)
    # once finished by the new owner, it stays handed over
    assert sch.ping(worker="w1", held=["A"])["handed_over"] == ["A"]
    assert status_of(sch, "A") == DONE


def test_a_task_that_failed_for_another_cause_or_is_unknown_is_handed_over():
    sch, clock = make_scheduler(worker_disconnect_delay=DELAY, retry_delay=900)
    add_runnable(sch, "w1", "A", "B")
    assert sch.get_work(worker="w1")["task_id"] in ("A", "B")
    sch.add_task(worker="w2", task_id="B", status=FAILED)  # not running: this report is applied
    held = ["A", "B", "Nope"]
    running = [t for t in held if status_of(sch, t) == RUNNING]
    expected = [t for t in held if t not in running]
    assert sch.ping(worker="w1", held=held)["handed_over"] == expected


def test_a_report_after_the_loss_ends_the_lease():
    sch, clock = make_scheduler(worker_disconnect_delay=DELAY, retry_delay=900)
    add_runnable(sch, "w1", "A")
    assert sch.get_work(worker="w1")["task_id"] == "A"
    lose_silent_workers(sch, clock)
    sch.add_task(worker="w2", task_id="A", status=DISABLED)
    assert sch.ping(worker="w1", held=["A"])["handed_over"] == ["A"]
    assert status_of(sch, "A") == DISABLED


def test_a_put_back_grant_made_ahead_is_given_back_as_a_grant_made_ahead():
    sch, clock = make_scheduler(worker_disconnect_delay=DELAY, retry_delay=900)
    add_runnable(sch, "w1", "A", "B")
    reply = sch.get_work(worker="w1", current_tasks=[], assume_done=["X"], max_tasks=2)
    first, second = reply["task_id"], reply["more_tasks"][0]["task_id"]
    sch.add_task(worker="w1", task_id=first, status=DONE)  # the second has started now
    add_runnable(sch, "w1", "C")
    third = sch.get_work(worker="w1", current_tasks=[second], assume_done=[second], max_tasks=1)["task_id"]
    assert third == "C"
    lose_silent_workers(sch, clock)
    assert (status_of(sch, second), status_of(sch, third)) == (FAILED, PENDING)
    assert sch.ping(worker="w1", held=[second, third])["handed_over"] == []
    assert (status_of(sch, second), status_of(sch, third)) == (RUNNING, RUNNING)
    lose_silent_workers(sch, clock)  # lost again: the grant made ahead goes back to PENDING once more
    assert (status_of(sch, second), status_of(sch, third)) == (FAILED, PENDING)
