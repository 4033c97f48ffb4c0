"""Which task ``get_work`` hands out (LUIGI_COMPAT f.4) and what ``count_pending`` reports."""

from __future__ import annotations

from helpers.scheduler import WORKER, granted, make_scheduler, run_to_done, status_of

OTHER = "other-worker"


def test_the_highest_priority_task_goes_first():
    sch, _ = make_scheduler()
    for task_id, priority in [("A", 1), ("B", 5), ("C", 3)]:
        sch.add_task(worker=WORKER, task_id=task_id, priority=priority)
    assert run_to_done(sch) == ["B", "C", "A"]


def test_among_equal_priorities_the_oldest_task_goes_first():
    sch, clock = make_scheduler()
    for task_id in ["C", "A", "B"]:
        sch.add_task(worker=WORKER, task_id=task_id)
        clock.advance(1)
    assert run_to_done(sch) == ["C", "A", "B"]


def test_tasks_created_at_the_same_time_go_in_id_order():
    sch, _ = make_scheduler()
    for task_id in ["C", "A", "B"]:
        sch.add_task(worker=WORKER, task_id=task_id)
    assert run_to_done(sch) == ["A", "B", "C"]


def test_a_task_waits_until_all_its_dependencies_are_done():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="A", deps=["B", "C"])
    sch.add_task(worker=WORKER, task_id="B")
    sch.add_task(worker=WORKER, task_id="C")
    assert granted(sch) == "B"
    assert granted(sch) == "C"
    assert granted(sch) is None
    sch.add_task(worker=WORKER, task_id="B", status="DONE")
    assert granted(sch) is None
    sch.add_task(worker=WORKER, task_id="C", status="DONE")
    assert granted(sch) == "A"


def test_a_dependency_nobody_can_run_blocks_its_dependents():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="A", deps=["B"])
    assert status_of(sch, "B") == "UNKNOWN"
    assert granted(sch) is None


def test_dependencies_added_while_running_are_waited_for():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="A")
    assert granted(sch) == "A"
    sch.add_task(worker=WORKER, task_id="A", status="PENDING", new_deps=["B"])
    sch.add_task(worker=WORKER, task_id="B")
    assert run_to_done(sch) == ["B", "A"]


def test_priority_flows_down_to_dependencies():
    sch, clock = make_scheduler()
    sch.add_task(worker=WORKER, task_id="X", priority=5)
    clock.advance(1)
    sch.add_task(worker=WORKER, task_id="T", deps=["D"], priority=10)
    sch.add_task(worker=WORKER, task_id="D", deps=["E"])
    sch.add_task(worker=WORKER, task_id="E")
    assert sch.task_list()["E"]["priority"] == 10
    assert run_to_done(sch) == ["E", "D", "T", "X"]


def test_a_priority_raised_later_reorders_ready_tasks():
    sch, clock = make_scheduler()
    sch.add_task(worker=WORKER, task_id="A")
    clock.advance(1)
    sch.add_task(worker=WORKER, task_id="B")
    sch.add_task(worker=WORKER, task_id="Root", deps=["B"], priority=7)
    assert granted(sch) == "B"


def test_a_tasks_priority_never_drops():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="A", priority=5)
    sch.add_task(worker=WORKER, task_id="A", priority=1)
    assert sch.task_list()["A"]["priority"] == 5


def test_a_worker_only_gets_tasks_it_added_as_runnable():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="A")
    sch.add_task(worker=WORKER, task_id="External", runnable=False)
    assert granted(sch, OTHER) is None
    assert granted(sch) == "A"
    assert granted(sch) is None


def test_a_granted_task_is_running_on_that_worker_with_its_resources():
    sch, clock = make_scheduler(resources={"db": 2})
    sch.add_task(
        worker=WORKER, task_id="A", family="Fam", module="mod", params={"x": "1"}, resources={"db": 1}
    )
    reply = sch.get_work(worker=WORKER, host="box")
    assert (reply["task_id"], reply["task_family"], reply["task_module"], reply["task_params"]) == (
        "A",
        "Fam",
        "mod",
        {"x": "1"},
    )
    task = sch.task_list("RUNNING")["A"]
    assert (task["worker_running"], task["time_running"], task["resources_running"]) == (
        WORKER,
        clock(),
        {"db": 1},
    )


def test_count_pending_counts_pending_and_failed_tasks_unique_and_last_scheduled():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="Shared")
    sch.add_task(worker=OTHER, task_id="Shared")
    sch.add_task(worker=WORKER, task_id="Mine")
    sch.add_task(worker=WORKER, task_id="Failed", status="FAILED")
    sch.add_task(worker=WORKER, task_id="Done", status="DONE")
    assert sch.count_pending(worker=WORKER) == {
        "n_pending_tasks": 2,
        "n_unique_pending": 1,
        "n_pending_last_scheduled": 1,
        "worker_state": "active",
        "running_tasks": [],
    }
    assert sch.count_pending(worker=OTHER)["n_pending_last_scheduled"] == 1


def test_count_pending_lists_running_tasks_with_who_runs_them():
    sch, _ = make_scheduler()
    sch.add_worker(worker=OTHER, info={"host": "box2"})
    sch.add_task(worker=WORKER, task_id="A")
    sch.add_task(worker=OTHER, task_id="A")
    assert granted(sch, OTHER) == "A"
    assert sch.count_pending(worker=WORKER)["running_tasks"] == [
        {"task_id": "A", "worker": OTHER, "host": "box2"}
    ]


def test_count_pending_skips_tasks_behind_a_disabled_task():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="A", deps=["B"])
    sch.add_task(worker=WORKER, task_id="B", deps=["C"])
    sch.add_task(worker=WORKER, task_id="C", status="DISABLED")
    sch.add_task(worker=WORKER, task_id="Free")
    assert sch.count_pending(worker=WORKER)["n_pending_tasks"] == 1
    sch.add_task(worker=WORKER, task_id="C", status="DONE")
    assert sch.count_pending(worker=WORKER)["n_pending_tasks"] == 3


def test_the_get_work_reply_carries_the_counts_from_before_the_grant():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="A")
    reply = sch.get_work(worker=WORKER)
    assert (reply["task_id"], reply["n_pending_tasks"], reply["n_unique_pending"]) == ("A", 1, 1)


def test_a_grant_the_worker_does_not_know_about_is_sent_again():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="A")
    sch.add_task(worker=WORKER, task_id="B")
    assert granted(sch) == "A"
    assert granted(sch, current_tasks=[]) == "A"
    assert granted(sch, current_tasks=["A"]) == "B"
    assert status_of(sch, "A") == "RUNNING"


def test_nothing_is_handed_out_while_paused():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="A")
    assert sch.is_pause_enabled() == {"enabled": True}
    sch.pause()
    assert sch.is_paused() == {"paused": True}
    reply = sch.get_work(worker=WORKER)
    assert (reply["task_id"], reply["n_pending_tasks"]) == (None, 1)
    sch.unpause()
    assert sch.is_paused() == {"paused": False}
    assert granted(sch) == "A"


def test_pause_does_nothing_when_pausing_is_disabled():
    sch, _ = make_scheduler(pause_enabled=False)
    sch.pause()
    assert sch.is_pause_enabled() == {"enabled": False}
    assert sch.is_paused() == {"paused": False}


def test_a_disabled_worker_is_told_so_and_gets_nothing():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="A")
    sch.disable_worker(worker=WORKER)
    assert sch.get_work(worker=WORKER) == {
        "n_pending_tasks": 0,
        "running_tasks": [],
        "task_id": None,
        "n_unique_pending": 0,
        "worker_state": "disabled",
    }
    assert sch.task_list()["A"]["workers"] == []


def test_an_assistant_runs_any_runnable_task_without_becoming_a_stakeholder():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="A", family="Fam", module="mod", params={"p": "1"})
    sch.add_task(worker=WORKER, task_id="External", runnable=False)
    reply = sch.get_work(worker="helper", assistant=True)
    assert (reply["task_id"], reply["task_module"], reply["task_params"]) == ("A", "mod", {"p": "1"})
    assert granted(sch, "helper", assistant=True) is None
    assert [w["name"] for w in sch.worker_list() if w.get("assistant")] == ["helper"]


def test_tasks_that_become_ready_later_reach_assistants():
    sch, _ = make_scheduler()
    assert granted(sch, "helper", assistant=True) is None
    sch.add_task(worker=WORKER, task_id="A", deps=["B"])
    sch.add_task(worker=WORKER, task_id="B")
    assert granted(sch, "helper", assistant=True) == "B"
    sch.add_task(worker="helper", task_id="B", status="DONE", assistant=True)
    assert granted(sch, "helper", assistant=True) == "A"
