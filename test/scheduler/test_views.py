"""What the scheduler shows (LUIGI_COMPAT f.2): serialized tasks, task lists, searches and graphs."""

from __future__ import annotations

from helpers.scheduler import WORKER, granted, make_scheduler

SERIALIZED_KEYS = {
    "display_name",
    "status",
    "workers",
    "worker_running",
    "time_running",
    "start_time",
    "last_updated",
    "params",
    "name",
    "priority",
    "resources",
    "resources_running",
    "tracking_url",
    "status_message",
    "progress_percentage",
}


def test_a_serialized_task_has_luigis_fields_and_only_public_params():
    sch, clock = make_scheduler()
    sch.add_task(
        worker=WORKER,
        task_id="T",
        family="Fam",
        params={"b": "2", "a": "1", "secret": "s"},
        param_visibilities={"secret": 1},
        priority=3,
        resources={"r": 1},
        tracking_url="http://t",
    )
    task = sch.task_list()["T"]
    assert set(task) == SERIALIZED_KEYS
    assert task["display_name"] == "Fam(a=1, b=2)"
    assert task["params"] == {"b": "2", "a": "1"}
    assert (task["name"], task["status"], task["workers"], task["priority"]) == (
        "Fam",
        "PENDING",
        [WORKER],
        3,
    )
    assert (task["start_time"], task["last_updated"], task["resources"]) == (clock(), clock(), {"r": 1})
    assert sch.fetch_error(task_id="T")["taskParams"] == {"b": "2", "a": "1", "secret": "s"}


def test_task_list_filters_by_status():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="P")
    sch.add_task(worker=WORKER, task_id="D", status="DONE")
    assert list(sch.task_list(status="DONE")) == ["D"]
    assert set(sch.task_list()) == {"P", "D"}
    assert sch.task_list(status="NO_SUCH_STATUS") == {}


def test_task_list_reports_only_a_count_beyond_max_shown_tasks():
    sch, _ = make_scheduler(max_shown_tasks=3)
    for i in range(5):
        sch.add_task(worker=WORKER, task_id=f"T{i}")
    assert sch.task_list(status="PENDING") == {"num_tasks": 5}
    assert sch.task_list(status="PENDING", upstream_status="UPSTREAM_FAILED") == {"num_tasks": -1}
    assert len(sch.task_list(status="PENDING", max_shown_tasks=10)) == 5
    assert len(sch.task_list(status="PENDING", limit=False)) == 5


def test_task_list_search_matches_every_term_case_insensitively_against_the_display_name():
    sch, _ = make_scheduler(max_shown_tasks=1)
    sch.add_task(worker=WORKER, task_id="a1", family="Report", params={"day": "2024-01-01", "region": "EU"})
    sch.add_task(worker=WORKER, task_id="a2", family="Report", params={"day": "2024-01-02", "region": "US"})
    sch.add_task(worker=WORKER, task_id="a3", family="Export", params={"day": "2024-01-01"})
    assert list(sch.task_list(search="report REGION=eu")) == ["a1"]
    assert sch.task_list(search="2024-01-01") == {"num_tasks": 2}
    assert set(sch.task_list(search="2024-01-01", limit=False)) == {"a1", "a3"}


def test_task_list_upstream_status_filters_pending_tasks_by_their_worst_dependency():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="Top", deps=["Mid", "Run"])
    sch.add_task(worker=WORKER, task_id="Mid", deps=["Bad"])
    sch.add_task(worker=WORKER, task_id="Bad", status="FAILED")
    sch.add_task(worker=WORKER, task_id="Run", priority=1)
    sch.add_task(worker=WORKER, task_id="Alone")
    sch.add_task(worker=WORKER, task_id="Blocked", deps=["Off"])
    sch.add_task(worker=WORKER, task_id="Off", status="DISABLED")
    assert granted(sch) == "Run"

    def pending_with(upstream):
        return set(sch.task_list(status="PENDING", upstream_status=upstream))

    assert pending_with("UPSTREAM_FAILED") == {"Top", "Mid"}
    assert pending_with("UPSTREAM_DISABLED") == {"Blocked"}
    assert pending_with("UPSTREAM_MISSING_INPUT") == {"Alone"}
    assert pending_with("UPSTREAM_RUNNING") == set()
    assert "Bad" in sch.task_list(upstream_status="UPSTREAM_DISABLED")  # other statuses are not filtered


def test_task_search_groups_matching_ids_by_status():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="Load_eu")
    sch.add_task(worker=WORKER, task_id="Load_us", status="DONE")
    sch.add_task(worker=WORKER, task_id="Other")
    result = sch.task_search(task_str="Load")
    assert {status: set(tasks) for status, tasks in result.items()} == {
        "PENDING": {"Load_eu"},
        "DONE": {"Load_us"},
    }


def test_fetch_error_returns_the_explanation_or_an_empty_error():
    sch, _ = make_scheduler()
    sch.add_task(worker=WORKER, task_id="A", family="Fam", module="m", params={"x": "1"})
    sch.add_task(worker=WORKER, task_id="A", status="FAILED", expl='"Traceback..."')
    assert sch.fetch_error(task_id="A") == {
        "taskId": "A",
        "error": '"Traceback..."',
        "displayName": "Fam(x=1)",
        "taskParams": {"x": "1"},
        "taskModule": "m",
        "taskFamily": "Fam",
    }
    assert sch.fetch_error(task_id="nope") == {"taskId": "nope", "error": ""}


def test_status_message_and_progress_of_unknown_tasks():
    sch, _ = make_scheduler()
    sch.set_task_status_message(task_id="nope", status_message="x")
    assert sch.get_task_status_message(task_id="nope") == {"taskId": "nope", "statusMessage": ""}
    assert sch.get_task_progress_percentage(task_id="nope") == {"taskId": "nope", "progressPercentage": None}


def add_chain(sch):
    sch.add_task(worker=WORKER, task_id="Top_1", family="Top", deps=["Mid_1", "Done_1"])
    sch.add_task(worker=WORKER, task_id="Mid_1", family="Mid", deps=["Ghost_abc"])
    sch.add_task(worker=WORKER, task_id="Done_1", family="Done", status="DONE")


def test_dep_graph_walks_dependencies_with_unknown_stubs_and_root_display_name_only():
    sch, _ = make_scheduler()
    add_chain(sch)
    graph = sch.dep_graph(task_id="Top_1")
    assert set(graph) == {"Top_1", "Mid_1", "Done_1", "Ghost_abc"}
    assert graph["Top_1"]["deps"] == ["Done_1", "Mid_1"]
    assert graph["Top_1"]["display_name"] == "Top()"
    assert "display_name" not in graph["Mid_1"]
    assert graph["Ghost_abc"] == {
        "deps": [],
        "status": "UNKNOWN",
        "workers": [],
        "start_time": "UNKNOWN",
        "params": {"task_id": "Ghost_abc"},
        "name": "Ghost",
        "priority": 0,
    }
    assert sch.dep_graph(task_id="nope") == {}


def test_dep_graph_can_leave_out_done_tasks():
    sch, _ = make_scheduler()
    add_chain(sch)
    graph = sch.dep_graph(task_id="Top_1", include_done=False)
    assert "Done_1" not in graph
    assert graph["Top_1"]["deps"] == ["Mid_1"]


def test_inverse_dep_graph_walks_dependents():
    sch, _ = make_scheduler()
    add_chain(sch)
    graph = sch.inverse_dep_graph(task_id="Done_1")
    assert set(graph) == {"Done_1", "Top_1"}
    assert graph["Done_1"]["deps"] == ["Top_1"]
    assert graph["Top_1"]["deps"] == []


def test_graphs_stop_at_max_graph_nodes():
    sch, _ = make_scheduler(max_graph_nodes=3)
    sch.add_task(worker=WORKER, task_id="Root_0", family="Root", deps=[f"Leaf_{i}" for i in range(10)])
    for i in range(10):
        sch.add_task(worker=WORKER, task_id=f"Leaf_{i}", family="Leaf")
    assert len(sch.dep_graph(task_id="Root_0")) == 3


def test_graph_returns_every_task_with_its_deps():
    sch, _ = make_scheduler()
    add_chain(sch)
    graph = sch.graph()
    assert set(graph) == {"Top_1", "Mid_1", "Done_1", "Ghost_abc"}
    assert all("deps" in task for task in graph.values())
