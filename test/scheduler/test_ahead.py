"""``get_work(assume_done=...)``: a task waiting only for the asking worker's running tasks is granted
ahead of them, and put back to PENDING when they do not finish DONE."""

from __future__ import annotations

import pytest
from helpers.scheduler import WORKER, granted, make_scheduler, status_of

OTHER = "other-worker"


def chain(sch, *task_ids, worker=WORKER):
    """Tasks each needing the one before (the first needs nothing)."""
    for before, task_id in zip((None, *task_ids), task_ids, strict=False):
        sch.add_task(worker=worker, task_id=task_id, deps=[before] if before else [])


def test_the_next_link_of_a_chain_is_granted_ahead_of_the_running_one_and_the_reply_says_so():
    sch, _ = make_scheduler()
    chain(sch, "A", "B", "C")
    assert granted(sch) == "A"
    assert granted(sch, current_tasks=["A"]) is None  # the ordinary ask: B is not ready

    reply = sch.get_work(worker=WORKER, current_tasks=["A"], assume_done=["A"])
    assert (reply["task_id"], reply["assumes_done"]) == ("B", ["A"])
    assert status_of(sch, "B") == "RUNNING"
    assert "assumes_done" not in sch.get_work(worker=WORKER, current_tasks=["A", "B"])


def test_a_ready_task_is_granted_before_one_that_would_be_granted_ahead():
    sch, _ = make_scheduler()
    chain(sch, "A", "B")
    sch.add_task(worker=WORKER, task_id="Z", priority=-1)
    assert granted(sch) == "A"
    reply = sch.get_work(worker=WORKER, current_tasks=["A"], assume_done=["A"])
    assert reply["task_id"] == "Z" and "assumes_done" not in reply


def test_a_task_that_also_waits_for_something_else_is_not_granted_ahead():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="A")
    sch.add_task(worker=WORKER, task_id="B")
    sch.add_task(worker=WORKER, task_id="Join", deps=["A", "Nobody"])  # as many deps as assumed below
    assert granted(sch) == "A"
    assert granted(sch, current_tasks=["A"]) == "B"
    assert granted(sch, current_tasks=["A", "B"], assume_done=["A", "B"]) is None  # Nobody's is UNKNOWN


def test_a_task_waiting_for_several_running_tasks_of_the_worker_is_granted_ahead_of_them_all():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="A")
    sch.add_task(worker=WORKER, task_id="B")
    sch.add_task(worker=WORKER, task_id="Join", deps=["A", "B"])
    assert granted(sch) == "A"
    assert granted(sch, current_tasks=["A"]) == "B"
    assert granted(sch, current_tasks=["A", "B"], assume_done=["A"]) is None  # B is assumed nothing of
    reply = sch.get_work(worker=WORKER, current_tasks=["A", "B"], assume_done=["A", "B"])
    assert (reply["task_id"], reply["assumes_done"]) == ("Join", ["A", "B"])


@pytest.mark.parametrize("case", ["another worker runs it", "nobody runs it"])
def test_only_the_asking_workers_own_running_tasks_may_be_assumed_done(case):
    sch, _ = make_scheduler()
    chain(sch, "A", "B")
    sch.add_task(worker=OTHER, task_id="A")
    if case == "another worker runs it":
        assert granted(sch, OTHER) == "A"
    assert granted(sch, assume_done=["A"]) == ("A" if case == "nobody runs it" else None)
    assert status_of(sch, "B") == "PENDING"


def test_a_task_of_another_worker_is_not_granted_ahead():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="A")
    sch.add_task(worker=OTHER, task_id="B", deps=["A"])
    assert granted(sch) == "A"
    assert granted(sch, current_tasks=["A"], assume_done=["A"]) is None


def test_a_task_whose_resources_the_assumed_task_still_holds_is_not_granted_ahead():
    sch, _ = make_scheduler(resources={"db": 1})
    sch.add_task(worker=WORKER, task_id="A", resources={"db": 1})
    sch.add_task(worker=WORKER, task_id="B", deps=["A"], resources={"db": 1})
    assert granted(sch) == "A"
    assert granted(sch, current_tasks=["A"], assume_done=["A"]) is None


def test_a_task_the_worker_would_batch_is_not_granted_ahead():
    sch, _ = make_scheduler()
    sch.add_task_batcher(worker=WORKER, task_family="Part", batched_args=["n"])
    sch.add_task(worker=WORKER, task_id="A")
    part = {"family": "Part", "params": {"n": "1"}, "batchable": True}
    sch.add_task(worker=WORKER, task_id="Part_1", deps=["A"], **part)
    assert granted(sch) == "A"
    assert granted(sch, current_tasks=["A"], assume_done=["A"]) is None


def test_when_the_assumed_task_fails_the_task_granted_ahead_goes_back_to_pending_and_waits():
    sch, _ = make_scheduler()
    chain(sch, "A", "B")
    sch.add_task(worker=WORKER, task_id="Z", priority=-1)
    assert granted(sch) == "A"
    assert granted(sch, current_tasks=["A"], assume_done=["A"]) == "Z"
    assert granted(sch, current_tasks=["A", "Z"], assume_done=["A"]) == "B"
    sch.add_task(worker=WORKER, task_id="A", status="FAILED")

    assert granted(sch, current_tasks=["Z"]) is None  # the worker did not start B: not sent again
    assert status_of(sch, "B") == "PENDING"
    assert sch._state.tasks["B"].worker_running is None
    assert status_of(sch, "Z") == "RUNNING"  # what the worker does run is left alone


def test_a_task_granted_ahead_whose_answer_was_lost_is_sent_again_once_the_assumed_task_is_done():
    sch, _ = make_scheduler()
    chain(sch, "A", "B")
    assert granted(sch) == "A"
    assert granted(sch, current_tasks=["A"], assume_done=["A"]) == "B"  # this answer never arrives
    sch.add_task(worker=WORKER, task_id="A", status="DONE")
    reply = sch.get_work(worker=WORKER, current_tasks=[])
    assert reply["task_id"] == "B" and "assumes_done" not in reply


def test_a_task_granted_ahead_to_a_worker_that_left_goes_back_to_pending_rather_than_failing():
    sch, clock = make_scheduler(worker_disconnect_delay=10)
    chain(sch, "A", "B")
    assert granted(sch) == "A"
    assert granted(sch, current_tasks=["A"], assume_done=["A"]) == "B"
    clock.advance(11)
    sch.prune()
    assert status_of(sch, "A") == "FAILED"  # it ran, and its worker went silent
    assert status_of(sch, "B") == "PENDING"  # it never started


# -- several tasks in one get_work (max_tasks) ------------------------------------------------------------


def more_ids(reply):
    return [grant["task_id"] for grant in reply["more_tasks"]]


def test_a_worker_asking_for_several_tasks_gets_that_many_ready_ones_in_rank_order():
    sch, _ = make_scheduler()
    for task_id in ["A", "B", "C", "D", "E"]:
        sch.add_task(worker=WORKER, task_id=task_id)
    reply = sch.get_work(worker=WORKER, max_tasks=3)
    assert (reply["task_id"], more_ids(reply)) == ("A", ["B", "C"])
    assert [status_of(sch, t) for t in "ABCDE"] == ["RUNNING"] * 3 + ["PENDING"] * 2
    assert "more_tasks" not in sch.get_work(worker=WORKER)  # a plain get_work: Luigi's reply


def test_several_links_of_a_chain_are_granted_each_ahead_of_the_one_before():
    sch, _ = make_scheduler()
    chain(sch, "A", "B", "C", "D", "E")
    assert granted(sch) == "A"
    reply = sch.get_work(worker=WORKER, current_tasks=["A"], assume_done=["A"], max_tasks=3)
    assert (reply["task_id"], reply["assumes_done"]) == ("B", ["A"])
    assert reply["more_tasks"] == [
        {"task_id": "C", "task_family": "", "task_module": None, "task_params": {}, "assumes_done": ["B"]},
        {"task_id": "D", "task_family": "", "task_module": None, "task_params": {}, "assumes_done": ["C"]},
    ]


def test_when_a_link_fails_every_link_granted_ahead_of_it_goes_back_to_pending():
    sch, _ = make_scheduler()
    chain(sch, "A", "B", "C", "D")
    assert granted(sch) == "A"
    sch.get_work(worker=WORKER, current_tasks=["A"], assume_done=["A"], max_tasks=3)
    sch.add_task(worker=WORKER, task_id="A", status="DONE")
    sch.add_task(worker=WORKER, task_id="B", status="FAILED")
    assert granted(sch, current_tasks=[]) is None
    assert [status_of(sch, t) for t in "ABCD"] == ["DONE", "FAILED", "PENDING", "PENDING"]


def test_the_tasks_one_get_work_grants_are_capped():
    from luigi.scheduler.rules.ahead import MAX_TASKS_PER_GET_WORK

    sch, _ = make_scheduler()
    for n in range(MAX_TASKS_PER_GET_WORK + 5):
        sch.add_task(worker=WORKER, task_id=f"T{n:03}")
    reply = sch.get_work(worker=WORKER, max_tasks=1000)
    assert len(more_ids(reply)) == MAX_TASKS_PER_GET_WORK - 1


def test_further_grants_stop_before_a_batch():
    sch, _ = make_scheduler()
    sch.add_task_batcher(worker=WORKER, task_family="Part", batched_args=["n"])
    sch.add_task(worker=WORKER, task_id="A", priority=10)
    for n in (1, 2):
        sch.add_task(worker=WORKER, task_id=f"Part_{n}", family="Part", params={"n": str(n)}, batchable=True)
    reply = sch.get_work(worker=WORKER, max_tasks=4)
    assert (reply["task_id"], reply["more_tasks"]) == ("A", [])
    assert status_of(sch, "Part_1") == status_of(sch, "Part_2") == "PENDING"  # batched by a get_work


class CountingSet(set):
    """A set that counts the items iterated over."""

    seen = 0

    def __iter__(self):
        for item in super().__iter__():
            CountingSet.seen += 1
            yield item


def test_a_task_with_thousands_of_dependents_has_only_a_bounded_number_looked_at():
    from luigi.scheduler.rules.ahead import AHEAD_SCAN

    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="Setup")
    for n in range(10 * AHEAD_SCAN):
        sch.add_task(worker=WORKER, task_id=f"Part{n:05}", deps=["Setup"])
    assert granted(sch) == "Setup"
    sch._state.dependents["Setup"] = CountingSet(sch._state.dependents["Setup"])
    CountingSet.seen = 0
    reply = sch.get_work(worker=WORKER, current_tasks=["Setup"], assume_done=["Setup"], max_tasks=2)
    assert reply["task_id"].startswith("Part") and len(reply["more_tasks"]) == 1
    assert CountingSet.seen <= 2 * AHEAD_SCAN


def test_further_tasks_go_only_to_a_worker_no_other_could_share_them_with():
    sch, _ = make_scheduler()
    for task_id in ["A", "B", "C"]:
        sch.add_task(worker=WORKER, task_id=task_id)
    sch.add_task(worker=OTHER, task_id="B")  # another worker could run B
    reply = sch.get_work(worker=WORKER, max_tasks=3)
    assert (reply["task_id"], reply["more_tasks"]) == ("A", [])  # B is left for whoever asks next
    assert granted(sch, OTHER) == "B"


def test_no_further_tasks_are_granted_while_an_assistant_could_take_them():
    sch, _ = make_scheduler()
    for task_id in ["A", "B", "C"]:
        sch.add_task(worker=WORKER, task_id=task_id)
    sch.add_worker(OTHER, {"assistant": True})
    reply = sch.get_work(worker=WORKER, max_tasks=3)
    assert (reply["task_id"], reply["more_tasks"]) == ("A", [])
