"""The Backfill form on the Schedules tab in a real headless Chromium against a real ``luigid``: a backfill
started from the form runs to 5/5 with its parameters, a bad range is refused in the page with luigid's
one-line reason, and Cancel stops a running one. Each check compares the page with ``backfill_list``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.backfills import backfill_workdir, backfills, counted
from helpers.browser import checked_page, open_view, watched_page
from helpers.luigid import LuigidProcess, running_luigid, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Set to a path to keep the screenshot for the documentation (doc/images/backfills-form.png).
SCREENSHOT_ENV = "LUIGI_BACKFILLS_SCREENSHOT"
RUN_TIMEOUT = 90.0


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("backfills-tab")


@pytest.fixture(scope="module")
def luigid(workdir: Path) -> Iterator[LuigidProcess]:
    env = backfill_workdir(workdir)
    with running_luigid(workdir, env=env) as started:
        yield started


def fill(page: Any, **fields: str) -> None:
    """Fill the form (five January days of backfill_pipeline.Day unless told otherwise) and submit it."""
    form = page.locator("form.backfill-form")
    defaults = {"module": "backfill_pipeline", "family": "Day", "start": "2024-01-01", "stop": "2024-01-06"}
    for name, value in {**defaults, **fields}.items():
        if name == "kind":
            form.locator("select[name=kind]").select_option(value)
        else:
            form.locator(f"input[name={name}]").fill(value)
    form.locator("button[type=submit]").click()


def row(page: Any, backfill_id: int) -> Any:
    return page.locator(f'.backfill-row[data-backfill="{backfill_id}"]')


def test_a_backfill_started_from_the_form_runs_with_its_parameters_to_5_of_5(chromium, luigid, workdir):
    (workdir / "gates" / "all").touch()
    with checked_page(chromium, timezone_id="UTC") as page:
        open_view(page, luigid.url, "#tab=schedules")
        page.wait_for_selector(".backfills .backfill-list")
        fill(page, params='{"region": "asia"}', concurrency="2")
        page.wait_for_selector('.backfill-message:has-text("started: 5 days of Day")')
        (started,) = [b for b in backfills(luigid.probe()).values() if b["params"] == {"region": "asia"}]
        assert (started["concurrency"], started["kind"], started["total"]) == (2, "daily", 5)
        page.wait_for_selector(
            f'.backfill-row[data-backfill="{started["id"]}"] .backfill-progress:text-is("5/5")'
        )
        page.wait_for_selector(
            f'.backfill-row[data-backfill="{started["id"]}"] .backfill-state:text-is("done")'
        )
        assert row(page, started["id"]).locator("progress").get_attribute("max") == "5"
        assert "2024-01-01 → 2024-01-06" in row(page, started["id"]).inner_text()
    asia = {day: n for day, n in counted(workdir, "finished.txt").items() if day.startswith("asia-")}
    assert asia == {f"asia-2024-01-0{d}": 1 for d in range(1, 6)}
    assert backfills(luigid.probe())[started["id"]]["done"] == 5


def test_a_bad_range_is_refused_in_the_page_with_luigids_reason(chromium, luigid):
    before = backfills(luigid.probe())
    with watched_page(chromium, timezone_id="UTC") as page:
        open_view(page, luigid.url, "#tab=schedules")
        fill(page, start="2024-01-06", stop="2024-01-01")
        message = page.locator(".backfill-message.error-box")
        message.wait_for()
        assert message.inner_text() == (
            "Not started: stop: 2024-01-01 is not after start 2024-01-06 "
            "(stop is exclusive: the range is [start, stop))"
        )
        fill(page, params="[1]")
        page.wait_for_selector('.backfill-message:has-text("Parameters: write a JSON object")')
        # The browser logs the refused request (400) itself; the page adds no problem of its own.
        assert [problem for problem in page.problems if "status of 400" not in problem] == []
        assert page.dialogs == []
    assert backfills(luigid.probe()) == before


def test_cancel_stops_a_running_backfill_and_the_list_says_cancelled(chromium, luigid, workdir, tmp_path):
    tall = {"width": 1440, "height": 1100}
    with watched_page(chromium, timezone_id="UTC", viewport=tall) as page:
        open_view(page, luigid.url, "#tab=schedules")
        fill(
            page,
            family="Hour",
            kind="hourly",
            start="2024-03-01T00",
            stop="2024-03-01T06",
            params='{"region": "gated"}',
        )
        page.wait_for_selector('.backfill-message:has-text("started: 6 hours of Hour")')
        (going,) = [b for b in backfills(luigid.probe()).values() if b["params"] == {"region": "gated"}]
        wait_until(lambda: backfills(luigid.probe())[going["id"]]["pid"], RUN_TIMEOUT, what="its child")
        button = row(page, going["id"]).locator("button.backfill-cancel")
        button.wait_for()
        shot = tmp_path / "backfills-form.png"
        page.screenshot(path=str(shot), full_page=True)
        button.click()
        page.wait_for_selector(
            f'.backfill-row[data-backfill="{going["id"]}"] .backfill-state:text-is("cancelled")'
        )
        assert row(page, going["id"]).locator("button.backfill-cancel").count() == 0
        assert page.problems == [] and page.dialogs == []
    assert backfills(luigid.probe())[going["id"]]["state"] == "cancelled"
    keep = os.environ.get(SCREENSHOT_ENV)
    if keep:
        Path(keep).write_bytes(shot.read_bytes())
