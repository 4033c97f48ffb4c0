"""The history chart in a real browser: one point per run, the failed run marked, its error shown.

Headless Chromium (Playwright, through ``helpers.browser``) loads luigid's ``/tasklist/<family>`` page
and the visualiser's History view. Skipped when no browser is installed, except in CI.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.browser import browser, watched_page
from helpers.luigid import HttpProbe, probe_for, serving_in_thread

from luigi.db_task_history import DbTaskHistory
from luigi.scheduler import Scheduler
from luigi.server import ServerSettings

pytestmark = pytest.mark.browser

ERROR = 'Traceback (most recent call last):\n  File "nightly.py", line 3\nTimeoutError: <b>slow</b> upstream'
LOAD_TIMEOUT_MS = 20_000


@pytest.fixture
def browser_page() -> Iterator[Any]:
    """A watched page (``page.problems``) in headless Chromium; 4xx/5xx answers count as problems."""
    with browser() as launched, watched_page(launched) as page:
        page.on(
            "response",
            lambda reply: reply.status >= 400 and page.problems.append(f"{reply.status} {reply.url}"),
        )
        yield page


@pytest.fixture
def nightly(tmp_path: Path) -> Iterator[tuple[str, DbTaskHistory]]:
    """luigid serving a history with three runs of ``Nightly``; the second one failed."""
    history = DbTaskHistory(f"sqlite:///{tmp_path / 'history.sqlite'}", flush_interval=0.02)
    try:
        with serving_in_thread(Scheduler(task_history=history), ServerSettings()) as server:
            probe = probe_for(server)
            for day, failed in (("01", False), ("02", True), ("03", False)):
                report_run(probe, f"Nightly_2024_05_{day}", {"date": f"2024-05-{day}"}, failed)
            assert history.flush(timeout=30)
            yield server.base_url(), history
    finally:
        history.close()


def report_run(
    probe: HttpProbe, task_id: str, params: dict[str, str], failed: bool, family: str = "Nightly"
) -> None:
    probe.call("add_task", {"worker": "w", "task_id": task_id, "family": family, "params": params})
    assert (
        probe.call("get_work", {"worker": "w", "host": "nightly-host"}).json()["response"]["task_id"]
        == task_id
    )
    status, expl = ("FAILED", json.dumps(ERROR)) if failed else ("DONE", None)
    probe.call("add_task", {"worker": "w", "task_id": task_id, "status": status, "expl": expl})


def failed_run_id(history: DbTaskHistory) -> str:
    [failed] = [run for run in history.find_runs_by_name("Nightly") if run.status == "FAILED"]
    return str(failed.id)


def check_chart(page: Any, failed_id: str) -> None:
    page.wait_for_selector(".history-chart .history-point", timeout=LOAD_TIMEOUT_MS)
    points = page.locator(".history-chart .history-point")
    assert points.count() == 3
    marked = page.locator(".history-chart .history-point-failed")
    assert marked.count() == 1
    assert marked.get_attribute("data-run-id") == failed_id
    assert marked.locator(".history-failed-mark").count() == 1
    assert page.locator(".history-chart .history-point-done").count() == 2
    errors = page.locator(".history-error-item")
    assert errors.count() == 1 and errors.get_attribute("data-run-id") == failed_id
    assert errors.locator(".history-exception").inner_text() == "TimeoutError"
    assert "TimeoutError: <b>slow</b> upstream" in errors.locator(".history-error-text").inner_text()
    assert page.locator(".history-error-text b").count() == 0  # shown as text, never as markup


def test_the_tasklist_page_charts_each_run_and_marks_the_failed_one(
    browser_page: Any, nightly: tuple[str, DbTaskHistory]
) -> None:
    base, history = nightly

    browser_page.goto(f"{base}/tasklist/Nightly")

    check_chart(browser_page, failed_run_id(history))
    assert browser_page.problems == []


def test_the_visualiser_history_view_charts_each_run_and_marks_the_failed_one(
    browser_page: Any, nightly: tuple[str, DbTaskHistory]
) -> None:
    base, history = nightly

    browser_page.goto(f"{base}/static/visualiser/index.html#tab=history")
    browser_page.wait_for_selector(".history-families a", timeout=LOAD_TIMEOUT_MS)
    browser_page.click("text=Nightly")

    check_chart(browser_page, failed_run_id(history))
    assert [p for p in browser_page.problems if "history" in p] == []  # the other views are not ours


@pytest.fixture
def one_weekly_run(tmp_path: Path) -> Iterator[str]:
    """luigid serving a history with two runs of ``Nightly`` and one of ``Weekly``."""
    history = DbTaskHistory(f"sqlite:///{tmp_path / 'history.sqlite'}", flush_interval=0.02)
    try:
        with serving_in_thread(Scheduler(task_history=history), ServerSettings()) as server:
            probe = probe_for(server)
            for day in ("01", "02"):
                report_run(probe, f"Nightly_2024_05_{day}", {"date": f"2024-05-{day}"}, failed=False)
            report_run(probe, "Weekly_2024_05_06", {"date": "2024-05-06"}, failed=False, family="Weekly")
            assert history.flush(timeout=30)
            yield server.base_url()
    finally:
        history.close()


def test_the_history_view_counts_one_record_and_one_run_in_the_singular(
    browser_page: Any, one_weekly_run: str
) -> None:
    browser_page.goto(f"{one_weekly_run}/static/visualiser/index.html#tab=history")
    browser_page.wait_for_selector(".history-families a", timeout=LOAD_TIMEOUT_MS)
    families = browser_page.locator(".history-families li").all_inner_texts()
    assert sorted(families) == ["Nightly 2 records", "Weekly 1 record"]
    browser_page.click("text=Weekly")
    browser_page.wait_for_selector(".history-chart .history-point", timeout=LOAD_TIMEOUT_MS)
    summary = browser_page.locator(".page-head .summary")
    browser_page.wait_for_function("el => el.textContent === '1 run'", arg=summary.element_handle())
    assert [p for p in browser_page.problems if "history" in p] == []
