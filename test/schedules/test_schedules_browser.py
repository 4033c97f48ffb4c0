"""The Schedules tab in a real headless Chromium against a real ``luigid`` running real schedules.

The luigid runs four schedules: ``nightly`` (cron in Europe/Berlin, never due during the test),
``failing`` (cron, started once by hand; its task fails with a script payload in its message), ``tick``
(every 2 s) and ``hold`` (a run that keeps going, so later slots are skipped). Every test compares what the
page shows, or what its buttons did, with the JSON API.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from helpers.browser import TIMEOUT_MS, checked_page, open_view, watched_page
from helpers.luigid import LuigidProcess, running_luigid, wait_until
from helpers.schedules import cron, every, runs, schedule_config, schedules

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PAYLOAD = "<img src=x onerror=alert(1)>"
# Set to a path to keep the screenshot for the documentation (doc/images/schedules-tab.png).
SCREENSHOT_ENV = "LUIGI_SCHEDULES_SCREENSHOT"
RUN_TIMEOUT = 60.0


def site_config(workdir: Path) -> str:
    return schedule_config(
        workdir,
        cron("nightly", "0 6 * * *", more="timezone = Europe/Berlin\n"),
        cron("failing", "0 4 1 1 *", task="Fail", stamp=f'"{PAYLOAD}"', more="catchup = true\n"),
        every("tick", "2s"),
        every("hold", "3s", task="Hold"),
        extra="[retcode]\ntask_failed = 30\n\n",
    )


@pytest.fixture(scope="module")
def luigid(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LuigidProcess]:
    workdir = tmp_path_factory.mktemp("schedules-tab")
    with running_luigid(workdir, config=site_config(workdir)) as started:
        probe = started.probe()
        try:
            failing = probe.call("schedule_trigger", {"name": "failing"}).json()["response"]
            wait_until(
                lambda: finished(probe, "failing", failing["run"]), RUN_TIMEOUT, what="the failing run"
            )
            wait_until(lambda: len(ended(runs(probe, "tick"))) >= 2, RUN_TIMEOUT, what="two tick runs")
            wait_until(lambda: outcomes(probe, "hold") >= {"running", "skipped"}, RUN_TIMEOUT, what="a skip")
            yield started
        finally:
            (workdir / "release").touch()


def ended(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [run for run in entries if run["outcome"] == "ended"]


def finished(probe: Any, name: str, run_id: int) -> list[dict[str, Any]]:
    return [run for run in ended(runs(probe, name)) if run["id"] == run_id]


def outcomes(probe: Any, name: str) -> set[str]:
    return {run["outcome"] for run in runs(probe, name)}


def utc(moment: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(moment))


def zoned(moment: float, zone: str) -> str:
    """``moment`` as the page writes a schedule's time: in the schedule's zone, named by its short name."""
    return datetime.fromtimestamp(moment, ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M:%S %Z")


def card(page: Any, name: str) -> Any:
    return page.locator(f'.schedule-card[data-schedule="{name}"]')


def confirm(page: Any, label: str) -> None:
    """Press ``label`` in the page's own dialog and wait until it closes."""
    dialog = page.locator("dialog.modal[open]")
    handle = dialog.element_handle()
    dialog.locator("button[type=submit]", has_text=label).click()
    page.wait_for_function("d => !d.isConnected", arg=handle)


def open_schedules(page: Any, luigid: LuigidProcess) -> None:
    open_view(page, luigid.url, "#tab=schedules")
    page.wait_for_selector(".schedule-card")


def test_the_tab_shows_each_schedule_with_its_next_run_and_its_last_runs(page, luigid):
    open_schedules(page, luigid)
    listed = schedules(luigid.probe())
    assert page.locator(".nav-link.active").inner_text() == "Schedules"
    assert page.locator(".schedule-card h2").all_inner_texts() == list(listed)
    nightly = card(page, "nightly")
    assert nightly.locator(".schedule-cadence").inner_text() == "cron 0 6 * * *"
    assert (
        zoned(listed["nightly"]["next_due"], "Europe/Berlin")
        in nightly.locator(".schedule-next").inner_text()
    )
    assert nightly.locator(".schedule-state").inner_text() == "Active"
    failing_run = listed["failing"]["runs"][0]
    row = card(page, "failing").locator(f'.run-row[data-run="{failing_run["id"]}"]')
    assert row.locator(".run-exit").inner_text() == "30 (task_failed)"
    tick_run = ended(listed["tick"]["runs"])[0]
    tick_row = card(page, "tick").locator(f'.run-row[data-run="{tick_run["id"]}"]')
    # The page may still show it running until its next refresh.
    tick_selector = f'.schedule-card[data-schedule="tick"] .run-row[data-run="{tick_run["id"]}"]'
    page.wait_for_selector(f'{tick_selector} .run-exit:text-is("0 (success)")')
    assert utc(tick_run["scheduled_time"]) in tick_row.inner_text()
    skipped = card(page, "hold").locator('.run-row[data-outcome="skipped"]').first
    skipped.wait_for()
    assert "was still going" in skipped.inner_text()
    assert card(page, "hold").locator(".schedule-state").inner_text() == "Running"


def test_schedule_times_are_written_in_the_schedules_time_zone_and_name_it(chromium, luigid):
    listed = schedules(luigid.probe())
    tick_run = ended(listed["tick"]["runs"])[0]
    # A reader in New York: the times are still the schedules' own, and say so.
    with checked_page(chromium, timezone_id="America/New_York") as page:
        open_schedules(page, luigid)
        next_nightly = card(page, "nightly").locator(".schedule-next").inner_text()
        tick_row = card(page, "tick").locator(f'.run-row[data-run="{tick_run["id"]}"]').inner_text()
        failing_run = listed["failing"]["runs"][0]
        failing_row = card(page, "failing").locator(f'.run-row[data-run="{failing_run["id"]}"]')
        started = failing_row.locator("td").nth(3).inner_text()
    assert next_nightly.startswith(zoned(listed["nightly"]["next_due"], "Europe/Berlin"))
    assert next_nightly.split(" (in ")[0].endswith((" CET", " CEST"))
    assert f"{zoned(tick_run['scheduled_time'], 'UTC')}" in tick_row
    assert started == zoned(failing_run["started"], "UTC")


def test_a_run_whose_command_exited_non_zero_says_failed_and_one_that_exited_zero_says_done(page, luigid):
    listed = schedules(luigid.probe())
    failing_run = listed["failing"]["runs"][0]
    tick_run = ended(listed["tick"]["runs"])[0]
    open_schedules(page, luigid)
    failing = card(page, "failing").locator(f'.run-row[data-run="{failing_run["id"]}"] .run-outcome')
    assert (failing.inner_text(), failing.get_attribute("class")) == ("failed", "badge st-FAILED run-outcome")
    tick_selector = f'.schedule-card[data-schedule="tick"] .run-row[data-run="{tick_run["id"]}"] .run-outcome'
    page.wait_for_selector(f'{tick_selector}:text-is("done")')  # it may show running until the next refresh


def test_a_runs_log_expands_below_it_with_the_runs_output(page, luigid):
    open_schedules(page, luigid)
    run = ended(runs(luigid.probe(), "tick"))[-1]
    row = card(page, "tick").locator(f'.run-row[data-run="{run["id"]}"]')
    row.locator("button.log-toggle").click()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(run["slot"]))
    page.wait_for_selector(f'.schedule-card[data-schedule="tick"] pre.run-log:has-text("marker {stamp}")')
    assert row.locator("button.log-toggle").get_attribute("aria-expanded") == "true"
    row.locator("button.log-toggle").click()
    page.wait_for_function(
        "() => !document.querySelector('.schedule-card[data-schedule=\"tick\"] pre.run-log')"
    )


def test_pause_asks_first_and_then_pauses_the_schedule_in_luigid_and_resume_undoes_it(page, luigid):
    probe = luigid.probe()
    open_schedules(page, luigid)
    nightly = card(page, "nightly")
    nightly.locator("button[data-action=pause]").click()
    page.locator("dialog.modal[open] button", has_text="Cancel").click()
    assert schedules(probe)["nightly"]["paused"] is False
    nightly.locator("button[data-action=pause]").click()
    confirm(page, "Pause")
    wait_until(lambda: schedules(probe)["nightly"]["paused"], what="nightly to pause")
    page.wait_for_selector('.schedule-card[data-schedule="nightly"] .schedule-state:text("Paused")')
    card(page, "nightly").locator("button[data-action=resume]").click()
    confirm(page, "Resume")
    wait_until(lambda: not schedules(probe)["nightly"]["paused"], what="nightly to resume")
    page.wait_for_selector('.schedule-card[data-schedule="nightly"] .schedule-state:text("Active")')


def test_run_now_starts_a_run_that_shows_with_its_exit_code(page, luigid):
    probe = luigid.probe()
    open_schedules(page, luigid)
    before = {run["id"] for run in runs(probe, "nightly")}
    card(page, "nightly").locator("button[data-action=trigger]").click()
    confirm(page, "Run now")
    manual = wait_until(
        lambda: [r for r in ended(runs(probe, "nightly")) if r["id"] not in before],
        RUN_TIMEOUT,
        what="the run",
    )
    assert (manual[0]["kind"], manual[0]["exit_code"]) == ("manual", 0)
    selector = f'.schedule-card[data-schedule="nightly"] .run-row[data-run="{manual[0]["id"]}"]'
    page.wait_for_selector(f'{selector} .run-exit:text-is("0 (success)")', timeout=TIMEOUT_MS)
    assert "manual" in page.locator(selector).inner_text()


def test_script_payloads_in_a_command_and_a_log_show_as_text_and_run_nothing(page, luigid):
    open_schedules(page, luigid)
    failing = card(page, "failing")
    assert PAYLOAD in failing.locator(".schedule-facts").inner_text()
    failing.locator("button.log-toggle").first.click()
    page.wait_for_selector('.schedule-card[data-schedule="failing"] pre.run-log:has-text("no data for")')
    assert f"RuntimeError: no data for {PAYLOAD}" in failing.locator("pre.run-log").inner_text()
    assert page.locator(".schedule-list img").count() == 0
    # The page fixture fails the test if any dialog opened or any console error was logged.


def test_a_screenshot_of_the_tab(chromium, luigid, tmp_path):
    # No refresh while the picture is taken: the log stays scrolled to the failing task's traceback.
    # The view scrolls inside the page, so the picture is as tall as the window: make that tall enough.
    tall = {"width": 1440, "height": 2100}
    with watched_page(chromium, refresh_seconds=300, timezone_id="UTC", viewport=tall) as page:
        open_schedules(page, luigid)
        failing = card(page, "failing")
        failing.locator("button.log-toggle").first.click()
        page.wait_for_selector('.schedule-card[data-schedule="failing"] pre.run-log:has-text("no data for")')
        page.evaluate(
            "document.querySelectorAll('.run-log').forEach((pre) => { pre.scrollTop = pre.scrollHeight; })"
        )
        shot = tmp_path / "schedules-tab.png"
        page.screenshot(path=str(shot), full_page=True)
        assert page.problems == [] and page.dialogs == []
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    keep = os.environ.get(SCREENSHOT_ENV)
    if keep:
        Path(keep).write_bytes(shot.read_bytes())
