"""Workers (LUIGI_COMPAT f.2, f.5): liveness, disconnects, task removal, messages and the worker list."""

from __future__ import annotations

import pytest
from helpers.scheduler import START, WORKER, granted, make_scheduler, status_of

from luigi.scheduler import ManualClock

OTHER = "other-worker"


def test_a_silent_workers_running_task_fails_then_is_retried_after_retry_delay():
    sch, clock = make_scheduler(worker_disconnect_delay=60, retry_delay=900, remove_delay=10**6)
    sch.add_task(worker=WORKER, task_id="A")
    sch.add_task(worker=OTHER, task_id="A")
    assert granted(sch) == "A"
    clock.advance(60)
    sch.ping(worker=OTHER)
    sch.prune()
    assert status_of(sch, "A") == "RUNNING"  # silent for exactly worker_disconnect_delay: not yet gone
    clock.advance(1)
    sch.prune()
    assert status_of(sch, "A") == "FAILED"
    assert sch.task_list("FAILED")["A"]["worker_running"] is None
    clock.advance(901)
    sch.ping(worker=OTHER)
    sch.prune()
    assert status_of(sch, "A") == "PENDING"
    assert granted(sch, OTHER) == "A"


def test_pings_keep_a_worker_and_its_running_task_alive():
    sch, clock = make_scheduler(worker_disconnect_delay=60)
    sch.add_task(worker=WORKER, task_id="A")
    granted(sch)
    for _ in range(10):
        clock.advance(50)
        assert sch.ping(worker=WORKER) == {"rpc_messages": []}
        sch.prune()
    assert status_of(sch, "A") == "RUNNING"


class SlowClock(ManualClock):
    """A clock that moves 30 s at each reading while ``slow``: a report that takes long to apply."""

    slow = True

    def __call__(self) -> float:
        self.now += 30 if self.slow else 0
        return self.now


def test_a_worker_is_seen_when_its_long_report_is_applied_not_only_when_it_arrived():
    clock = SlowClock(START)
    sch, _ = make_scheduler(clock, worker_disconnect_delay=60)
    sch.add_task(worker=WORKER, task_id="Wide", deps=[f"Leaf_{n}" for n in range(100)])
    clock.slow = False
    applied = clock.now
    assert applied - START > 60  # the report took longer than the disconnect delay
    sch.prune()
    assert {worker["name"] for worker in sch.worker_list()} == {WORKER}
    assert sch.worker_list()[0]["last_active"] >= applied


def test_tasks_nobody_wants_are_removed_after_remove_delay():
    sch, clock = make_scheduler(worker_disconnect_delay=60, remove_delay=600)
    sch.add_task(worker=WORKER, task_id="A", deps=["B"])
    clock.advance(61)
    sch.prune()  # the worker is gone: A and B have no stakeholders from now on
    clock.advance(599)
    sch.prune()
    assert status_of(sch, "A") == "PENDING"
    clock.advance(1)
    sch.prune()
    assert status_of(sch, "A") is None and status_of(sch, "B") is None


def test_a_task_added_again_is_no_longer_due_for_removal():
    sch, clock = make_scheduler(worker_disconnect_delay=60, remove_delay=600)
    sch.add_task(worker=WORKER, task_id="A")
    clock.advance(61)
    sch.prune()
    clock.advance(300)
    sch.add_task(worker=OTHER, task_id="A")
    clock.advance(1000)
    sch.ping(worker=OTHER)
    sch.prune()
    assert status_of(sch, "A") == "PENDING"


def test_removing_a_done_dependency_makes_its_dependent_wait_again():
    sch, clock = make_scheduler(worker_disconnect_delay=60, remove_delay=10)
    sch.add_task(worker=WORKER, task_id="Dep", status="DONE")
    clock.advance(61)
    sch.prune()
    clock.advance(11)
    sch.prune()
    sch.add_task(worker=OTHER, task_id="A", deps=["Dep"])
    assert status_of(sch, "Dep") == "UNKNOWN"
    assert granted(sch, OTHER) is None


def test_a_task_run_by_an_assistant_fails_when_the_assistant_goes_silent():
    sch, clock = make_scheduler(worker_disconnect_delay=60)
    sch.add_task(worker=WORKER, task_id="A")
    assert granted(sch, "helper", assistant=True) == "A"
    clock.advance(40)
    sch.ping(worker=WORKER)
    sch.prune()
    assert status_of(sch, "A") == "RUNNING"
    clock.advance(30)
    sch.ping(worker=WORKER)
    sch.prune()
    assert status_of(sch, "A") == "FAILED"


def test_a_task_running_on_a_worker_that_is_not_its_stakeholder_fails_at_the_next_prune():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="A", assistant=True)  # added without stake
    assert granted(sch) == "A"
    sch.prune()
    assert status_of(sch, "A") == "FAILED"


def test_scheduler_messages_round_trip_through_ping():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="A", accepts_messages=True)
    granted(sch)
    assert sch.task_list("RUNNING")["A"]["accepts_messages"] is True
    message_id = sch.send_scheduler_message(worker=WORKER, task="A", content="hello")["message_id"]
    assert sch.ping(worker=WORKER) == {
        "rpc_messages": [
            {
                "name": "dispatch_scheduler_message",
                "kwargs": {"task_id": "A", "message_id": message_id, "content": "hello"},
            }
        ]
    }
    assert sch.ping(worker=WORKER) == {"rpc_messages": []}
    assert sch.get_scheduler_message_response(task_id="A", message_id=message_id) == {"response": None}
    sch.add_scheduler_message_response(task_id="A", message_id=message_id, response="hi back")
    assert sch.get_scheduler_message_response(task_id="A", message_id=message_id) == {"response": "hi back"}
    assert sch.get_scheduler_message_response(task_id="A", message_id=message_id) == {"response": None}


def test_no_messages_are_sent_when_send_messages_is_off():
    sch, _ = make_scheduler(send_messages=False)
    sch.add_task(worker=WORKER, task_id="A", accepts_messages=True)
    granted(sch)
    assert sch.send_scheduler_message(worker=WORKER, task="A", content="hello") == {"message_id": None}
    assert sch.ping(worker=WORKER) == {"rpc_messages": []}
    assert "accepts_messages" not in sch.task_list("RUNNING")["A"]


def test_set_worker_processes_is_delivered_on_the_next_ping():
    sch, _ = make_scheduler()
    sch.set_worker_processes(worker=WORKER, n=4)
    assert sch.worker_list()[0]["num_unread_rpc_messages"] == 1
    assert sch.ping(worker=WORKER) == {"rpc_messages": [{"name": "set_worker_processes", "kwargs": {"n": 4}}]}


def test_the_worker_list_shows_newest_workers_first_with_info_and_work():
    sch, clock = make_scheduler()
    sch.add_worker(worker=WORKER, info=[["host", "box1"], ["workers", 2], ["first_task", "A"]])
    clock.advance(1)
    sch.add_worker(worker=OTHER, info={"host": "box2"})
    sch.add_task(worker=WORKER, task_id="A", family="Fam", params={"x": "1"})
    sch.add_task(worker=WORKER, task_id="B")
    sch.add_task(worker=OTHER, task_id="B")
    granted(sch)
    workers = sch.worker_list()
    assert [w["name"] for w in workers] == [OTHER, WORKER]
    mine = workers[1]
    assert {k: mine[k] for k in ("host", "workers", "state", "first_task_display_name")} == {
        "host": "box1",
        "workers": 2,
        "state": "active",
        "first_task_display_name": "Fam(x=1)",
    }
    assert (mine["num_running"], mine["num_pending"], mine["num_uniques"]) == (1, 1, 0)
    assert list(mine["running"]) == ["A"]
    assert "running" not in sch.worker_list(include_running=False)[0]


def test_disabled_workers_are_listed_as_disabled():
    sch, _ = make_scheduler()
    sch.add_worker(worker=WORKER, info={})
    sch.disable_worker(worker=WORKER)
    assert sch.worker_list()[0]["state"] == "disabled"


def test_worker_info_of_the_wrong_shape_is_refused():
    sch, _ = make_scheduler()
    with pytest.raises(ValueError, match="add_worker myworker: info must be"):
        sch.add_worker(worker=WORKER, info=[1, 2, 3])
