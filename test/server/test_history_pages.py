"""The history pages of luigid (``/history...``, ``/tasklist...``) and the chart's JSON.

A scheduler with a SQLite history is served in a thread; tasks are reported through ``/api`` as a
worker would, then the pages are fetched as a browser would.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from helpers.luigid import HttpProbe, probe_for, serving_in_thread

from luigi.db_task_history import DbTaskHistory
from luigi.scheduler import Scheduler
from luigi.server import ServerSettings
from luigi.task_history import NopHistory, TaskHistory

TRACEBACK = (
    "Traceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: '<img src=x onerror=alert(1)>'"
)
EVIL = "<script>alert('pwned')</script>"


@pytest.fixture
def history(tmp_path: Path) -> Iterator[DbTaskHistory]:
    opened = DbTaskHistory(f"sqlite:///{tmp_path / 'history.sqlite'}", flush_interval=0.02)
    yield opened
    opened.close()


def serve(history: TaskHistory, settings: ServerSettings | None = None) -> Any:
    return serving_in_thread(Scheduler(task_history=history), settings or ServerSettings())


def report_run(
    probe: HttpProbe, task_id: str, family: str, params: dict[str, str], failed: bool = False
) -> None:
    """What a worker sends for one task: PENDING, get_work, then DONE or FAILED."""
    probe.call("add_task", {"worker": "w1", "task_id": task_id, "family": family, "params": params})
    granted = probe.call("get_work", {"worker": "w1", "host": "build-host"}).json()["response"]
    assert granted["task_id"] == task_id
    status = "FAILED" if failed else "DONE"
    expl = json.dumps(TRACEBACK) if failed else None
    probe.call("add_task", {"worker": "w1", "task_id": task_id, "status": status, "expl": expl})


def page(probe: HttpProbe, path: str, status: int = 200) -> str:
    reply = probe.request("GET", path)
    assert reply.status == status, reply.body[:500]
    assert reply.headers["Content-Type"].startswith("text/html")
    return reply.body.decode()


def test_every_history_page_shows_the_recorded_runs(history: DbTaskHistory) -> None:
    with serve(history) as server:
        probe = probe_for(server)
        report_run(probe, "Fetch_2024_abc", "Fetch", {"day": "2024-01-01"})
        report_run(probe, "Fetch_2025_def", "Fetch", {"day": "2025-01-01"}, failed=True)
        assert history.flush(timeout=30)
        record_id = history.find_task_by_task_id("Fetch_2025_def").id

        recent = page(probe, "/history")
        by_name = page(probe, "/history/by_name/Fetch")
        by_params = page(probe, "/history/by_params/Fetch?" + urlencode({"data": '{"day": "2025-01-01"}'}))
        by_id = page(probe, f"/history/by_id/{record_id}")
        by_task_id = page(probe, "/history/by_task_id/Fetch_2025_def")
        menu = page(probe, "/tasklist")
        chart = page(probe, "/tasklist/Fetch")

    assert "day=2024-01-01" in recent and "day=2025-01-01" in recent
    assert by_name.count('class="history-record') == 2
    assert by_params.count('class="history-record') == 1 and "day=2025-01-01" in by_params
    for shown in (by_id, by_task_id):
        assert "Fetch_2025_def" in shown and "build-host" in shown and "KeyError" in shown
    assert 'tasklist/Fetch"' in menu and "<td>2</td>" in menu
    assert 'data-history-runs="../history/api/runs/Fetch"' in chart


def test_values_are_escaped_and_no_page_carries_an_inline_script(history: DbTaskHistory) -> None:
    with serve(history) as server:
        probe = probe_for(server)
        report_run(probe, "Evil_1", EVIL, {"x": EVIL}, failed=True)
        assert history.flush(timeout=30)
        record_id = history.find_task_by_task_id("Evil_1").id
        paths = ["/history", f"/history/by_id/{record_id}", "/tasklist", f"/tasklist/{quote(EVIL, safe='')}"]
        replies = [probe.request("GET", path) for path in paths]

    for reply in replies:
        html = reply.body.decode()
        assert reply.status == 200
        assert EVIL not in html and "<img src=x" not in html
        assert "&lt;script&gt;" in html
        assert all('src="' in tag for tag in re.findall(r"<script[^>]*>", html)), "inline script found"
        tags = re.findall(r"<[a-zA-Z][^>]*>", html)
        assert not [tag for tag in tags if re.search(r"\son[a-z]+=", tag)], "inline event handler found"
        policy = reply.headers["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "unsafe-inline" not in policy


def test_the_runs_api_gives_the_chart_one_entry_per_run(history: DbTaskHistory) -> None:
    with serve(history) as server:
        probe = probe_for(server)
        report_run(probe, "Load_1", "Load", {"n": "1"})
        report_run(probe, "Load_2", "Load", {"n": "2"}, failed=True)
        assert history.flush(timeout=30)
        reply = probe.request("GET", "/history/api/runs/Load")
        names = probe.request("GET", "/history/api/names").json()
        status = probe.request("GET", "/history/api/status").json()

    data = reply.json()
    assert reply.status == 200 and data["name"] == "Load"
    assert [(run["status"], run["params"], run["exception_type"]) for run in data["runs"]] == [
        ("DONE", {"n": "1"}, None),
        ("FAILED", {"n": "2"}, "KeyError"),
    ]
    assert all(run["host"] == "build-host" and run["at_ms"] > 0 for run in data["runs"])
    assert names == {"recording": True, "names": [{"name": "Load", "count": 2}]}
    assert (status["recording"], status["written"], status["lost"]) == (True, 6, 0)


def test_an_unknown_record_is_a_404_page_and_bad_input_a_400_page(history: DbTaskHistory) -> None:
    with serve(history) as server:
        probe = probe_for(server)
        missing = page(probe, "/history/by_id/999", status=404)
        not_a_number = page(probe, "/history/by_id/abc", status=400)
        unknown_task = page(probe, "/history/by_task_id/Nope_1", status=404)
        bad_json = page(probe, "/history/by_params/Fetch?data=%7Bnot-json", status=400)
        not_an_object = page(probe, "/history/by_params/Fetch?data=%5B1%5D", status=400)

    assert "No recorded task has the id 999" in missing
    assert "&#x27;abc&#x27; is not a history record id" in not_a_number
    assert "The task Nope_1 has no recorded runs" in unknown_task
    assert "&#x27;data&#x27; is not valid JSON" in bad_json
    assert "must be a JSON object" in not_an_object


def test_without_history_the_pages_say_it_is_not_recorded() -> None:
    with serve(NopHistory()) as server:
        probe = probe_for(server)
        recent = page(probe, "/history")
        names = probe.request("GET", "/history/api/names").json()

    assert "Task history is not recorded by this scheduler" in recent and "No runs recorded." in recent
    assert names == {"recording": False, "names": []}


def test_with_a_token_the_pages_need_it_and_say_where_history_can_be_seen(history: DbTaskHistory) -> None:
    with serve(history, ServerSettings(auth_token="s3cret")) as server:
        refused = probe_for(server).request("GET", "/history")
        allowed = probe_for(server, token="s3cret").request("GET", "/history")
        api_refused = probe_for(server).request("GET", "/history/api/runs/Fetch")
        chart_shell = probe_for(server).request("GET", "/tasklist/Fetch")

    assert (refused.status, allowed.status, api_refused.status) == (401, 200, 401)
    assert refused.headers["Content-Type"].startswith("text/html")
    assert "open the History view of the visualiser" in refused.body.decode()
    assert "sqlite" not in refused.body.decode()  # nothing about the database without the token
    assert chart_shell.status == 200  # no recorded data in it: its script fetches the runs with the token
    assert "sqlite" not in chart_shell.body.decode()


def test_an_unavailable_history_database_is_a_503_page_and_scheduling_goes_on() -> None:
    pytest.importorskip("psycopg")
    from helpers.luigid import free_port

    away = DbTaskHistory(f"postgresql+psycopg://u:p@127.0.0.1:{free_port()}/x", retry_max_delay=0.05)
    try:
        with serve(away) as server:
            probe = probe_for(server)
            probe.call("add_task", {"worker": "w1", "task_id": "T_1", "family": "T"})
            granted = probe.call("get_work", {"worker": "w1", "host": "h"}).json()["response"]
            html = page(probe, "/history/by_name/T", status=503)
            api = probe.request("GET", "/history/api/runs/T")
    finally:
        away.close(timeout=0.2)

    assert granted["task_id"] == "T_1"
    assert "The task history database is unavailable: connection failed" in html
    assert re.search(r"The history database \S+ is unavailable\s+\(", html)  # the banner on every page
    assert api.status == 503 and "unavailable" in api.json()["error"]
