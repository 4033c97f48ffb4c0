"""Schedules through a real ``luigid`` subprocess starting real ``luigi`` children: runs on time with their
exit code and log, a slot skipped while a run is going, ``kill -9`` and restart without a slot run twice,
catch-up after downtime, the buttons over HTTP, and a bad section refused at start."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter

import pytest
from helpers.luigid import LUIGID, free_port, luigid_env, running_luigid, wait_until
from helpers.schedules import every, ran_stamps, runs, schedule_config, schedules

pytestmark = pytest.mark.slow

RUN_TIMEOUT = 60.0


def ended(entries):
    return [run for run in entries if run["outcome"] == "ended"]


def test_every_2s_gives_each_slot_a_run_or_a_skip_and_its_runs_end_with_exit_code_0_and_their_log(tmp_path):
    config = schedule_config(tmp_path, every("tick", "2s"))
    with running_luigid(tmp_path, config=config) as luigid:
        ready = time.time()
        probe = luigid.probe()
        done = wait_until(
            lambda: len(ended(runs(probe, "tick"))) >= 3 and ended(runs(probe, "tick")), RUN_TIMEOUT
        )
        # Every 2 s slot from the first after luigid started is accounted for, in order: a run started on
        # it, or it was recorded as skipped because a run was still going (a loaded machine can make a
        # run outlast its 2 s, so how many slots run is not fixed; that none is lost is).
        entries = [run for run in runs(probe, "tick") if run["id"] <= done[2]["id"]]
        assert [run["id"] for run in entries] == list(range(1, len(entries) + 1)), entries
        first = entries[0]["slot"]
        assert first <= ready + 2.0 and first % 2 == 0, (ready, entries)
        assert [run["slot"] for run in entries] == [first + 2.0 * i for i in range(len(entries))], entries
        for run in entries:
            if run["outcome"] == "skipped":
                assert run["note"].endswith("of this schedule was still going"), run
        assert [run for run in entries if run["outcome"] != "skipped"] == done[:3], entries
        for run in done[:3]:
            assert (run["exit_code"], run["meaning"], run["kind"]) == (0, "success", "slot")
            assert run["scheduled_time"] == run["slot"] and run["slot"] % 2 == 0
            log = probe.call("schedule_log", {"name": "tick", "run": run["id"]}, verb="GET").json()[
                "response"
            ]
            assert log["ended"] and log["has_log"] and log["bytes"] == run["log_bytes"] > 0
            stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(run["slot"]))
            assert f"marker {stamp}" in log["text"]
            assert "This progress looks :)" in log["text"]  # the child's own summary, scheduled by luigid
        entry = schedules(probe)["tick"]
        assert entry["cadence"] == "every 2s" and entry["timezone"] == "UTC" and not entry["paused"]
        assert entry["env"] == ["PYTHONPATH", "SCHED_DIR"]
        assert entry["next_due"] > done[-1]["slot"]
        assert "Schedule tick: run #1 started" in luigid.logs()


def test_a_slot_that_comes_while_the_run_is_still_going_is_recorded_as_skipped(tmp_path):
    config = schedule_config(tmp_path, every("hold", "2s", task="Hold"))
    with running_luigid(tmp_path, config=config) as luigid:
        probe = luigid.probe()
        skipped = wait_until(
            lambda: [run for run in runs(probe, "hold") if run["outcome"] == "skipped"], RUN_TIMEOUT
        )
        going = [run for run in runs(probe, "hold") if run["outcome"] == "running"]
        assert len(going) == 1
        assert skipped[0]["slot"] > going[0]["slot"]
        assert skipped[0]["note"] == f"run #{going[0]['id']} of this schedule was still going"
        assert schedules(probe)["hold"]["running"] == going[0]["id"]
        (tmp_path / "release").touch()
        first = wait_until(
            lambda: [
                run
                for run in runs(probe, "hold")
                if run["id"] == going[0]["id"] and run["outcome"] == "ended"
            ],
            RUN_TIMEOUT,
        )
        assert first[0]["exit_code"] == 0
        log = probe.call("schedule_log", {"name": "hold", "run": first[0]["id"]}).json()["response"]
        assert "holding" in log["text"] and "released" in log["text"]
        slots = [run["slot"] for run in runs(probe, "hold")]
        assert len(slots) == len(set(slots))


def test_after_kill_9_and_a_restart_no_slot_ran_twice(tmp_path):
    config = schedule_config(tmp_path, every("tick", "2s"))
    with running_luigid(tmp_path, config=config) as luigid:
        probe = luigid.probe()
        wait_until(lambda: len(ended(runs(probe, "tick"))) >= 2, RUN_TIMEOUT)
        luigid.process.send_signal(signal.SIGKILL)
        luigid.process.wait(timeout=RUN_TIMEOUT)
        killed_at = time.time()
    before = ran_stamps(tmp_path)
    with running_luigid(tmp_path, config=config) as again:
        probe = again.probe()
        wait_until(lambda: [r for r in ended(runs(probe, "tick")) if r["started"] > killed_at], RUN_TIMEOUT)
        entries = runs(probe, "tick")
    stamps = ran_stamps(tmp_path)
    assert len(stamps) > len(before) >= 2
    assert [stamp for stamp, n in Counter(stamps).items() if n > 1] == []
    slots = [run["slot"] for run in entries if run["slot"] is not None]
    assert len(slots) == len(set(slots))
    # A run the kill interrupted is recorded as lost, never run again; missed slots are one "missed" row
    # (and on a busy machine a run may outlast 2 s, so its next slot is skipped).
    seen = {run["outcome"] for run in entries}
    assert seen <= {"ended", "lost", "missed", "skipped", "running", "starting"}


def test_with_catchup_the_slots_missed_while_down_run_oldest_first_once_each(tmp_path):
    config = schedule_config(tmp_path, every("tick", "2s", more="catchup = true\n"))
    with running_luigid(tmp_path, config=config) as luigid:
        probe = luigid.probe()
        wait_until(lambda: ended(runs(probe, "tick")), RUN_TIMEOUT)
        luigid.process.send_signal(signal.SIGKILL)
        luigid.process.wait(timeout=RUN_TIMEOUT)
    down_since = time.time()
    wait_until(lambda: time.time() > down_since + 4.5, 10, what="two slots to pass while luigid is down")
    with running_luigid(tmp_path, config=config) as again:
        probe = again.probe()
        caught = wait_until(
            lambda: (
                len([r for r in ended(runs(probe, "tick")) if r["kind"] == "catch-up"]) >= 2
                and [r for r in runs(probe, "tick") if r["kind"] == "catch-up"]
            ),
            RUN_TIMEOUT,
        )
        entries = runs(probe, "tick")
    catch_up_slots = [run["slot"] for run in caught]
    assert catch_up_slots == sorted(catch_up_slots)
    assert all(slot < down_since + 5 for slot in catch_up_slots[:2])
    slots = [run["slot"] for run in entries if run["slot"] is not None]
    assert len(slots) == len(set(slots))
    assert [stamp for stamp, n in Counter(ran_stamps(tmp_path)).items() if n > 1] == []


def test_pause_resume_and_trigger_over_http_post_only_under_the_token(tmp_path):
    token = "sched-token-1"
    config = schedule_config(tmp_path, every("tick", "2s"), extra=f"[scheduler]\nauth_token = {token}\n\n")
    with running_luigid(tmp_path, config=config) as luigid:
        anonymous, probe = luigid.probe(), luigid.probe(token=token)
        assert anonymous.call("schedule_pause", {"name": "tick"}).status == 401
        assert probe.call("schedule_pause", {"name": "tick"}, verb="GET").status == 405
        assert (
            probe.call("schedule_pause", {"name": "nope"})
            .json()["error"]
            .startswith("luigid has no schedule named 'nope'")
        )
        paused = probe.call("schedule_pause", {"name": "tick"}).json()["response"]
        assert paused["paused"] is True
        paused_at = time.time()
        # A run started before the pause may still be going; run now waits for none (it would be refused).
        wait_until(lambda: schedules(probe)["tick"]["running"] is None, RUN_TIMEOUT, what="no run going")
        now_run = probe.call("schedule_trigger", {"name": "tick"}).json()["response"]
        manual = wait_until(
            lambda: [r for r in ended(runs(probe, "tick")) if r["id"] == now_run["run"]], RUN_TIMEOUT
        )
        assert (manual[0]["kind"], manual[0]["slot"], manual[0]["exit_code"]) == ("manual", None, 0)
        wait_until(lambda: time.time() > paused_at + 4.5, 10, what="two slots to pass while paused")
        assert [r for r in runs(probe, "tick") if r["slot"] is not None and r["slot"] > paused_at] == []
    # Pause is durable: a restarted luigid keeps the schedule paused.
    with running_luigid(tmp_path, config=config) as again:
        probe = again.probe(token=token)
        assert schedules(probe)["tick"]["paused"] is True
        resumed = probe.call("schedule_resume", {"name": "tick"}).json()["response"]
        assert resumed["paused"] is False
        resumed_at = time.time()
        wait_until(
            lambda: [
                r for r in ended(runs(probe, "tick")) if r["kind"] == "slot" and r["started"] > resumed_at
            ],
            RUN_TIMEOUT,
        )


@pytest.mark.parametrize(
    ("section", "line"),
    [
        (
            "[schedule:nightly]\ncron = 61 * * * *\ncommand = --module m T\n",
            "luigid: [schedule:nightly] cron: ",
        ),
        ("[schedule:nightly]\nevery = 1h\ncommand =\n", "luigid: [schedule:nightly] command: is empty"),
        (
            "[schedule:nightly]\nevery = 1h\ncommand = --module m T\ncolour = red\n",
            "luigid: [schedule:nightly] colour:",
        ),
        (
            "[schedule:nightly]\nevery = 1h\ncommand = m\ntimezone = Nowhere/City\n",
            "luigid: [schedule:nightly] timezone:",
        ),
        ("[schedule:nightly]\ncommand = --module m T\n", "luigid: [schedule:nightly] cron/every:"),
        (
            "[schedule:nightly]\nevery = 1h\ncommand = --module m T\ndeadline = soon\n",
            "luigid: [schedule:nightly] deadline: 'soon' is not a positive duration; write e.g. 45m",
        ),
        ("[notifications]\nwebhook_url = hooks.example.com\n", "luigid: [notifications] webhook_url: "),
    ],
)
def test_a_bad_section_stops_luigid_at_start_with_one_line_and_status_1(tmp_path, section, line):
    good = "[schedule:fine]\nevery = 1h\ncommand = --module m T\n\n"
    state = tmp_path / "state" / "luigid-state.db"
    argv = [str(LUIGID), "--port", str(free_port()), "--state-path", str(state)]
    finished = subprocess.run(
        argv, env=luigid_env(tmp_path, good + section), capture_output=True, text=True, timeout=RUN_TIMEOUT
    )
    assert finished.returncode == 1
    errors = [text for text in finished.stderr.splitlines() if text.startswith("luigid:")]
    assert len(errors) == 1 and errors[0].startswith(line), finished.stderr
    assert "Traceback" not in finished.stderr
    assert not state.parent.exists()  # nothing was started or created: not even the good schedule
    assert not os.path.exists(tmp_path / "state.schedules")


def test_on_a_unix_socket_the_runs_reach_luigid_through_the_socket(tmp_path):
    config = schedule_config(tmp_path, every("tick", "2s"))
    with running_luigid(tmp_path, config=config, unix_socket=str(tmp_path / "luigid.sock")) as luigid:
        probe = luigid.probe()
        done = wait_until(lambda: ended(runs(probe, "tick")), RUN_TIMEOUT)
        assert done[0]["exit_code"] == 0
        tasks = probe.call("task_list", {"status": "DONE"}, verb="GET").json()["response"]
        assert {task["name"] for task in tasks.values()} == {"Stamp"}  # the run's worker reported to luigid
    assert "--scheduler-url', 'http+unix://" in luigid.logs()
