"""Backfills through a real ``luigid`` subprocess running Luigi's ``RangeDaily`` as a real ``luigi`` child:
progress to 5/5 with the task's parameters, cancel, ``kill -9`` of luigid mid-backfill resumed with no day
run twice, bad requests refused in one line, and the mutating calls POST only."""

from __future__ import annotations

import signal

import pytest
from helpers.backfills import backfill_workdir, backfills, counted, open_gate, start_backfill
from helpers.luigid import pid_alive, running_luigid, wait_until

pytestmark = pytest.mark.slow

RUN_TIMEOUT = 90.0
DAYS = [f"2024-01-0{day}" for day in range(1, 6)]
# The day a killed luigid's child was running fails once its worker is seen gone, and is retried: soon
# here (the defaults are 60 s and 900 s).
CONFIG = "[scheduler]\nworker_disconnect_delay = 2\nretry_delay = 1\n"


def test_a_backfill_over_five_days_runs_each_once_with_its_parameters_and_reaches_5_of_5(tmp_path):
    env = backfill_workdir(tmp_path, open_all=True)
    with running_luigid(tmp_path, config=CONFIG, env=env) as luigid:
        probe = luigid.probe()
        started = start_backfill(probe, params={"region": "us"}, concurrency=2)
        assert (started["state"], started["done"], started["total"]) == ("running", 0, 5)
        finished = wait_until(
            lambda: (entry := backfills(probe)[started["id"]])["state"] == "ended" and entry, RUN_TIMEOUT
        )
        assert (finished["exit_code"], finished["meaning"]) == (0, "success")
        progress = wait_until(lambda: backfills(probe)[started["id"]]["done"] == 5, RUN_TIMEOUT)
        assert progress
        assert sorted(path.name for path in (tmp_path / "out").iterdir()) == [f"us-{day}" for day in DAYS]
        assert counted(tmp_path, "finished.txt") == {f"us-{day}": 1 for day in DAYS}
        log = probe.call("backfill_log", {"id": started["id"]}, verb="GET").json()["response"]
        assert "RangeDaily" in log["text"] and log["attempt"] == 1
        assert f"Backfill #{started['id']}: ended with exit code 0" in luigid.logs()


def test_cancel_stops_the_child_and_marks_the_backfill_cancelled(tmp_path):
    env = backfill_workdir(tmp_path)
    with running_luigid(tmp_path, config=CONFIG, env=env) as luigid:
        probe = luigid.probe()
        started = start_backfill(probe)
        wait_until(lambda: counted(tmp_path, "started.txt"), RUN_TIMEOUT, what="the first day to start")
        pid = backfills(probe)[started["id"]]["pid"]
        assert pid is not None and pid_alive(pid)
        cancelled = probe.call("backfill_cancel", {"id": started["id"]}).json()["response"]
        assert cancelled["state"] == "cancelled"
        wait_until(lambda: not pid_alive(pid), RUN_TIMEOUT, what="the backfill's child to exit")
        entry = wait_until(lambda: (e := backfills(probe)[started["id"]])["pid"] is None and e, RUN_TIMEOUT)
        assert entry["state"] == "cancelled" and entry["running"] is False and entry["done"] < 5
        assert not (tmp_path / "out").exists()
        again = probe.call("backfill_cancel", {"id": started["id"]}).json()
        assert again["error"] == f"backfill #{started['id']} is cancelled, not running: nothing to cancel"


def test_after_kill_9_of_luigid_the_backfill_resumes_and_no_finished_day_runs_again(tmp_path):
    env = backfill_workdir(tmp_path)
    with running_luigid(tmp_path, config=CONFIG, env=env) as luigid:
        probe = luigid.probe()
        started = start_backfill(probe)
        for finished_days in (
            1,
            2,
        ):  # let the first two days that start finish (the order is the scheduler's)
            going = wait_until(lambda: unfinished(tmp_path), RUN_TIMEOUT, what="a day going")
            open_gate(tmp_path, going.pop().removeprefix("eu-"))
            wait_until(lambda n=finished_days: len(counted(tmp_path, "finished.txt")) == n, RUN_TIMEOUT)
        wait_until(lambda: len(counted(tmp_path, "started.txt")) == 3, RUN_TIMEOUT, what="a third day going")
        done_before = counted(tmp_path, "finished.txt")
        assert len(done_before) == 2
        orphan = backfills(probe)[started["id"]]["pid"]
        luigid.process.send_signal(signal.SIGKILL)
        luigid.process.wait(timeout=RUN_TIMEOUT)
    assert pid_alive(orphan)  # kill -9 leaves the child: the next luigid must deal with it
    with running_luigid(tmp_path, config=CONFIG, env=env) as again:
        probe = again.probe()
        wait_until(lambda: not pid_alive(orphan), RUN_TIMEOUT, what="the old child to be killed")
        finish_resumed(probe, tmp_path, started["id"])
        assert "killing its child" in again.logs() and "starting it again" in again.logs()
    assert counted(tmp_path, "finished.txt") == {f"eu-{day}": 1 for day in DAYS}
    starts = counted(tmp_path, "started.txt")
    # The days finished before the kill never started again.
    assert all(starts[day] == 1 for day in done_before)


def test_a_clean_stop_of_luigid_stops_the_child_and_the_next_start_resumes_the_backfill(tmp_path):
    env = backfill_workdir(tmp_path)
    with running_luigid(tmp_path, config=CONFIG, env=env) as luigid:
        probe = luigid.probe()
        started = start_backfill(probe)
        wait_until(lambda: unfinished(tmp_path), RUN_TIMEOUT, what="a day going")
        child = backfills(probe)[started["id"]]["pid"]
        assert luigid.stop(signal.SIGTERM) == 0
    assert not pid_alive(child)  # luigid waited for its child (SIGTERM, then SIGKILL) before it exited
    with running_luigid(tmp_path, config=CONFIG, env=env) as again:
        probe = again.probe()
        finish_resumed(probe, tmp_path, started["id"])
    assert counted(tmp_path, "finished.txt") == {f"eu-{day}": 1 for day in DAYS}


def finish_resumed(probe, workdir, backfill_id):
    """Wait until luigid started the backfill's second child, let every day finish, and wait for 5/5."""
    wait_until(lambda: backfills(probe)[backfill_id]["attempt"] == 2, RUN_TIMEOUT, what="the second child")
    assert backfills(probe)[backfill_id]["state"] == "running"
    open_gate(workdir, "all")
    wait_until(lambda: backfills(probe)[backfill_id]["state"] == "ended", RUN_TIMEOUT, what="the end")
    wait_until(lambda: backfills(probe)[backfill_id]["done"] == 5, RUN_TIMEOUT, what="5/5 done")


def unfinished(workdir):
    return set(counted(workdir, "started.txt")) - set(counted(workdir, "finished.txt"))


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"start": "2024-13-01"}, "start: '2024-13-01' is not a daily point in time; write it as 2024-01-31"),
        ({"stop": "2023-12-31"}, "stop: 2023-12-31 is not after start 2024-01-01 (stop is exclusive"),
        ({"kind": "weekly"}, "kind: 'weekly' is not a backfill kind; write 'daily' or 'hourly'"),
        ({"kind": "hourly"}, "start: '2024-01-01' is not a hourly point in time; write it as 2024-01-31T05"),
        ({"concurrency": 0}, "concurrency: 0 is not between 1 and 256 (workers)"),
        ({"module": "my module"}, "module: 'my module' is not a Python name"),
    ],
)
def test_a_bad_backfill_request_is_refused_with_one_line_naming_the_field(tmp_path, arguments, error):
    with running_luigid(tmp_path) as luigid:
        call = {"module": "m", "family": "Day", "start": "2024-01-01", "stop": "2024-01-06", **arguments}
        reply = luigid.probe().call("backfill_start", call)
        assert reply.status == 400
        message = reply.json()["error"]
        assert message.startswith(error) and "\n" not in message
        assert backfills(luigid.probe()) == {}
        assert not (tmp_path / "luigid-state.schedules").exists()  # nothing recorded, nothing created


def test_starting_and_cancelling_answer_post_only_and_need_the_token(tmp_path):
    token = "backfill-token-1"
    with running_luigid(tmp_path, config=f"[scheduler]\nauth_token = {token}\n") as luigid:
        anonymous, probe = luigid.probe(), luigid.probe(token=token)
        call = {"module": "m", "family": "Day", "start": "2024-01-01", "stop": "2024-01-06"}
        assert probe.call("backfill_start", call, verb="GET").status == 405
        assert probe.call("backfill_cancel", {"id": 1}, verb="GET").status == 405
        assert anonymous.call("backfill_start", call).status == 401
        assert probe.call("backfill_list", verb="GET").json()["response"] == []
        assert probe.call("backfill_cancel", {"id": 7}).json()["error"] == (
            "luigid has no backfill #7: see backfill_list for the ids"
        )


def test_an_hourly_backfill_runs_each_hour_once_and_reaches_3_of_3(tmp_path):
    env = backfill_workdir(tmp_path, open_all=True)
    with running_luigid(tmp_path, config=CONFIG, env=env) as luigid:
        probe = luigid.probe()
        started = start_backfill(
            probe, family="Hour", kind="hourly", start="2024-03-31T23", stop="2024-04-01T02"
        )
        assert started["total"] == 3
        wait_until(lambda: backfills(probe)[started["id"]]["state"] == "ended", RUN_TIMEOUT, what="the end")
        wait_until(lambda: backfills(probe)[started["id"]]["done"] == 3, RUN_TIMEOUT, what="3/3 done")
    hours = ["2024-03-31 23:00:00", "2024-04-01 00:00:00", "2024-04-01 01:00:00"]
    assert counted(tmp_path, "finished.txt") == {f"eu-{hour}": 1 for hour in hours}
