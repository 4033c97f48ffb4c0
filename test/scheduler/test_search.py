"""The search box's index: ``task_list(search=...)`` and ``task_page(search=...)`` find tasks by every term
of their display name, and follow the tasks added, named and removed since the last search."""

from __future__ import annotations

from helpers.scheduler import WORKER, make_scheduler


def found(sch, search: str, status: str = "") -> list[str]:
    return sorted(sch.task_list(status=status, search=search))


def test_a_search_finds_the_tasks_whose_display_name_holds_every_term_in_any_case():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="L1", family="Load", params={"day": "2024-01-01", "table": "users"})
    sch.add_task(worker=WORKER, task_id="L2", family="Load", params={"day": "2024-01-02", "table": "orders"})
    sch.add_task(worker=WORKER, task_id="R1", family="Report", params={"day": "2024-01-01"})

    assert found(sch, "load 2024-01-01") == ["L1"]
    assert found(sch, "DAY=2024-01") == ["L1", "L2", "R1"]
    assert found(sch, "users orders") == []  # each term in the same name, not across two
    assert found(sch, "report(") == ["R1"]
    assert found(sch, "2024", status="DONE") == []


def test_the_search_follows_tasks_added_named_and_removed_since_the_last_one():
    sch, clock = make_scheduler(remove_delay=10, worker_disconnect_delay=10)
    sch.add_task(worker=WORKER, task_id="A", family="Alpha", params={"n": "1"})
    assert found(sch, "alpha") == ["A"]

    sch.add_task(worker=WORKER, task_id="B", family="Alpha", params={"n": "2"}, deps=["Stub"])
    assert found(sch, "alpha") == ["A", "B"]  # added
    assert found(sch, "beta") == []

    sch.add_task(worker=WORKER, task_id="Stub", family="Beta", params={"n": "3"})  # a stub gets its name
    assert found(sch, "beta(n=3)") == ["Stub"]

    sch.add_task(worker=WORKER, task_id="A", status="DONE")
    for _ in range(3):  # the worker is dropped for silence, then its tasks are removed
        clock.advance(30)
        sch.prune()
    assert "A" not in sch._state.tasks
    assert found(sch, "alpha") == []  # removed (B and its dependency went with the silent worker too)


def test_a_task_page_search_uses_the_same_names_with_its_other_filters():
    sch, _ = make_scheduler()
    for i in range(30):
        sch.add_task(
            worker=WORKER, task_id=f"T{i}", family="Even" if i % 2 == 0 else "Odd", params={"i": str(i)}
        )
    sch.add_task(worker=WORKER, task_id="T4", status="DONE")

    page = sch.task_page(search="i=4", family="Even")
    assert sorted(row["task_id"] for row in page["tasks"]) == ["T4"]
    page = sch.task_page(search="even i=2", status="PENDING")
    assert sorted(row["task_id"] for row in page["tasks"]) == ["T2", "T20", "T22", "T24", "T26", "T28"]
