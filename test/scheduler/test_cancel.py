"""``cancel_task``: an operator cancels a RUNNING task; its worker kills the run, which FAILS and is not
retried until forgiven."""

from __future__ import annotations

import json

from helpers.scheduler import WORKER, granted, make_scheduler, status_of

from luigi.scheduler import Scheduler
from luigi.scheduler.extensions import CANCEL_MESSAGE, CANCELLED_EXPLANATION

RETRY_DELAY = 60.0


def running(task_id: str = "A", **options: object) -> tuple[Scheduler, object]:
    sch, clock = make_scheduler(retry_delay=RETRY_DELAY, **options)
    sch.add_task(worker=WORKER, task_id=task_id)
    assert granted(sch) == task_id
    return sch, clock


def fail_as_cancelled(sch: Scheduler, task_id: str = "A") -> None:
    """What the worker reports once it has killed the run."""
    sch.add_task(worker=WORKER, task_id=task_id, status="FAILED", expl=f'"{CANCELLED_EXPLANATION}"')


def test_cancelling_a_running_task_asks_its_worker_at_the_next_ping():
    sch, _ = running()
    assert sch.cancel_task(task_id="A") == {"task_id": "A", "status": "RUNNING", "cancel_requested": True}
    messages = sch.ping(worker=WORKER)["rpc_messages"]
    assert messages == [{"name": CANCEL_MESSAGE, "kwargs": {"task_id": "A", "reason": CANCELLED_EXPLANATION}}]
    assert status_of(sch, "A") == "RUNNING"  # until the worker has killed the run and reports it


def test_cancelling_an_unknown_task_says_so_and_changes_nothing():
    sch, _ = running()
    answer = sch.cancel_task(task_id="Nope")
    assert answer["cancel_requested"] is False
    assert answer["status"] is None
    assert "no task 'Nope' is known" in answer["problem"]
    assert sch.ping(worker=WORKER)["rpc_messages"] == []


def test_cancelling_a_task_that_is_not_running_says_so_and_changes_nothing():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="P")
    answer = sch.cancel_task(task_id="P")
    assert answer["cancel_requested"] is False
    assert answer["problem"] == "task 'P' is PENDING, not RUNNING: only a running task can be cancelled"
    assert status_of(sch, "P") == "PENDING"
    assert sch.ping(worker=WORKER)["rpc_messages"] == []
    assert sch._state.tasks["P"].cancel_requested is None


def test_a_cancelled_run_fails_with_its_explanation_and_is_not_retried_after_the_retry_delay():
    sch, clock = running()
    sch.cancel_task(task_id="A")
    fail_as_cancelled(sch)
    assert status_of(sch, "A") == "FAILED"
    assert json.loads(sch.fetch_error(task_id="A")["error"]) == CANCELLED_EXPLANATION  # Luigi's JSON text
    clock.advance(RETRY_DELAY * 10)
    sch.prune()
    assert status_of(sch, "A") == "FAILED"
    assert granted(sch) is None


def test_a_cancelled_task_whose_worker_vanished_fails_and_is_not_retried():
    sch, clock = running()
    sch.cancel_task(task_id="A")
    clock.advance(sch.config.worker_disconnect_delay + 1)
    sch.prune()
    assert status_of(sch, "A") == "FAILED"
    clock.advance(RETRY_DELAY * 2)  # (within remove_delay: the task nobody wants is still kept)
    sch.prune()
    assert status_of(sch, "A") == "FAILED"


def test_an_older_retry_of_the_task_does_not_bring_a_cancelled_failure_back():
    sch, clock = running()
    sch.add_task(worker=WORKER, task_id="A", status="FAILED")  # an ordinary failure: retry due later
    sch.forgive_failures(task_id="A")
    assert granted(sch) == "A"
    sch.cancel_task(task_id="A")
    fail_as_cancelled(sch)
    clock.advance(RETRY_DELAY * 10)  # past the first failure's retry time too
    sch.prune()
    assert status_of(sch, "A") == "FAILED"


def test_forgiving_a_cancelled_task_makes_it_runnable_and_its_next_failure_is_retried_again():
    sch, clock = running()
    sch.cancel_task(task_id="A")
    fail_as_cancelled(sch)
    assert sch.forgive_failures(task_id="A") == {"task_id": "A", "status": "PENDING"}
    assert sch._state.tasks["A"].cancel_requested is None
    assert granted(sch) == "A"
    sch.add_task(worker=WORKER, task_id="A", status="FAILED")
    clock.advance(RETRY_DELAY + 1)
    sch.prune()
    assert status_of(sch, "A") == "PENDING"


def test_a_run_that_finished_before_the_kill_is_done_and_the_request_forgotten():
    sch, _ = running()
    sch.cancel_task(task_id="A")
    sch.add_task(worker=WORKER, task_id="A", status="DONE")
    assert status_of(sch, "A") == "DONE"
    assert sch._state.tasks["A"].cancel_requested is None
