"""Resources (LUIGI_COMPAT f.4 steps 7-9): capacities, never over-granting, greedy reservation."""

from __future__ import annotations

from helpers.scheduler import WORKER, granted, make_scheduler

OTHER = "other-worker"


def test_an_unconfigured_resource_has_capacity_one():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="A", resources={"disk": 1})
    sch.add_task(worker=WORKER, task_id="B", resources={"disk": 1})
    assert granted(sch) == "A"
    assert granted(sch) is None
    sch.add_task(worker=WORKER, task_id="A", status="DONE")
    assert granted(sch) == "B"


def test_a_task_needing_more_than_one_unit_of_an_unconfigured_resource_never_runs():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="A", resources={"disk": 2})
    assert granted(sch) is None


def test_configured_capacities_are_never_exceeded():
    sch, _ = make_scheduler(resources={"db": 3})
    for i in range(5):
        sch.add_task(worker=WORKER, task_id=f"T{i}", resources={"db": 2 if i == 0 else 1})
    assert granted(sch) == "T0"
    assert granted(sch) == "T1"
    assert granted(sch) is None
    assert sch.resource_list()[0]["num_used"] == 3


def test_a_task_that_does_not_fit_does_not_block_lower_ones_that_do():
    sch, clock = make_scheduler(resources={"db": 1})
    sch.add_task(worker=WORKER, task_id="Running", resources={"db": 1}, priority=10)
    assert granted(sch) == "Running"
    sch.add_task(worker=WORKER, task_id="Big", resources={"db": 1}, priority=5)
    sch.add_task(worker=WORKER, task_id="Small", resources={"cpu": 1}, priority=3)
    sch.add_task(worker=WORKER, task_id="Free", priority=1)
    assert granted(sch) == "Small"
    assert granted(sch) == "Free"
    assert granted(sch) is None


def test_several_resources_must_all_fit():
    sch, _ = make_scheduler(resources={"a": 1, "b": 2})
    sch.add_task(worker=WORKER, task_id="AB", resources={"a": 1, "b": 1})
    sch.add_task(worker=WORKER, task_id="A2", resources={"a": 1})
    sch.add_task(worker=WORKER, task_id="B2", resources={"b": 1})
    assert [granted(sch), granted(sch), granted(sch)] == ["A2", "B2", None]
    sch.add_task(worker=WORKER, task_id="A2", status="DONE")
    assert granted(sch) == "AB"


def test_resources_are_released_when_the_task_ends_in_any_way():
    sch, _ = make_scheduler()
    for status in ("DONE", "FAILED"):
        sch.add_task(worker=WORKER, task_id=f"A-{status}", resources={"r": 1})
        sch.add_task(worker=WORKER, task_id=f"B-{status}", resources={"r": 1})
        assert granted(sch) == f"A-{status}"
        assert granted(sch) is None
        sch.add_task(worker=WORKER, task_id=f"A-{status}", status=status)
        assert granted(sch) == f"B-{status}"
        sch.add_task(worker=WORKER, task_id=f"B-{status}", status="DONE")


def test_update_resource_sets_a_capacity_and_refuses_bad_amounts():
    sch, _ = make_scheduler()
    assert sch.update_resource(resource="db", amount=2) is True
    assert sch.update_resource(resource="db", amount=-1) is False
    assert sch.update_resource(resource="db", amount="3") is False
    assert sch.update_resource(resource="db", amount=1.5) is False
    sch.add_task(worker=WORKER, task_id="A", resources={"db": 1})
    sch.add_task(worker=WORKER, task_id="B", resources={"db": 1})
    assert [granted(sch), granted(sch)] == ["A", "B"]


def test_update_resources_merges_capacities():
    sch, _ = make_scheduler(resources={"a": 1})
    sch.update_resources(b=4, c=2)
    assert {r["name"]: r["num_total"] for r in sch.resource_list()} == {"a": 1, "b": 4, "c": 2}


def test_decreasing_running_resources_lets_others_start():
    sch, _ = make_scheduler(resources={"db": 2})
    sch.add_task(worker=WORKER, task_id="A", resources={"db": 2})
    sch.add_task(worker=WORKER, task_id="B", resources={"db": 1})
    assert granted(sch) == "A"
    assert granted(sch) is None
    sch.decrease_running_task_resources(task_id="A", decrease_resources={"db": 1, "other": 5})
    assert sch.get_running_task_resources(task_id="A") == {"taskId": "A", "resources": {"db": 1}}
    assert granted(sch) == "B"


def test_decreasing_never_goes_below_zero_and_only_applies_to_running_tasks():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="A", resources={"db": 1})
    sch.decrease_running_task_resources(task_id="A", decrease_resources={"db": 1})
    assert sch.get_running_task_resources(task_id="A") == {"taskId": "A", "resources": None}
    assert granted(sch) == "A"
    sch.decrease_running_task_resources(task_id="A", decrease_resources={"db": 5})
    assert sch.get_running_task_resources(task_id="A")["resources"] == {"db": 0}
    assert sch.get_running_task_resources(task_id="nope") == {"taskId": "nope", "resources": None}


def test_resource_list_shows_configured_resources_and_their_consumers():
    sch, _ = make_scheduler(resources={"db": 2, "idle": 1})
    sch.add_task(worker=WORKER, task_id="A", resources={"db": 1})
    granted(sch)
    listing = {r["name"]: r for r in sch.resource_list()}
    assert listing["db"]["num_total"] == 2
    assert listing["db"]["num_used"] == 1
    assert listing["db"]["num_consumer"] == 1
    assert listing["db"]["running"]["A"]["status"] == "RUNNING"
    assert listing["idle"] == {
        "name": "idle",
        "num_total": 1,
        "num_used": 0,
        "num_consumer": 0,
        "running": {},
    }


def test_a_higher_priority_task_of_another_active_worker_reserves_its_resource():
    sch, _ = make_scheduler(resources={"db": 1})
    sch.add_worker(worker=OTHER, info={"workers": 2})
    sch.add_task(worker=OTHER, task_id="High", deps=["Prep"], resources={"db": 1}, priority=10)
    sch.add_task(worker=OTHER, task_id="Prep")
    assert granted(sch, OTHER) == "Prep"  # OTHER is active, with one idle process left
    sch.add_task(worker=OTHER, task_id="Prep", status="DONE")
    sch.add_task(worker=WORKER, task_id="Low", resources={"db": 1}, priority=1)
    assert granted(sch) is None  # the database is kept for High
    assert granted(sch, OTHER) == "High"


def test_no_reservation_for_a_worker_that_has_not_asked_for_work_recently():
    sch, clock = make_scheduler(resources={"db": 1})
    sch.add_task(worker=OTHER, task_id="High", resources={"db": 1}, priority=10)
    sch.add_task(worker=WORKER, task_id="Low", resources={"db": 1}, priority=1)
    assert granted(sch) == "Low"


def test_no_reservation_for_a_worker_whose_processes_are_all_busy_with_higher_priority_work():
    sch, _ = make_scheduler(resources={"db": 1})
    sch.add_task(worker=OTHER, task_id="Busy", priority=20)
    assert granted(sch, OTHER) == "Busy"  # OTHER's single process is busy with work above High
    sch.add_task(worker=OTHER, task_id="High", resources={"db": 1}, priority=10)
    sch.add_task(worker=WORKER, task_id="Low", resources={"db": 1}, priority=1)
    assert granted(sch) == "Low"


def test_resources_of_bad_shape_are_refused_with_the_task_named():
    sch, _ = make_scheduler()
    try:
        sch.add_task(worker=WORKER, task_id="A", resources={"db": "lots"})
    except ValueError as error:
        assert "add_task A: resources" in str(error) and "'lots'" in str(error)
    else:
        raise AssertionError("expected a ValueError")
