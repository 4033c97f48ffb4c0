"""A dead worker is noticed on time (issue 16, point 6): luigid wakes on its next deadline.

A worker that stops talking has its running task failed within ``worker_disconnect_delay`` plus a
second, however long ``prune_interval`` is; a failed task's retry comes as soon as its time is up. The
task is watched through ``task_detail``, which does not prune on its own.
"""

from __future__ import annotations

import time

from helpers.luigid import running_luigid, wait_until

CONFIG = """
[scheduler]
worker_disconnect_delay = 2
retry_delay = 1
prune_interval = 600
"""


def _status(probe, task_id):
    return probe.call("task_detail", {"task_id": task_id}, verb="GET").json()["response"]["task"]["status"]


def test_a_silent_workers_task_fails_within_the_disconnect_delay_plus_a_second(tmp_path):
    with running_luigid(tmp_path, config=CONFIG) as luigid:
        probe = luigid.probe()
        probe.call("add_task", {"worker": "w1", "task_id": "T1", "status": "PENDING", "runnable": True})
        granted = probe.call("get_work", {"worker": "w1", "host": "h"}).json()["response"]
        last_contact = time.monotonic()
        assert granted["task_id"] == "T1"
        wait_until(lambda: _status(probe, "T1") == "FAILED", timeout=10, what="T1 to fail")
        assert time.monotonic() - last_contact <= 2 + 1
        # and its retry (retry_delay 1) comes without any request to prompt it
        failed_at = time.monotonic()
        wait_until(lambda: _status(probe, "T1") == "PENDING", timeout=10, what="T1 to be retried")
        assert time.monotonic() - failed_at <= 1 + 1


def test_a_worker_that_keeps_pinging_keeps_its_task(tmp_path):
    with running_luigid(tmp_path, config=CONFIG) as luigid:
        probe = luigid.probe()
        probe.call("add_task", {"worker": "w1", "task_id": "T2", "status": "PENDING", "runnable": True})
        probe.call("get_work", {"worker": "w1", "host": "h"})
        deadline = time.monotonic() + 4  # twice the disconnect delay
        while time.monotonic() < deadline:
            probe.call("ping", {"worker": "w1"})
            assert _status(probe, "T2") == "RUNNING"
            time.sleep(0.3)  # the pace of the pings (a worker's ping_interval), not a synchronisation
