"""The Schedules tab marks a late run, in a real headless Chromium against a real ``luigid``: ``slow`` is
still running past its 1 s deadline, ``quick`` ended well within its ten minutes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.browser import open_view, watched_page
from helpers.luigid import LuigidProcess, running_luigid, wait_until
from helpers.schedules import cron, runs, schedule_config

pytestmark = [pytest.mark.browser, pytest.mark.slow]

RUN_TIMEOUT = 60.0
NEVER = "0 4 1 1 *"  # never due during the test: the runs are started by hand
# Set to a path to keep the screenshot for the documentation (doc/images/schedules-late.png).
SCREENSHOT_ENV = "LUIGI_SCHEDULES_LATE_SCREENSHOT"


@pytest.fixture(scope="module")
def luigid(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LuigidProcess]:
    workdir = tmp_path_factory.mktemp("schedules-late")
    config = schedule_config(
        workdir,
        cron("slow", NEVER, task="Hold", more="deadline = 1s\n"),
        cron("quick", NEVER, more="deadline = 10m\n"),
    )
    with running_luigid(workdir, config=config) as started:
        probe = started.probe()
        try:
            for name in ("quick", "slow"):
                probe.call("schedule_trigger", {"name": name})
            wait_until(
                lambda: verdicts(started) == {"quick": False, "slow": True}, RUN_TIMEOUT, what="verdicts"
            )
            yield started
        finally:
            (workdir / "release").touch()


def verdicts(luigid: LuigidProcess) -> dict[str, Any]:
    return {name: runs(luigid.probe(), name)[-1]["late"] for name in ("quick", "slow")}


def run_row(page: Any, name: str) -> Any:
    return page.locator(f'.schedule-card[data-schedule="{name}"] .run-row').first


def open_schedules(page: Any, luigid: LuigidProcess) -> None:
    open_view(page, luigid.url, "#tab=schedules")
    page.wait_for_selector(".schedule-card")


def test_a_run_past_its_deadline_is_marked_late_and_one_on_time_is_not(page, luigid):
    open_schedules(page, luigid)
    late = run_row(page, "slow").locator(".run-late")
    assert late.inner_text() == "late"
    assert late.get_attribute("class") == "badge st-FAILED run-late"
    deadline = runs(luigid.probe(), "slow")[-1]["deadline"]
    assert deadline is not None and late.get_attribute("title").startswith("Not ended well by its deadline, ")
    assert run_row(page, "slow").locator(".run-outcome").inner_text() == "running"
    assert run_row(page, "quick").locator(".run-late").count() == 0
    facts = page.locator('.schedule-card[data-schedule="slow"] .schedule-facts').inner_text()
    assert "1 s after each start: a run not ended well by then is late" in facts
    quick_facts = page.locator('.schedule-card[data-schedule="quick"] .schedule-facts').inner_text()
    assert "10 min 00 s after each start" in quick_facts


def test_a_screenshot_of_a_late_run(chromium, luigid, tmp_path):
    with watched_page(
        chromium, refresh_seconds=300, timezone_id="UTC", viewport={"width": 1280, "height": 760}
    ) as page:
        open_schedules(page, luigid)
        run_row(page, "slow").locator(".run-late").wait_for()
        shot = tmp_path / "schedules-late.png"
        page.screenshot(path=str(shot), full_page=True)
        assert page.problems == [] and page.dialogs == []
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    keep = os.environ.get(SCREENSHOT_ENV)
    if keep:
        Path(keep).write_bytes(shot.read_bytes())
