"""The read-only RPC methods the visualiser uses: task_counts, task_page, task_detail and graph_view.

They answer in proportion to what they return, so a page open on a scheduler of 100,000 tasks does not
slow down workers: counts come from the indexes, upstream counts from a census computed in slices,
pages from the status index or from a cached scan.
"""

from __future__ import annotations

import random

import pytest
from helpers.scheduler import WORKER, granted, make_scheduler

from luigi.scheduler import Scheduler
from luigi.scheduler.views import census

UPSTREAM = ("UPSTREAM_FAILED", "UPSTREAM_DISABLED", "UPSTREAM_RUNNING", "UPSTREAM_MISSING_INPUT")


def add(sch: Scheduler, task_id: str, family: str, deps=(), status="PENDING", **params: str) -> None:
    sch.add_task(worker=WORKER, task_id=task_id, family=family, deps=list(deps), status=status, params=params)


def settled_counts(sch: Scheduler) -> dict:
    """task_counts, called until its census has finished a pass (each call does one slice)."""
    for _ in range(10_000):
        counts = sch.task_counts()
        if counts["census"]["ready"] and not counts["census"]["updating"]:
            return counts
    raise AssertionError("the census never finished")


def pipeline() -> Scheduler:
    """Report <- Aggregate(d) <- Fetch(d, s) for 3 days: one fetch failed, one runs, one is disabled."""
    sch, _ = make_scheduler()
    for day in ("1", "2", "3"):
        fetches = [f"Fetch({day},{source})" for source in ("a", "b")]
        for fetch in fetches:
            add(sch, fetch, "Fetch", day=day, source=fetch[-2])
        add(sch, f"Aggregate({day})", "Aggregate", fetches, day=day)
    add(sch, "Report", "Report", [f"Aggregate({d})" for d in "123"])
    add(sch, "Fetch(1,a)", "Fetch", status="FAILED", day="1", source="a")
    add(sch, "Fetch(2,a)", "Fetch", status="DISABLED", day="2", source="a")
    add(sch, "Fetch(3,b)", "Fetch", status="DONE", day="3", source="b")
    assert granted(sch) == "Fetch(1,b)"
    return sch


# -- task_counts ------------------------------------------------------------------------------------


def test_task_counts_give_every_status_and_family_exactly():
    sch = pipeline()
    counts = settled_counts(sch)
    assert counts["total"] == 10
    assert counts["statuses"] == {
        "PENDING": 6,
        "RUNNING": 1,
        "DONE": 1,
        "FAILED": 1,
        "DISABLED": 1,
        "UNKNOWN": 0,
        "BATCH_RUNNING": 0,
    }
    assert counts["families"] == {"Aggregate": 3, "Fetch": 6, "Report": 1}
    assert counts["family_statuses"]["Fetch"] == {
        "PENDING": 2,
        "RUNNING": 1,
        "FAILED": 1,
        "DISABLED": 1,
        "DONE": 1,
    }


def test_upstream_counts_agree_with_lugis_upstream_filter_of_task_list():
    sch = pipeline()
    counts = settled_counts(sch)
    for upstream in UPSTREAM:
        listed = sch.task_list(status="PENDING", upstream_status=upstream)
        assert counts["upstream"].get(upstream, 0) == len(listed), upstream
    assert counts["upstream"]["UPSTREAM_DISABLED"] == 2  # Aggregate(2) and Report, the worst upstream


@pytest.mark.parametrize("seed", range(5))
def test_census_agrees_with_task_list_on_random_graphs_resolved_in_tiny_slices(seed, monkeypatch):
    monkeypatch.setattr(census, "SLICE_WORK", 3)  # walks are interrupted and resumed constantly
    rng = random.Random(seed)
    sch, _ = make_scheduler()
    ids = [f"T{i}" for i in range(120)]
    for i, task_id in enumerate(ids):
        deps = rng.sample(ids[:i], k=min(i, rng.randint(0, 3)))
        status = rng.choice(["PENDING"] * 6 + ["DONE", "FAILED", "DISABLED"])
        add(sch, task_id, f"F{i % 4}", deps, status=status)
    for _ in range(3):
        granted(sch)
    counts = settled_counts(sch)
    for upstream in UPSTREAM:
        expected = set(sch.task_list(status="PENDING", upstream_status=upstream))
        page = sch.task_page(upstream_status=upstream, page_size=1000)
        assert {row["task_id"] for row in page["tasks"]} == expected, upstream
        assert counts["upstream"].get(upstream, 0) == len(expected)


def test_a_large_census_takes_several_calls_and_counts_stay_exact_meanwhile():
    sch, _ = make_scheduler()
    for i in range(3 * census.SLICE_WORK):
        add(sch, f"T{i}", "Leaf", [f"T{i - 1}"] if i else [])
    first = sch.task_counts()
    assert first["statuses"]["PENDING"] == 3 * census.SLICE_WORK
    assert first["census"] == {"ready": False, "updating": True, "as_of": None}
    assert first["upstream"] is None
    counts = settled_counts(sch)
    assert counts["upstream"] == {"UPSTREAM_MISSING_INPUT": 3 * census.SLICE_WORK}


def test_the_census_recounts_after_a_change_once_its_interval_has_passed():
    sch = pipeline()
    clock = sch._clock
    assert settled_counts(sch)["upstream"]["UPSTREAM_FAILED"] == 1
    sch.forgive_failures(task_id="Fetch(1,a)")
    assert sch.task_counts()["upstream"]["UPSTREAM_FAILED"] == 1  # too soon: the last pass still serves
    clock.advance(census.MIN_INTERVAL)
    assert settled_counts(sch)["upstream"].get("UPSTREAM_FAILED", 0) == 0


# -- task_page --------------------------------------------------------------------------------------


def test_the_default_page_lists_failures_first_then_running_then_pending_and_done_last():
    sch = pipeline()
    page = sch.task_page()
    statuses = [row["status"] for row in page["tasks"]]
    assert statuses[:3] == ["FAILED", "DISABLED", "RUNNING"]
    assert statuses[-1] == "DONE"
    assert page["total"] == 10 and page["offset"] == 0 and not page["too_many"]
    assert page["tasks"][0]["task_id"] == "Fetch(1,a)"
    assert page["tasks"][0]["display_name"] == "Fetch(day=1, source=a)"


def test_pages_slice_the_list_without_gaps_or_repeats():
    sch = pipeline()
    whole = [row["task_id"] for row in sch.task_page(page_size=100)["tasks"]]
    pieces = [
        row["task_id"]
        for offset in range(0, 10, 3)
        for row in sch.task_page(offset=offset, page_size=3)["tasks"]
    ]
    assert pieces == whole
    assert sch.task_page(offset=50)["tasks"] == []


def test_pages_filter_by_status_family_and_search_terms():
    sch = pipeline()
    assert {r["task_id"] for r in sch.task_page(status="PENDING")["tasks"]} == {
        "Fetch(2,b)",
        "Fetch(3,a)",
        "Aggregate(1)",
        "Aggregate(2)",
        "Aggregate(3)",
        "Report",
    }
    assert {r["task_id"] for r in sch.task_page(family="Aggregate", status="PENDING")["tasks"]} == {
        "Aggregate(1)",
        "Aggregate(2)",
        "Aggregate(3)",
    }
    found = sch.task_page(search="SOURCE=b  day=2")  # every term, any case, in the display name
    assert [r["task_id"] for r in found["tasks"]] == ["Fetch(2,b)"]
    assert found["total"] == 1


def test_pending_rows_name_their_upstream_status_once_counted():
    sch = pipeline()
    settled_counts(sch)
    rows = {r["task_id"]: r for r in sch.task_page(page_size=100)["tasks"]}
    assert rows["Aggregate(1)"]["upstream_status"] == "UPSTREAM_FAILED"
    assert "upstream_status" not in rows["Fetch(1,a)"]


def test_filtering_by_upstream_status_before_the_first_count_says_it_is_counting(monkeypatch):
    monkeypatch.setattr(census, "SLICE_WORK", 1)
    sch = pipeline()
    page = sch.task_page(upstream_status="UPSTREAM_FAILED")
    assert page["counting"] is True and page["tasks"] == [] and page["total"] is None


@pytest.mark.parametrize(
    ("sort_by", "key"),
    [
        ("family", lambda r: r["name"]),
        ("priority", lambda r: r["priority"]),
        ("params", lambda r: r["display_name"].split("(", 1)[1]),
    ],
)
def test_each_column_sorts_both_ways(sort_by, key):
    sch, _ = make_scheduler()
    for i, family in enumerate(["Beta", "alpha", "Gamma", "Delta", "Beta"]):
        sch.add_task(
            worker=WORKER, task_id=f"{family}{i}", family=family, params={"n": str(7 - i)}, priority=i % 3
        )
    ascending = [key(r) for r in sch.task_page(sort_by=sort_by)["tasks"]]
    descending = [key(r) for r in sch.task_page(sort_by=sort_by, sort_desc=True)["tasks"]]
    assert ascending == sorted(ascending)
    assert descending == sorted(descending, reverse=True)


def test_sorting_by_time_running_or_worker_puts_tasks_without_one_last():
    sch, clock = make_scheduler()
    for name in ("A", "B", "C"):
        add(sch, name, "Job")
    assert granted(sch) == "A"
    clock.advance(10)
    assert granted(sch) == "B"
    shortest_first = [r["task_id"] for r in sch.task_page(sort_by="time_running")["tasks"]]
    longest_first = [r["task_id"] for r in sch.task_page(sort_by="time_running", sort_desc=True)["tasks"]]
    assert shortest_first == ["B", "A", "C"]
    assert longest_first == ["A", "B", "C"]
    sch.add_task(worker="other", task_id="D", family="Job", runnable=False)
    sch.disable_worker(worker="other")
    assert sch.task_page(sort_by="worker")["tasks"][-1]["task_id"] == "D"


def test_past_max_shown_tasks_a_page_holds_only_the_count():
    sch = pipeline()
    page = sch.task_page(max_shown_tasks=4)
    assert page["too_many"] is True
    assert page["total"] == 10 and page["tasks"] == [] and page["max_shown_tasks"] == 4
    assert sch.task_page(max_shown_tasks=4, family="Aggregate")["total"] == 3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"status": "DONEISH"}, "status must be one of"),
        ({"upstream_status": "UPSTREAM_SLOW"}, "upstream_status must be one of"),
        ({"sort_by": "colour"}, "sort_by must be one of"),
        ({"offset": -1}, "offset must be 0 or more, got -1"),
        ({"page_size": 0}, "page_size must be between 1 and 1000, got 0"),
    ],
)
def test_bad_page_arguments_are_refused_with_what_was_expected(kwargs, message):
    sch = pipeline()
    with pytest.raises(ValueError, match=message):
        sch.task_page(**kwargs)


def test_a_scanned_view_is_reused_while_young_and_recomputed_after_a_change():
    sch = pipeline()
    clock = sch._clock
    assert sch.task_page(family="Fetch", status="FAILED")["total"] == 1
    sch.forgive_failures(task_id="Fetch(1,a)")
    clock.advance(census.MAX_AGE)  # older than any interval: the change shows
    assert sch.task_page(family="Fetch", status="FAILED")["total"] == 0


# -- task_detail ------------------------------------------------------------------------------------


def test_task_detail_shows_the_task_its_error_and_its_neighbours_most_severe_first():
    sch = pipeline()
    sch.add_task(
        worker=WORKER, task_id="Fetch(1,a)", status="FAILED", expl="Traceback...\nValueError: <b>x</b>"
    )
    detail = sch.task_detail(task_id="Aggregate(1)")
    assert detail["task"]["task_id"] == "Aggregate(1)"
    assert detail["task"]["status"] == "PENDING"
    assert [n["task_id"] for n in detail["upstream"]] == ["Fetch(1,a)", "Fetch(1,b)"]
    assert [n["status"] for n in detail["upstream"]] == ["FAILED", "RUNNING"]
    assert detail["downstream"] == [
        {"task_id": "Report", "status": "PENDING", "name": "Report", "display_name": "Report()"}
    ]
    assert (detail["num_upstream"], detail["num_downstream"]) == (2, 1)
    assert sch.task_detail(task_id="Fetch(1,a)")["error"] == "Traceback...\nValueError: <b>x</b>"
    assert sch.task_detail(task_id="Aggregate(1)")["error"] is None


def test_task_detail_caps_the_neighbours_but_counts_them_all():
    sch, _ = make_scheduler()
    add(sch, "Root", "Root", [f"Leaf{i}" for i in range(30)])
    detail = sch.task_detail(task_id="Root", max_neighbours=5)
    assert len(detail["upstream"]) == 5 and detail["num_upstream"] == 30
    assert detail["upstream"][0] == {
        "task_id": "Leaf0",
        "status": "UNKNOWN",
        "name": "UNKNOWN",
        "display_name": "Leaf0",
    }


def test_task_detail_of_an_unknown_task_is_empty():
    sch = pipeline()
    assert sch.task_detail(task_id="Nope") == {}


# -- graph_view -------------------------------------------------------------------------------------


@pytest.mark.parametrize("include_done", [True, False])
def test_graph_view_has_the_tasks_and_edges_of_dep_graph(include_done):
    sch = pipeline()
    view = sch.graph_view(task_id="Report", include_done=include_done)
    expected = sch.dep_graph(task_id="Report", include_done=include_done)
    assert view["collapsed"] is False and view["num_nodes"] == len(expected)
    assert {k: v["deps"] for k, v in view["nodes"].items()} == {k: v["deps"] for k, v in expected.items()}
    assert {k: v["status"] for k, v in view["nodes"].items()} == {k: v["status"] for k, v in expected.items()}


def test_inverted_graph_view_follows_dependents_like_inverse_dep_graph():
    sch = pipeline()
    view = sch.graph_view(task_id="Fetch(1,a)", inverse=True)
    expected = sch.inverse_dep_graph(task_id="Fetch(1,a)")
    assert {k: v["deps"] for k, v in view["nodes"].items()} == {k: v["deps"] for k, v in expected.items()}
    assert set(view["nodes"]) == {"Fetch(1,a)", "Aggregate(1)", "Report"}


def test_a_graph_larger_than_max_nodes_comes_grouped_by_family_with_edges_between_families():
    sch = pipeline()
    view = sch.graph_view(task_id="Report", max_nodes=3)
    assert view["collapsed"] is True and view["num_nodes"] == 10
    assert view["root_family"] == "Report"
    assert view["families"] == {
        "Report": {"PENDING": 1},
        "Aggregate": {"PENDING": 3},
        "Fetch": {"PENDING": 2, "RUNNING": 1, "FAILED": 1, "DISABLED": 1, "DONE": 1},
    }
    assert view["edges"] == [["Aggregate", "Report", 3], ["Fetch", "Aggregate", 6]]  # dependency first


def test_graph_view_of_an_unknown_task_is_empty_and_bad_sizes_are_refused():
    sch = pipeline()
    assert sch.graph_view(task_id="Nope") == {}
    with pytest.raises(ValueError, match="max_nodes must be 0 or more, got -1"):
        sch.graph_view(task_id="Report", max_nodes=-1)
