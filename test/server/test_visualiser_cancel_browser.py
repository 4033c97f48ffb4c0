"""The visualiser's Cancel button in a real headless Chromium, against a real ``luigid`` and a real ``luigi``
worker running a long task: the operator clicks Cancel, confirms, and sees the task FAILED with the
explanation; the task's processes are gone."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from urllib.parse import quote

import pytest
from helpers.browser import browser, open_view, watched_page
from helpers.luigid import running_luigid, wait_until
from helpers.worker_process import alive, read_pids, start_worker, task_statuses

from luigi.scheduler.extensions import CANCELLED_EXPLANATION

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Set to a path to keep the screenshot for the documentation (doc/images/visualiser-cancel.png).
SCREENSHOT_ENV = "LUIGI_CANCEL_SCREENSHOT"

LONG_TASK = """
    import os, subprocess, time
    import luigi

    class Crunch(luigi.Task):
        day = luigi.Parameter()

        def output(self):
            return luigi.LocalTarget("crunch-" + self.day)

        def run(self):
            self.set_status_message("crunching")
            child = subprocess.Popen(["sleep", "300"])
            with open("crunch.pids", "w") as out:
                out.write(f"{os.getpid()}\\n{child.pid}\\n")
            while True:
                time.sleep(0.05)
"""


def test_clicking_cancel_on_a_running_task_fails_it_with_the_explanation(tmp_path: Path):
    (tmp_path / "crunch.py").write_text(textwrap.dedent(LONG_TASK))
    server_dir = tmp_path / "luigid"
    server_dir.mkdir()
    with running_luigid(server_dir) as luigid:
        worker = start_worker(tmp_path, "crunch", ["Crunch", "--day", "2024-05-06"], luigid.url, workers=2)
        try:
            pids = wait_until(
                lambda: len(read_pids(tmp_path / "crunch.pids")) == 2 and read_pids(tmp_path / "crunch.pids"),
                what="the task to start",
            )
            probe = luigid.probe()
            [task_id] = [t for t, task in task_statuses(probe).items() if task["status"] == "RUNNING"]
            with (
                browser() as chromium,
                watched_page(chromium, viewport={"width": 1280, "height": 800}) as page,
            ):
                open_view(page, luigid.url.rstrip("/"), f"#tab=tasks&detail={quote(task_id)}")
                page.wait_for_selector("#task-detail .detail-title .badge.st-RUNNING")
                page.locator("#task-detail button", has_text="Cancel").click()
                dialog = page.locator("dialog.modal[open]")
                assert "not retried until you forgive" in dialog.inner_text()
                dialog.locator("button", has_text="Keep it running").click()  # changed its mind
                assert task_statuses(probe)[task_id]["status"] == "RUNNING"
                page.locator("#task-detail button", has_text="Cancel").click()
                dialog.locator("button[type=submit]", has_text="Cancel task").click()
                page.wait_for_selector("#task-detail .detail-title .badge.st-FAILED")
                page.wait_for_selector(f"#task-detail .traceback:has-text('{CANCELLED_EXPLANATION}')")
                wait_until(lambda: not any(alive(pid) for pid in pids), timeout=5, what="the run to end")
                shot = tmp_path / "visualiser-cancel.png"
                page.screenshot(path=str(shot))
                assert page.problems == [] and page.dialogs == []
            worker.wait(timeout=30)
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    keep = os.environ.get(SCREENSHOT_ENV)
    if keep:
        Path(keep).write_bytes(shot.read_bytes())
