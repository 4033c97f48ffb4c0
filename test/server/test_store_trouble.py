"""The state store under trouble (issue 16, point 5), on a real tmpfs that fills up.

While luigid cannot write its state, mutating calls answer 503 with a clear error and reads go on; the
cause is logged once; when space comes back, luigid resumes by itself. After a ``kill -9`` and a restart,
every acknowledged change is there and the SQLite file passes its integrity check.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import suppress
from pathlib import Path

from helpers.luigid import running_luigid, wait_until
from helpers.tmpfs import fill, tiny_tmpfs

from luigi.rpc import RemoteScheduler, RPCError


def _add(probe, task_id):
    return probe.call("add_task", {"worker": "w", "task_id": task_id, "status": "PENDING", "runnable": True})


def _known(probe):
    reply = probe.call("task_list", {"status": "", "upstream_status": ""}, verb="GET")
    assert reply.status == 200
    return set(reply.json()["response"])


def test_a_full_disk_refuses_changes_with_503_keeps_reads_and_resumes_losing_nothing(tmp_path):
    with tiny_tmpfs(tmp_path / "state") as volume:
        state = volume / "state.db"
        acknowledged: set[str] = set()
        with running_luigid(tmp_path, "--state-path", str(state)) as luigid:
            probe = luigid.probe()
            for i in range(20):
                assert _add(probe, f"before_{i}").status == 200
                acknowledged.add(f"before_{i}")
            filler = fill(volume)
            refused = None
            for i in range(5000):  # SQLite may still have free pages for a while
                reply = _add(probe, f"during_{i}")
                if reply.status == 200:
                    acknowledged.add(f"during_{i}")
                    continue
                refused = reply
                break
            assert refused is not None and refused.status == 503
            error = refused.json()["error"]
            assert error.startswith("luigid cannot save its state (") and "Free the disk" in error
            assert _add(probe, "refused_again").status == 503
            assert acknowledged <= _known(probe)  # reads keep working
            assert luigid.logs().count("luigid cannot save its state") == 1
            filler.unlink()
            wait_until(lambda: "can save its state again" in luigid.logs(), timeout=30, what="resuming")
            assert _add(probe, "after").status == 200
            acknowledged.add("after")
            luigid.stop(signal.SIGKILL)
        check = sqlite3.connect(state)
        try:
            assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        finally:
            check.close()
        with running_luigid(tmp_path, "--state-path", str(state)) as restarted:
            assert acknowledged <= _known(restarted.probe())
        with suppress(FileNotFoundError):
            filler.unlink()


def test_a_worker_that_keeps_pinging_through_a_full_disk_is_not_dropped(tmp_path):
    config = "[scheduler]\nworker_disconnect_delay = 1\n"
    with tiny_tmpfs(tmp_path / "state") as volume:
        with running_luigid(tmp_path, "--state-path", str(volume / "state.db"), config=config) as luigid:
            probe = luigid.probe()
            assert _add(probe, "Long").status == 200
            grant = probe.call("get_work", {"worker": "w", "host": "h"}).json()["response"]
            assert grant["task_id"] == "Long"
            filler = fill(volume)
            for i in range(5000):  # until luigid refuses changes
                if _add(probe, f"during_{i}").status == 503:
                    break
            outage_ends = time.monotonic() + 4  # four disconnect delays: a silent worker would be dropped
            while time.monotonic() < outage_ends:
                assert probe.call("ping", {"worker": "w"}).status == 503
                threading.Event().wait(0.2)  # the pace of a keep-alive thread (nothing to wait for)
                running = probe.call("task_list", {"status": "RUNNING", "upstream_status": ""}, verb="GET")
                assert set(running.json()["response"]) == {"Long"}, "the pinging worker was dropped"
            filler.unlink()
            wait_until(lambda: probe.call("ping", {"worker": "w"}).status == 200, timeout=30, what="resuming")
            workers = probe.call("worker_list", {}, verb="GET").json()["response"]
            assert [worker["name"] for worker in workers] == ["w"]


LEAVE_A_JOURNAL = """
import os, sys
from luigi.scheduler import Scheduler, SchedulerConfig
from luigi.scheduler.store import SqlStore
scheduler = Scheduler(SchedulerConfig(), store=SqlStore.for_file(sys.argv[1]))
scheduler.load()
for n in range(20):
    scheduler.add_task(worker="w", task_id=f"Journaled_{n}")
    scheduler.flush()
os._exit(0)  # as a kill -9: the journal is not folded into the file
"""


def test_luigid_started_on_a_full_disk_waits_for_space_and_loses_nothing_of_its_journal(tmp_path):
    with tiny_tmpfs(tmp_path / "state") as volume:
        state = volume / "state.sqlite"
        subprocess.run([sys.executable, "-c", LEAVE_A_JOURNAL, str(state)], check=True, timeout=60)
        assert Path(f"{state}.journal").stat().st_size > 0
        filler = fill(volume)
        log = tmp_path / "luigid-0.log"

        def free_the_disk_once_luigid_waits():
            wait_until(lambda: log.exists() and "waiting for space" in log.read_text(), 30, "luigid to wait")
            filler.unlink()

        freeing = threading.Thread(target=free_the_disk_once_luigid_waits)
        freeing.start()
        try:
            with running_luigid(tmp_path, "--state-path", str(state)) as luigid:
                assert {f"Journaled_{n}" for n in range(20)} <= _known(luigid.probe())
                assert luigid.logs().count("waiting for space") == 1
        finally:
            freeing.join(timeout=60)


def test_a_keep_alive_ping_does_not_wait_behind_a_call_that_rides_out_the_outage(tmp_path, caplog):
    with tiny_tmpfs(tmp_path / "state") as volume:
        with running_luigid(tmp_path, "--state-path", str(volume / "state.db")) as luigid:
            probe = luigid.probe()
            assert _add(probe, "Waiting").status == 200
            client = RemoteScheduler(luigid.url, retry_wait=0.2)
            client.unreachable_timeout = 120
            filler = fill(volume)
            for i in range(5000):  # until luigid refuses changes
                if _add(probe, f"during_{i}").status == 503:
                    break
            answers: list = []
            riding = threading.Thread(target=lambda: answers.append(client.get_work(worker="w", host="h")))
            riding.start()
            wait_until(lambda: "/api/get_work" in caplog.text, 30, "get_work to meet the 503")
            pinged: list = []
            pinging = threading.Thread(target=lambda: pinged.append(_ping_outcome(client)))
            pinging.start()
            pinging.join(timeout=30)
            assert pinged == [503] and riding.is_alive()  # the ping reached luigid; get_work still waits
            filler.unlink()
            riding.join(timeout=60)
            assert answers and answers[0]["task_id"] == "Waiting"
            client.close()


def _ping_outcome(client):
    try:
        client.ping(worker="w")
    except RPCError as exc:
        return exc.status
    return 200
