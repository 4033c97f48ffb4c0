"""Schedule deadlines through a real ``luigid`` running real ``luigi`` children: a run still going at its
deadline, and one that failed before it, each raise one late alert (an e-mail through a real SMTP server
and a JSON POST to a real HTTP receiver), shown in ``schedule_list`` and counted on ``/metrics``; a run
that ends well in time raises none; ``kill -9`` and restarts neither repeat nor forget an alert."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest
from helpers.json_http import JsonHandler, serving
from helpers.luigid import HttpProbe, LuigidProcess, free_port, running_luigid, wait_until
from helpers.schedules import cron, runs, schedule_config
from helpers.smtp_server import Mailbox, smtp_on_localhost
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.slow

RUN_TIMEOUT = 60.0
NEVER = "0 4 1 1 *"  # a cron slot the tests never reach: their runs are started by hand ("run now")
RECEIVER = "ops@example.com"
HOOK_PATH = "/hooks/s3cr3t-token"


class WebhookReceiver(JsonHandler):
    """Keeps each POST's path, content type and JSON body in ``received`` (one list per test)."""

    received: list[tuple[str, str, dict[str, Any]]]
    lock = threading.Lock()

    def do_POST(self) -> None:  # noqa: N802  # the http.server name
        body = self.read_json()
        with self.lock:
            self.received.append((self.path, self.headers.get("Content-Type", ""), body))
        self.reply(200, {"ok": True})


@contextmanager
def webhook_receiver() -> Iterator[tuple[str, list[tuple[str, str, dict[str, Any]]]]]:
    """A real HTTP receiver: its URL for ``webhook_url``, and the POSTs it got."""
    received: list[tuple[str, str, dict[str, Any]]] = []
    handler = type("Receiver", (WebhookReceiver,), {"received": received})
    with serving(handler, "webhook-receiver") as url:
        yield url + HOOK_PATH, received


def site_config(workdir: Path, smtp_port: int, webhook_url: str) -> str:
    """Three schedules run by hand: ``slow`` holds past its 1 s deadline, ``failing`` fails well before its
    hour, ``quick`` ends well within its ten minutes."""
    extra = (
        # a run whose luigid was killed gives up on it within seconds (not the 600 s ride-out)
        "[retcode]\ntask_failed = 30\n\n[worker]\nsend_failure_email = false\n"
        "scheduler_unreachable_timeout = 3\n\n"
        "[scheduler]\nmetrics_collector = prometheus\n\n"
        f"[email]\nreceiver = {RECEIVER}\nsender = luigid@example.com\n\n"
        f"[smtp]\nhost = 127.0.0.1\nport = {smtp_port}\n\n"
        f"[notifications]\nwebhook_url = {webhook_url}\n\n"
    )
    return schedule_config(
        workdir,
        cron("slow", NEVER, task="Hold", more="deadline = 1s\n"),
        cron("failing", NEVER, task="Fail", more="deadline = 1h\n"),
        cron("quick", NEVER, more="deadline = 10m\n"),
        extra=extra,
    )


def trigger(probe: HttpProbe, name: str) -> int:
    reply = probe.call("schedule_trigger", {"name": name})
    assert reply.status == 200, reply.body
    return int(reply.json()["response"]["run"])


def the_run(probe: HttpProbe, name: str, run_id: int) -> dict[str, Any]:
    (found,) = [run for run in runs(probe, name) if run["id"] == run_id]
    return found


def posts_for(received: list[tuple[str, str, dict[str, Any]]], run_id: int) -> list[dict[str, Any]]:
    return [body for _path, _kind, body in list(received) if body.get("run") == run_id]


def late_mails(box: Mailbox) -> list[Any]:
    return [delivery for delivery in box.to(RECEIVER) if " is late " in delivery.subject]


def late_counts(probe: HttpProbe) -> dict[str, float]:
    """``luigid_schedule_late_total`` per schedule, from luigid's Prometheus page."""
    page = probe.request("GET", "/metrics").body.decode()
    return {
        sample.labels["schedule"]: sample.value
        for family in text_string_to_metric_families(page)
        for sample in family.samples
        if sample.name == "luigid_schedule_late_total"
    }


def judged_on_time(probe: HttpProbe, name: str, run_id: int) -> bool:
    return the_run(probe, name, run_id)["late"] is False


def run_quick_on_time(probe: HttpProbe) -> int:
    """Run ``quick`` and wait until luigid has judged it on time: a barrier after which any alert luigid
    was going to send for an earlier run would have been sent."""
    run_id = trigger(probe, "quick")
    wait_until(lambda: judged_on_time(probe, "quick", run_id), RUN_TIMEOUT, what="quick judged on time")
    return run_id


def luigi_children(luigid: LuigidProcess) -> list[psutil.Process]:
    return psutil.Process(luigid.pid).children(recursive=True)


def kill_9(luigid: LuigidProcess) -> list[psutil.Process]:
    """``kill -9`` luigid; returns its children, which outlive it (their own session)."""
    children = luigi_children(luigid)
    luigid.process.send_signal(signal.SIGKILL)
    luigid.process.wait(timeout=RUN_TIMEOUT)
    return children


def release_holds(workdir: Path, orphans: list[psutil.Process]) -> None:
    """Let the Hold tasks end, and wait until the children a killed luigid left are gone."""
    (workdir / "release").touch()
    _gone, alive = psutil.wait_procs(orphans, timeout=RUN_TIMEOUT)
    assert alive == [], alive


def test_a_run_past_its_deadline_and_one_that_failed_before_it_raise_one_alert_each(tmp_path):
    with smtp_on_localhost() as box, webhook_receiver() as (url, received):
        try:
            with running_luigid(tmp_path, config=site_config(tmp_path, box.port, url)) as luigid:
                probe = luigid.probe()
                slow = trigger(probe, "slow")
                (alert,) = wait_until(lambda: posts_for(received, slow), RUN_TIMEOUT, what="the late POST")
                shown = the_run(probe, "slow", slow)
                assert (shown["outcome"], shown["late"]) == ("running", True)
                assert shown["deadline"] == shown["started"] + 1.0
                assert alert == {
                    "event": "schedule_late",
                    "schedule": "slow",
                    "run": slow,
                    "started": shown["started"],
                    "deadline": shown["deadline"],
                    "outcome": "running",
                    "exit_code": None,
                }
                assert [(path, kind) for path, kind, _ in received] == [(HOOK_PATH, "application/json")]
                (mail,) = wait_until(lambda: late_mails(box), RUN_TIMEOUT, what="the late e-mail")
                assert mail.subject == f"Luigi: schedule slow is late (run #{slow})"
                assert mail.mail_from == "luigid@example.com"
                assert f"Run #{slow} of schedule slow did not end well by its deadline." in mail.body
                assert "Now: still running" in mail.body
                assert late_counts(probe) == {"slow": 1.0, "failing": 0.0, "quick": 0.0}

                failing = trigger(probe, "failing")
                (failed,) = wait_until(lambda: posts_for(received, failing), RUN_TIMEOUT, what="its POST")
                record = the_run(probe, "failing", failing)
                assert (failed["outcome"], failed["exit_code"], record["late"]) == ("ended", 30, True)
                assert record["ended"] < failed["deadline"] == record["started"] + 3600.0  # alerted at once

                (tmp_path / "release").touch()
                ended = wait_until(
                    lambda: (
                        the_run(probe, "slow", slow)["outcome"] == "ended" and the_run(probe, "slow", slow)
                    ),
                    RUN_TIMEOUT,
                    what="slow to end",
                )
                assert (ended["exit_code"], ended["late"]) == (0, True)  # it ended well, but too late
                quick = run_quick_on_time(probe)
                assert the_run(probe, "quick", quick)["deadline"] is not None
                assert [body["run"] for _path, _kind, body in received] == [slow, failing]
                assert len(late_mails(box)) == 2
                assert late_counts(probe) == {"slow": 1.0, "failing": 1.0, "quick": 0.0}
                assert f"Schedule slow: run #{slow} is late" in luigid.logs()
        finally:
            (tmp_path / "release").touch()


def test_after_kill_9_between_the_deadline_and_the_end_a_restart_sends_no_second_alert(tmp_path):
    orphans: list[psutil.Process] = []
    with smtp_on_localhost() as box, webhook_receiver() as (url, received):
        config = site_config(tmp_path, box.port, url)
        try:
            with running_luigid(tmp_path, config=config) as luigid:
                probe = luigid.probe()
                slow = trigger(probe, "slow")
                wait_until(lambda: posts_for(received, slow), RUN_TIMEOUT, what="the late POST")
                wait_until(lambda: late_mails(box), RUN_TIMEOUT, what="the late e-mail")
                wait_until(lambda: luigi_children(luigid), RUN_TIMEOUT, what="the run's process")
                orphans = kill_9(luigid)
            with running_luigid(tmp_path, config=config) as again:
                probe = again.probe()
                lost = the_run(probe, "slow", slow)
                assert (lost["outcome"], lost["late"]) == ("lost", True)
                assert late_counts(probe)["slow"] == 1.0  # the count is kept, not counted again
                run_quick_on_time(probe)
                assert len(posts_for(received, slow)) == 1 and len(received) == 1
                assert len(late_mails(box)) == 1
        finally:
            release_holds(tmp_path, orphans)


def test_a_run_that_went_late_while_luigid_was_down_is_alerted_once_when_it_comes_back(tmp_path):
    orphans: list[psutil.Process] = []
    with smtp_on_localhost() as box, webhook_receiver() as (url, received):
        config = site_config(tmp_path, box.port, url).replace("deadline = 1s", "deadline = 5s")
        try:
            with running_luigid(tmp_path, config=config) as luigid:
                probe = luigid.probe()
                slow = trigger(probe, "slow")
                started = wait_until(
                    lambda: the_run(probe, "slow", slow)["started"], RUN_TIMEOUT, what="the run to start"
                )
                wait_until(lambda: luigi_children(luigid), RUN_TIMEOUT, what="the run's process")
                orphans = kill_9(luigid)
            assert time.time() < started + 5.0 and received == []  # killed before its deadline: no alert yet
            wait_until(
                lambda: time.time() > started + 5.5, 10, what="the deadline to pass while luigid is down"
            )
            with running_luigid(tmp_path, config=config) as again:
                (alert,) = wait_until(lambda: posts_for(received, slow), RUN_TIMEOUT, what="the late POST")
                assert (alert["outcome"], alert["deadline"]) == ("lost", started + 5.0)
                wait_until(lambda: late_mails(box), RUN_TIMEOUT, what="the late e-mail")
                assert late_counts(again.probe())["slow"] == 1.0
            with running_luigid(tmp_path, config=config) as once_more:  # a clean restart repeats nothing
                probe = once_more.probe()
                run_quick_on_time(probe)
                assert the_run(probe, "slow", slow)["late"] is True
                assert len(received) == 1 and len(late_mails(box)) == 1
                assert late_counts(probe)["slow"] == 1.0
        finally:
            release_holds(tmp_path, orphans)


def test_a_webhook_that_cannot_be_reached_is_one_log_line_and_the_email_still_goes(tmp_path):
    closed = f"http://127.0.0.1:{free_port()}{HOOK_PATH}"
    with smtp_on_localhost() as box:
        with running_luigid(tmp_path, config=site_config(tmp_path, box.port, closed)) as luigid:
            probe = luigid.probe()
            failing = trigger(probe, "failing")
            wait_until(lambda: late_mails(box), RUN_TIMEOUT, what="the late e-mail")
            line = f"Schedule failing: the late alert for run #{failing} could not be posted to 127.0.0.1:"
            wait_until(lambda: line in luigid.logs(), RUN_TIMEOUT, what="the failure in luigid's log")
            run_quick_on_time(probe)  # luigid goes on
            logs = luigid.logs()
    assert logs.count(line) == 1
    assert "s3cr3t" not in logs  # the receiver's path may hold a token: only its host is named
    assert "Traceback" not in logs
