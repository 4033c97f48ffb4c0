"""The visualiser in a real headless Chromium against a real ``luigid`` filled by a real pipeline run.

A module-wide luigid is filled by running ``luigi --module vis_pipeline All`` (some loads fail, one
task is disabled by its retry policy, two tasks carry script-injection payloads as parameters) and a
second ``luigi`` process keeps a ``Listener`` task running that answers scheduler messages. Every
test compares what the page shows, or what its actions did, with the JSON API.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from helpers.browser import TIMEOUT_MS, card_count, checked_page, open_view, watched_page
from helpers.luigid import LuigidProcess, luigid_env, running_luigid, serving_in_thread, wait_until

from luigi.scheduler import Scheduler, SchedulerConfig
from luigi.server import ServerSettings

pytest_plugins = ["helpers.browser"]  # its fixture chromium: one Chromium per module

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LUIGI = Path(sys.executable).parent / "luigi"

IMG_PAYLOAD = "<img src=x onerror=alert(1)>"
SCRIPT_PAYLOAD = '"><script>alert(2)</script>'

PIPELINE = (
    textwrap.dedent(
        '''
    import os

    import luigi

    OUT = os.environ["VIS_OUT"]
    FAILING_DAYS = ("2024-05-03", "2024-05-04", "2024-05-05")


    class Extract(luigi.Task):
        day = luigi.Parameter()

        def output(self):
            return luigi.LocalTarget(os.path.join(OUT, f"extract-{self.day}"))

        def run(self):
            with self.output().open("w") as out:
                out.write(self.day)


    class Load(luigi.Task):
        day = luigi.Parameter()
        resources = {"db": 1}

        def requires(self):
            return Extract(self.day)

        def output(self):
            return luigi.LocalTarget(os.path.join(OUT, f"load-{self.day}"))

        def run(self):
            if self.day in FAILING_DAYS:
                raise ValueError(f"<b>bad</b> row in {self.day}")
            with self.output().open("w") as out:
                out.write("ok")


    class Report(luigi.Task):
        def requires(self):
            return [Load(f"2024-05-0{d}") for d in range(1, 6)]

        def output(self):
            return luigi.LocalTarget(os.path.join(OUT, "report"))


    class Fragile(luigi.Task):
        retry_count = 1  # the first failure disables it

        def output(self):
            return luigi.LocalTarget(os.path.join(OUT, "fragile"))

        def run(self):
            raise RuntimeError("fragile broke")


    class Payload(luigi.Task):
        name = luigi.Parameter()

        def output(self):
            return luigi.LocalTarget(os.path.join(OUT, "payload-" + str(len(self.name))))

        def run(self):
            with self.output().open("w") as out:
                out.write(self.name)


    class All(luigi.WrapperTask):
        def requires(self):
            yield Report()
            yield Fragile()
            yield Payload(name=IMG_PAYLOAD)
            yield Payload(name=SCRIPT_PAYLOAD)


    class Retried(luigi.Task):
        """Fails; may be retried three times."""

        retry_count = 3

        def output(self):
            return luigi.LocalTarget(os.path.join(OUT, "retried"))

        def run(self):
            raise RuntimeError("retried broke")


    class Unlimited(Retried):
        """Fails; retried for ever, as users spell it."""

        retry_count = 999999999


    class Troubled(luigi.WrapperTask):
        """Two failed tasks and a disabled one (not part of All: the tests that change them run it)."""

        def requires(self):
            yield Retried()
            yield Unlimited()
            yield Fragile()


    class Listener(luigi.Task):
        """Runs until told to stop, answering every scheduler message."""

        accepts_messages = True

        def output(self):
            return luigi.LocalTarget(os.path.join(OUT, "listener"))

        def run(self):
            self.set_status_message("listening")
            self.set_progress_percentage(40)
            while not os.path.exists(os.path.join(OUT, "stop")):
                try:
                    message = self.scheduler_messages.get(timeout=0.1)
                except Exception:
                    continue
                message.respond("pong: " + str(message.content))
            with self.output().open("w") as out:
                out.write("stopped")
    '''
    )
    .replace("IMG_PAYLOAD", repr(IMG_PAYLOAD))
    .replace("SCRIPT_PAYLOAD", repr(SCRIPT_PAYLOAD))
)

LUIGID_CONFIG = """
[scheduler]
retry_delay = 3600
worker_disconnect_delay = 3600
[resources]
db = 2
"""
CLIENT_CONFIG = """
[worker]
ping_interval = 0.1
wait_interval = 0.1
"""


class Site:
    """The module's luigid, the pipeline around it and how to ask it things."""

    def __init__(self, luigid: LuigidProcess, workdir: Path) -> None:
        self.luigid = luigid
        self.workdir = workdir
        self.api = luigid.probe()
        self.base_url = luigid.url.rstrip("/")

    def call(self, method: str, **kwargs: Any) -> Any:
        reply = self.api.call(method, kwargs)
        assert reply.status == 200, reply.body
        return reply.json()["response"]

    def task_id(self, display_name: str) -> str:
        matches = [tid for tid, t in self.call("task_list").items() if t["display_name"] == display_name]
        assert len(matches) == 1, (display_name, matches)
        return matches[0]

    def status(self, task_id: str) -> str:
        return self.call("task_detail", task_id=task_id)["task"]["status"]

    def worker(self, pid: int) -> dict[str, Any]:
        [found] = [w for w in self.call("worker_list") if w.get("pid") == pid]
        return found


def run_luigi(workdir: Path, luigid: LuigidProcess, *args: str, wait: bool = True) -> subprocess.Popen:
    env = luigid_env(workdir, CLIENT_CONFIG)
    env.update(VIS_OUT=str(workdir / "out"), PYTHONPATH=str(workdir))
    argv = [str(LUIGI), "--module", "vis_pipeline", *args, "--scheduler-port", str(luigid.port)]
    process = subprocess.Popen(
        argv, cwd=workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    if wait:
        process.wait(timeout=120)
    return process


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    workdir = tmp_path_factory.mktemp("visualiser")
    (workdir / "out").mkdir()
    (workdir / "vis_pipeline.py").write_text(PIPELINE)
    server_dir = workdir / "luigid"
    server_dir.mkdir()
    with running_luigid(server_dir, config=LUIGID_CONFIG) as luigid:
        site = Site(luigid, workdir)
        site.pipeline = run_luigi(workdir, luigid, "All", "--workers", "2")
        site.listener = run_luigi(workdir, luigid, "Listener", wait=False)
        try:
            wait_until(lambda: site.call("task_list", status="RUNNING"), what="the Listener to run")
            yield site
        finally:
            (workdir / "out" / "stop").write_text("")
            try:
                site.listener.wait(timeout=60)
            except subprocess.TimeoutExpired:
                site.listener.kill()
                site.listener.wait()


@pytest.fixture
def page(chromium: Any) -> Iterator[Any]:
    with checked_page(chromium) as opened:
        yield opened


def confirm(page: Any, label: str) -> None:
    """Press ``label`` in the open dialog (the page's own, never a browser prompt); wait until it closes."""
    dialog = page.locator("dialog.modal[open]")
    handle = dialog.element_handle()
    dialog.locator("button[type=submit]", has_text=label).click()
    page.wait_for_function("d => !d.isConnected", arg=handle)


def open_detail(page: Any, site: Site, task_id: str) -> None:
    open_view(page, site.base_url, f"#tab=tasks&detail={quote(task_id)}")
    page.wait_for_selector("#task-detail .detail-title")


# -- task list ----------------------------------------------------------------------------------------


def test_the_status_counts_match_the_scheduler(page, site):
    open_view(page, site.base_url)
    for status in ("PENDING", "RUNNING", "BATCH_RUNNING", "DONE", "FAILED", "DISABLED"):
        page.wait_for_function(
            "([s, n]) => document.querySelector(`.card[data-status='${s}'] .card-count`).textContent == n",
            arg=[status, str(len(site.call("task_list", status=status)))],
        )
    for upstream in ("UPSTREAM_FAILED", "UPSTREAM_DISABLED", "UPSTREAM_RUNNING", "UPSTREAM_MISSING_INPUT"):
        expected = len(site.call("task_list", status="PENDING", upstream_status=upstream))
        assert card_count(page, upstream) == expected, upstream
    families = page.locator(".family").all_inner_texts()
    assert any(text.startswith("Load") for text in families)


def test_a_status_card_filters_the_list_and_clicking_it_again_clears_the_filter(page, site):
    open_view(page, site.base_url)
    page.locator('.card[data-status="DISABLED"]').click()
    page.wait_for_url("**status=DISABLED**")
    # The list is redrawn after the address changes: wait for the filtered rows, not the old ones.
    page.wait_for_function(
        "() => { const shown = [...document.querySelectorAll('.task-row .col-status .badge')];"
        " return shown.length > 0 && shown.every(badge => badge.textContent.trim() === 'Disabled'); }"
    )
    assert set(page.locator(".task-row .col-status .badge").all_inner_texts()) == {"Disabled"}
    page.locator('.card[data-status="DISABLED"]').click()
    page.wait_for_function("() => !location.hash.includes('status=')")


def test_search_finds_a_task_by_a_parameter_value(page, site):
    open_view(page, site.base_url)
    page.fill("#task-search", "2024-05-02")
    page.wait_for_function(
        "() => [...document.querySelectorAll('.task-row')].length == 2 && location.hash.includes('search=')"
    )
    assert sorted(page.locator(".task-row .col-family").all_inner_texts()) == ["Extract", "Load"]
    assert page.locator(".task-row .params").all_inner_texts() == ["day=2024-05-02"] * 2


def test_sorting_a_column_orders_the_rows(page, site):
    open_view(page, site.base_url, "#tab=tasks&sort=family")
    page.wait_for_selector('th[aria-sort="ascending"] .sort[data-sort="family"]')
    families = page.locator(".task-row .col-family").all_inner_texts()
    assert families == sorted(families)
    page.locator('.sort[data-sort="family"]').click()
    page.wait_for_selector('th[aria-sort="descending"] .sort[data-sort="family"]')
    page.wait_for_function("() => document.querySelector('.task-row .col-family').textContent == 'Report'")


def test_the_detail_of_a_failed_task_shows_its_traceback_as_text(page, site):
    task_id = site.task_id("Load(day=2024-05-05)")
    open_detail(page, site, task_id)
    traceback = page.locator("#task-detail .traceback")
    text = traceback.inner_text()
    assert "ValueError: <b>bad</b> row in 2024-05-05" in text
    assert "\nTraceback (most recent call last):\n" in text and "\n  File " in text  # decoded: line breaks
    assert "\\n" not in text and not text.startswith('"')
    assert traceback.locator("b").count() == 0
    assert page.locator("#task-detail .kv").inner_text().split() == ["day", "2024-05-05"]
    upstream = page.locator("#task-detail .neighbours").first.inner_text()
    assert "Extract(day=2024-05-05)" in upstream


def test_the_detail_shows_the_exception_line_above_the_actions(page, site):
    open_detail(page, site, site.task_id("Load(day=2024-05-05)"))
    headline = page.locator("#task-detail .error-headline")
    assert headline.inner_text() == "ValueError: <b>bad</b> row in 2024-05-05"
    actions = page.locator("#task-detail .detail-actions")
    assert headline.bounding_box()["y"] < actions.bounding_box()["y"]
    assert headline.locator("b").count() == 0


def test_the_frameworks_frames_are_folded_until_asked_for(page, site):
    open_detail(page, site, site.task_id("Load(day=2024-05-05)"))
    traceback = page.locator("#task-detail .traceback")
    folded = traceback.inner_text()
    assert 'vis_pipeline.py", line' in folded  # the task's own frame stays
    assert "luigi/worker/" not in folded
    assert re.search(r"… \d+ framework frames? folded", folded)
    page.locator("#task-detail .frames-toggle").click()
    shown = traceback.inner_text()
    assert "luigi/worker/" in shown and "folded" not in shown
    assert shown.count("\n  File ") > folded.count("\n  File ")
    page.locator("#task-detail .frames-toggle", has_text="Fold").wait_for()


def test_the_traceback_box_grows_with_the_traceback(page, site):
    open_detail(page, site, site.task_id("Load(day=2024-05-05)"))
    page.locator("#task-detail .frames-toggle").click()
    box = page.locator("#task-detail .traceback")
    client, scroll = box.evaluate("el => [el.clientHeight, el.scrollHeight]")
    assert client == scroll  # all of it in view: no scroll bar of its own
    assert client > 200


def test_the_command_to_re_run_a_task_runs_that_task_with_its_parameters(page, site):
    task_id = site.task_id(f"Payload(name={SCRIPT_PAYLOAD})")
    open_detail(page, site, task_id)
    command = page.locator("#task-detail .rerun-command").inner_text()
    assert command.startswith("luigi --module vis_pipeline Payload --name ")
    env = luigid_env(site.workdir, CLIENT_CONFIG)
    env.update(
        VIS_OUT=str(site.workdir / "out"), PYTHONPATH=str(site.workdir), PATH=f"{LUIGI.parent}:{env['PATH']}"
    )
    ran = subprocess.run(
        ["/bin/sh", "-c", f"{command} --local-scheduler"],
        cwd=site.workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # The shell gave luigi the parameter's exact value: the task is the one the scheduler knows, done.
    assert ran.returncode == 0, ran.stderr
    assert f"Payload(name={SCRIPT_PAYLOAD})" in ran.stdout + ran.stderr


def test_the_copy_button_puts_the_command_to_re_run_on_the_clipboard(chromium, site):
    with checked_page(chromium, permissions=["clipboard-read", "clipboard-write"]) as page:
        open_detail(page, site, site.task_id("Load(day=2024-05-05)"))
        page.locator("#task-detail .copy-command").click()
        page.wait_for_selector(".notice-success >> text=Command copied")
        copied = page.evaluate("() => navigator.clipboard.readText()")
    assert copied == "luigi --module vis_pipeline Load --day 2024-05-05"


def test_the_detail_of_a_running_task_shows_progress_and_status_message(page, site):
    open_detail(page, site, site.task_id("Listener()"))
    page.wait_for_selector("#task-detail .progress")
    assert page.locator("#task-detail .progress").get_attribute("aria-valuenow") == "40"
    assert page.locator("#task-detail .status-message").inner_text() == "listening"


@pytest.mark.parametrize(
    ("url", "linked"), [("http://tracker.example/job/7", True), ("javascript:alert(3)", False)]
)
def test_a_tracking_url_is_a_link_only_when_it_is_http(page, site, url, linked):
    task_id = f"Tracked_{linked}"
    site.call("add_task", worker="visualiser-test", task_id=task_id, family="Tracked", tracking_url=url)
    open_detail(page, site, task_id)
    facts = page.locator("#task-detail .facts")
    assert url in facts.inner_text()
    assert facts.locator("a[href]").count() == (1 if linked else 0)
    if linked:
        assert facts.locator("a[href]").get_attribute("href") == url


# -- actions ------------------------------------------------------------------------------------------


def test_forgive_failures_makes_the_failed_task_pending(page, site):
    task_id = site.task_id("Load(day=2024-05-03)")
    open_detail(page, site, task_id)
    page.locator("#task-detail button", has_text="Forgive failures").click()
    confirm(page, "Forgive failures")
    wait_until(lambda: site.status(task_id) == "PENDING", what="the task to be forgiven")
    page.wait_for_selector("#task-detail .detail-title .badge.st-PENDING")


def test_mark_as_done_is_asked_first_and_then_marks_the_task_done(page, site):
    task_id = site.task_id("Load(day=2024-05-04)")
    open_detail(page, site, task_id)
    page.locator("#task-detail button", has_text="Mark as done").click()
    page.locator("dialog.modal[open] button", has_text="Cancel").click()
    assert site.status(task_id) == "FAILED"  # cancelled: nothing changed
    page.locator("#task-detail button", has_text="Mark as done").click()
    confirm(page, "Mark as done")
    wait_until(lambda: site.status(task_id) == "DONE", what="the task to be done")


def test_re_enable_turns_a_disabled_task_into_a_failed_one(page, site):
    task_id = site.task_id("Fragile()")
    open_detail(page, site, task_id)
    page.locator("#task-detail button", has_text="Re-enable").click()
    confirm(page, "Re-enable")
    wait_until(lambda: site.status(task_id) == "FAILED", what="the task to be re-enabled")


def test_narrow_windows_with_the_detail_open_keep_family_and_parameters_readable(chromium, site):
    load = site.task_id("Load(day=2024-05-05)")
    with checked_page(chromium, viewport={"width": 1280, "height": 800}) as page:
        open_detail(page, site, load)
        row = page.locator(f'.task-row[data-task-id="{load}"]')
        row.wait_for()
        family = row.locator(".col-family")
        params = row.locator(".col-params .params")
        assert family.evaluate("el => el.scrollWidth <= el.clientWidth") and family.inner_text() == "Load"
        # The whole "day=2024-05-05" fits: the parameters are not cut to nothing.
        assert params.evaluate("el => el.scrollWidth <= el.clientWidth && el.clientWidth >= 150")
        assert params.is_visible() and family.is_visible()
        assert not page.locator(".task-table th.col-priority").is_visible()  # given up first
        assert not page.locator(".task-table th.col-time_running").is_visible()
        page.locator("#task-detail .btn-icon").click()  # closed, the columns come back
        page.locator(".task-table th.col-priority").wait_for(state="visible")


# -- actions on many, and on a row --------------------------------------------------------------------


def test_forgive_all_forgives_the_failed_tasks_the_searched_list_shows_and_no_other(page, troubled_site):
    retried, unlimited = (troubled_site.task_id(f"{f}()") for f in ("Retried", "Unlimited"))
    assert {troubled_site.status(retried), troubled_site.status(unlimited)} == {"FAILED"}
    open_view(page, troubled_site.base_url, "#tab=tasks&search=Unlimited")
    page.wait_for_function("() => document.querySelectorAll('.task-row').length == 1")
    page.locator("#forgive-all").click()
    dialog = page.locator("dialog.modal[open]")
    assert "1 failed task" in dialog.inner_text() and "Unlimited()" in dialog.inner_text()
    assert "Retried()" not in dialog.inner_text()
    confirm(page, "Forgive 1 task")
    wait_until(lambda: troubled_site.status(unlimited) == "PENDING", what="the searched task to be forgiven")
    page.wait_for_selector(".notice-success >> text=1 task now PENDING")
    assert troubled_site.status(retried) == "FAILED"
    assert troubled_site.status(troubled_site.task_id("Fragile()")) == "DISABLED"


def test_forgive_all_is_asked_first_and_forgives_every_failed_task_of_the_list(page, troubled_site):
    failed = set(troubled_site.call("task_list", status="FAILED"))
    assert len(failed) == 2
    open_view(page, troubled_site.base_url, "#tab=tasks&status=FAILED")
    page.locator("#forgive-all").click()
    page.locator("dialog.modal[open] button", has_text="Cancel").click()
    assert set(troubled_site.call("task_list", status="FAILED")) == failed  # cancelled: nothing changed
    page.locator("#forgive-all").click()
    confirm(page, "Forgive 2 tasks")
    wait_until(
        lambda: not troubled_site.call("task_list", status="FAILED"), what="every failed task forgiven"
    )
    assert {troubled_site.status(task_id) for task_id in failed} == {"PENDING"}
    page.wait_for_selector("#forgive-all[hidden]", state="attached")  # nothing failed is left to forgive


def test_a_hovered_row_offers_its_tasks_actions_without_opening_the_detail(page, troubled_site):
    site = troubled_site
    retried, unlimited, fragile = (site.task_id(f"{f}()") for f in ("Retried", "Unlimited", "Fragile"))
    open_view(page, site.base_url)

    def act(task_id: str, button: str, confirm_label: str) -> None:
        row = page.locator(f'.task-row[data-task-id="{task_id}"]')
        actions = row.locator(".row-actions")
        assert not actions.is_visible()  # out of the way until the row is pointed at
        row.hover()
        actions.locator("button", has_text=button).click()
        confirm(page, confirm_label)

    act(retried, "Forgive", "Forgive failures")
    wait_until(lambda: site.status(retried) == "PENDING", what="the row's task to be forgiven")
    act(fragile, "Re-enable", "Re-enable")
    wait_until(lambda: site.status(fragile) == "FAILED", what="the row's task to be re-enabled")
    act(unlimited, "Mark done", "Mark as done")
    wait_until(lambda: site.status(unlimited) == "DONE", what="the row's task to be done")
    assert page.locator("#task-detail").is_hidden()
    assert "detail=" not in page.evaluate("() => location.hash")


def test_a_running_task_that_accepts_messages_answers_one_sent_from_the_page(page, site):
    open_detail(page, site, site.task_id("Listener()"))
    page.locator("#task-detail button", has_text="Send message").click()
    page.fill("dialog.modal[open] textarea", "are you there?")
    confirm(page, "Send")
    reply = page.locator("dialog.modal[open] pre.reply")
    reply.wait_for(state="visible", timeout=TIMEOUT_MS)
    assert reply.inner_text() == "pong: are you there?"


def test_changing_a_workers_process_count_reaches_the_worker(page, site):
    listener_pid = site.listener.pid
    open_view(page, site.base_url, "#tab=workers")
    card = page.locator(f'.worker-card:has(dd:text-is("{listener_pid}"))')
    card.locator("button", has_text="Processes").click()
    page.fill("dialog.modal[open] input[type=number]", "3")
    confirm(page, "Apply")
    wait_until(lambda: site.worker(listener_pid).get("workers") == 3, what="the worker to run 3 processes")


def test_disabling_a_worker_shows_in_the_worker_list(page, site):
    pid = site.pipeline.pid
    open_view(page, site.base_url, "#tab=workers")
    card = page.locator(f'.worker-card:has(dd:text-is("{pid}"))')
    card.locator("button", has_text="Disable").click()
    confirm(page, "Disable worker")
    wait_until(lambda: site.worker(pid)["state"] == "disabled", what="the worker to be disabled")
    card.locator(".badge.st-DISABLED").wait_for()


def test_changing_a_resource_capacity(page, site):
    open_view(page, site.base_url, "#tab=resource")
    row = page.locator('tr[data-resource="db"]')
    row.locator("button", has_text="Capacity").click()
    page.fill("dialog.modal[open] input[type=number]", "5")
    confirm(page, "Apply")
    wait_until(
        lambda: {r["name"]: r["num_total"] for r in site.call("resource_list")}.get("db") == 5,
        what="the capacity to change",
    )
    page.wait_for_function(
        "() => document.querySelector('tr[data-resource=db] td:nth-of-type(2)').textContent == '5'"
    )


def test_pausing_and_resuming_the_scheduler(page, site):
    open_view(page, site.base_url)
    page.locator("#pause-toggle", has_text="Pause scheduler").click()
    confirm(page, "Pause")
    wait_until(lambda: site.call("is_paused")["paused"], what="the scheduler to pause")
    page.wait_for_selector("#paused-banner:not([hidden])")
    page.locator("#pause-toggle", has_text="Resume scheduler").click()
    confirm(page, "Resume")
    wait_until(lambda: not site.call("is_paused")["paused"], what="the scheduler to resume")


# -- graph --------------------------------------------------------------------------------------------


def expected_shape(graph: dict[str, Any]) -> tuple[int, int]:
    edges = {(dep, tid) for tid, node in graph.items() for dep in node["deps"] if dep in graph and dep != tid}
    return len(graph), len(edges)


@pytest.mark.parametrize(("invert", "hide_done"), [(0, 0), (0, 1), (1, 0)])
def test_the_graph_draws_the_schedulers_nodes_and_edges(page, site, invert, hide_done):
    root = site.task_id("All()") if not invert else site.task_id("Extract(day=2024-05-01)")
    method = "inverse_dep_graph" if invert else "dep_graph"
    nodes, edges = expected_shape(site.call(method, task_id=root, include_done=not hide_done))
    open_view(page, site.base_url, f"#tab=graph&taskId={quote(root)}&hideDone={hide_done}&invert={invert}")
    page.wait_for_selector(".graph-view[data-state=ready]")
    assert page.locator(".graph-svg .node").count() == nodes
    assert page.locator(".graph-svg .edge").count() == edges
    assert page.locator(f'.graph-svg .node.root[data-id="{root}"]').count() == 1


def test_clicking_a_graph_node_opens_its_detail(page, site):
    root = site.task_id("Report()")
    open_view(page, site.base_url, f"#tab=graph&taskId={quote(root)}&hideDone=0&invert=0")
    page.wait_for_selector(".graph-view[data-state=ready]")
    target = site.task_id("Load(day=2024-05-05)")
    page.locator(f'.graph-svg .node[data-id="{target}"]').click()
    page.wait_for_selector("#task-detail .traceback")
    assert page.locator("#task-detail .detail-id").inner_text() == "Load(day=2024-05-05)"


# -- safety -------------------------------------------------------------------------------------------


def test_script_payloads_in_parameters_show_as_text_and_run_nothing(page, site):
    open_view(page, site.base_url, "#tab=tasks&family=Payload")
    page.wait_for_function("() => document.querySelectorAll('.task-row').length == 2")
    shown = set(page.locator(".task-row .params").all_inner_texts())
    assert shown == {f"name={IMG_PAYLOAD}", f"name={SCRIPT_PAYLOAD}"}
    img_task = site.task_id(f"Payload(name={IMG_PAYLOAD})")
    open_detail(page, site, img_task)
    assert page.locator("#task-detail .kv td").inner_text() == IMG_PAYLOAD
    open_view(page, site.base_url, f"#tab=graph&taskId={quote(site.task_id('All()'))}")
    page.wait_for_selector(".graph-view[data-state=ready]")
    assert page.locator("img[src=x], script:not([src])").count() == 0
    assert page.evaluate("() => document.querySelectorAll('script').length") == 1  # our module only
    # The page fixture fails the test if any dialog opened or any console error was logged.


def test_luigid_answers_with_a_content_security_policy_that_forbids_inline_scripts(site):
    for path in ("/static/visualiser/index.html", "/static/visualiser/js/main.js"):
        policy = site.api.request("GET", path).headers["Content-Security-Policy"]
        directives = dict(part.strip().split(" ", 1) for part in policy.split(";") if part.strip())
        assert directives["script-src"] == "'self'"
        assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    assert "Content-Security-Policy" in site.api.call("task_counts").headers


# -- addresses and live updates -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fragment", "nav", "marker"),
    [
        ("#tab=tasks", "Tasks", ".tasks-view"),
        ("#tab=workers", "Workers", ".worker-card"),
        ("#tab=resource", "Resources", ".resource-table"),
    ],
)
def test_luigis_bookmarked_addresses_open_the_right_view(page, site, fragment, nav, marker):
    open_view(page, site.base_url, fragment)
    page.wait_for_selector(marker)
    assert page.locator(".nav-link.active").inner_text() == nav


def test_a_bookmarked_graph_address_restores_the_task_and_options(page, site):
    root = site.task_id("Report()")
    open_view(page, site.base_url, f"#tab=graph&taskId={quote(root)}&hideDone=1&invert=0")
    page.wait_for_selector(".graph-view[data-state=ready]")
    assert page.locator(".nav-link.active").inner_text() == "Graph"
    assert page.input_value(".task-input") == root
    assert page.is_checked("#hide-done")
    assert page.locator(".seg.active").inner_text() == "Upstream"


def test_the_open_page_shows_new_tasks_without_reloading(page, site):
    open_view(page, site.base_url)
    before = card_count(page, "PENDING")
    page.evaluate("() => { window.notReloaded = true; }")
    site.call(
        "add_task", worker="visualiser-test", task_id="LiveProbe_1", family="LiveProbe", params={"n": "1"}
    )
    page.wait_for_function(
        "n => document.querySelector(`.card[data-status='PENDING'] .card-count`).textContent == n",
        arg=str(before + 1),
    )
    assert page.evaluate("() => window.notReloaded") is True


# -- a separate luigid: retries, unreachable, token ----------------------------------------------------


@pytest.fixture
def troubled_site(tmp_path: Path) -> Iterator[Site]:
    """A luigid of its own where ``Retried`` (retry_count 3) and ``Unlimited`` (999999999) failed once
    each and ``Fragile`` is disabled."""
    (tmp_path / "out").mkdir()
    (tmp_path / "vis_pipeline.py").write_text(PIPELINE)
    (tmp_path / "luigid").mkdir()
    with running_luigid(tmp_path / "luigid", config=LUIGID_CONFIG) as luigid:
        run_luigi(tmp_path, luigid, "Troubled")
        yield Site(luigid, tmp_path)


@pytest.mark.parametrize(("family", "shown"), [("Retried", "retry 1 of 3"), ("Unlimited", "retry 1")])
def test_a_failed_tasks_retry_leaves_out_a_retry_count_that_means_unlimited(
    page, troubled_site, family, shown
):
    task_id = troubled_site.task_id(f"{family}()")
    assert troubled_site.status(task_id) == "FAILED"
    open_detail(page, troubled_site, task_id)
    retry = page.locator("#task-detail dt:text-is('Retry') + dd")
    assert retry.inner_text().split(" at ")[0] == shown


def test_a_graph_of_one_task_counts_it_in_the_singular(page, troubled_site):
    task_id = troubled_site.task_id("Retried()")
    open_view(page, troubled_site.base_url, f"#tab=graph&taskId={quote(task_id)}&hideDone=0&invert=0")
    page.wait_for_selector(".graph-view[data-state=ready]")
    stats = page.locator(".graph-view .summary").inner_text()
    assert stats.startswith("1 task · 0 dependencies · laid out in "), stats


def test_the_page_says_when_the_scheduler_stops_answering(chromium, tmp_path):
    with running_luigid(tmp_path) as luigid, watched_page(chromium) as page:
        open_view(page, luigid.url)
        luigid.stop()
        page.wait_for_selector("#banner:not([hidden])")
        assert "not answering" in page.locator("#banner").inner_text()
        assert page.locator("#connection").inner_text() == "Unreachable"


def test_with_an_auth_token_the_page_asks_once_and_keeps_it_for_the_session(chromium, tmp_path):
    config = "[scheduler]\nauth_token = s3cret-token\n"
    with running_luigid(tmp_path, config=config) as luigid, watched_page(chromium) as page:
        page.goto(f"{luigid.url}static/visualiser/index.html#tab=tasks")
        page.fill("dialog.modal[open] input[type=password]", "wrong")
        confirm(page, "Use token")
        page.wait_for_selector("dialog.modal[open] >> text=refused the token")  # asked again
        page.fill("dialog.modal[open] input[type=password]", "s3cret-token")
        confirm(page, "Use token")
        page.wait_for_selector("#connection.up")
        page.reload()
        page.wait_for_selector("#connection.up")
        assert page.locator("dialog.modal[open]").count() == 0
        assert page.evaluate("() => sessionStorage.getItem('luigi.visualiser.token')") == "s3cret-token"
        page.problems.clear()  # the browser logs each refused request (401) as a console error


# -- a big scheduler in this process: grouping, narrowing, paging ----------------------------------


@pytest.fixture(scope="module")
def big_site() -> Iterator[str]:
    """2,401 tasks (Root <- 400 Part <- 2,000 Leaf) behind a server listing at most 1,000 at once."""
    scheduler = Scheduler(SchedulerConfig(max_shown_tasks=1000, record_task_history=False))
    parts = []
    for p in range(400):
        leaves = [f"Leaf_{p}_{i}" for i in range(5)]
        for leaf in leaves:
            scheduler.add_task(
                worker="big", task_id=leaf, family="Leaf", params={"part": str(p), "i": leaf[-1]}
            )
        part = f"Part_{p}"
        scheduler.add_task(worker="big", task_id=part, family="Part", params={"part": str(p)}, deps=leaves)
        parts.append(part)
    scheduler.add_task(worker="big", task_id="Root", family="Root", deps=parts)
    with serving_in_thread(scheduler, ServerSettings()) as server:
        yield server.base_url()


def test_a_graph_beyond_2000_tasks_is_grouped_by_family(page, big_site):
    open_view(page, big_site, "#tab=graph&taskId=Root&hideDone=0&invert=0")
    page.wait_for_selector(".graph-view[data-state=ready]")
    assert sorted(n.get_attribute("data-id") for n in page.locator(".graph-svg .node-family").all()) == [
        "Leaf",
        "Part",
        "Root",
    ]
    assert page.locator(".graph-svg .edge").count() == 2
    assert "grouped by family" in page.locator(".graph-message").inner_text()
    page.locator('.graph-svg .node[data-id="Part"]').click()
    page.wait_for_url("**#tab=tasks&family=Part")
    page.wait_for_selector(".task-row")


def test_past_max_shown_tasks_the_list_shows_the_counts_and_asks_to_narrow_down(page, big_site):
    open_view(page, big_site)
    notice = page.locator(".table-area .notice-box")
    notice.wait_for()
    assert "2,401 tasks match" in notice.inner_text()
    assert "max_shown_tasks = 1,000" in notice.inner_text()
    assert card_count(page, "PENDING") == 2401
    page.locator('.family[data-family="Part"]').click()
    page.wait_for_selector(".task-row")
    assert page.locator(".summary").first.inner_text() == "1–50 of 400 tasks"


def test_pages_move_through_the_list_and_keep_their_place_in_the_address(page, big_site):
    open_view(page, big_site, "#tab=tasks&family=Part&sort=params")
    page.wait_for_selector(".task-row")
    first = page.locator(".task-row").first.get_attribute("data-task-id")
    page.locator(".pager a", has_text="›").click()
    page.wait_for_url("**page=2**")
    page.wait_for_function(f"() => document.querySelector('.task-row').dataset.taskId !== {first!r}")
    assert page.locator(".page-of").inner_text() == "Page 2 of 8"
    page.select_option(".page-size", "200")
    page.wait_for_function("() => document.querySelectorAll('.task-row').length == 200")


def test_an_upstream_card_lists_the_pending_tasks_blocked_that_way(page, site):
    expected = set(site.call("task_list", status="PENDING", upstream_status="UPSTREAM_FAILED"))
    assert expected  # Report and All wait on failed loads
    open_view(page, site.base_url)
    page.locator('.card[data-status="UPSTREAM_FAILED"]').click()
    page.wait_for_url("**status=UPSTREAM_FAILED**")
    page.wait_for_function(f"() => document.querySelectorAll('.task-row').length == {len(expected)}")
    shown = {row.get_attribute("data-task-id") for row in page.locator(".task-row").all()}
    assert shown == expected


def test_forgive_all_reaches_failed_tasks_on_every_page_of_a_long_list(page):
    """1,234 failures: past one task_page (1,000) of the collection and many requests of forgive calls."""
    scheduler = Scheduler(SchedulerConfig(record_task_history=False, retry_delay=3600))
    failed = [f"Flaky_{n}" for n in range(1234)]
    for task_id in failed:
        scheduler.add_task(worker="big", task_id=task_id, family="Flaky", params={"n": task_id[6:]})
        scheduler.add_task(worker="big", task_id=task_id, status="FAILED", expl='"flaky"')
    scheduler.add_task(worker="big", task_id="Steady", family="Steady", status="FAILED", expl='"no"')
    with serving_in_thread(scheduler, ServerSettings()) as server:
        open_view(page, server.base_url(), "#tab=tasks&family=Flaky")
        page.locator("#forgive-all").click()
        dialog = page.locator("dialog.modal[open]")
        assert "1,234 failed tasks" in dialog.inner_text() and "…and 1,226 more" in dialog.inner_text()
        confirm(page, "Forgive 1,234 tasks")
        page.wait_for_selector(".notice-success >> text=1,234 tasks now PENDING")
    assert set(scheduler.task_list(status="PENDING")) == set(failed)
    assert list(scheduler.task_list(status="FAILED")) == ["Steady"]  # another family: not on the list
