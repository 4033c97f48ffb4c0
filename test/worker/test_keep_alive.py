"""The keep-alive thread: pings, scheduler messages to running tasks, and ``set_worker_processes``."""

from __future__ import annotations

import threading
import time

import pytest
from helpers.scheduler import LockedScheduler

from luigi.local_target import LocalTarget
from luigi.scheduler import Scheduler
from luigi.task import Task
from luigi.worker import KeepAliveThread, Worker
from luigi.worker.slots.pool import SlotPool


def wait_for(condition, timeout=10.0, interval=0.01):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


@pytest.mark.parametrize("processes", [1, 2])
def test_running_task_receives_scheduler_messages_and_responds(tmp_path, processes):
    class Listener(Task):
        accepts_messages = True

        def output(self):
            return LocalTarget(str(tmp_path / "heard"))

        def run(self):
            message = self.scheduler_messages.get(timeout=20)
            message.respond(f"heard {message.content}")
            with self.output().open("w") as out:
                out.write(str(message))

    scheduler = LockedScheduler(Scheduler())
    task_id = Listener().task_id
    with Worker(scheduler=scheduler, worker_processes=processes, ping_interval=0.02) as worker:
        worker.add(Listener())
        runner = threading.Thread(target=worker.run)
        runner.start()
        assert wait_for(lambda: scheduler.task_list("RUNNING", "").get(task_id))
        message_id = scheduler.send_scheduler_message(worker=worker._id, task=task_id, content="ping?")[
            "message_id"
        ]
        answer = wait_for(
            lambda: scheduler.get_scheduler_message_response(task_id=task_id, message_id=message_id)[
                "response"
            ]
        )
        runner.join(timeout=20)
    assert answer == "heard ping?"
    assert (tmp_path / "heard").read_text() == "ping?"


def test_scheduler_can_change_the_number_of_worker_processes():
    class Idle(Task):
        def complete(self):
            return False

    scheduler = LockedScheduler(Scheduler())
    with Worker(scheduler=scheduler, ping_interval=0.02) as worker:
        worker.add(Idle())
        scheduler.set_worker_processes(worker._id, 3)
        assert wait_for(lambda: worker.worker_processes == 3)


class ScriptedScheduler:
    """Answers pings with a fixed list of rpc messages."""

    def __init__(self, messages):
        self.messages = messages
        self.pings = 0

    def ping(self, worker):
        self.pings += 1
        return {"rpc_messages": self.messages}


def test_keep_alive_thread_hands_each_message_to_the_worker():
    received = []
    messages = [{"name": "set_worker_processes", "kwargs": {"n": 2}}, {"name": "other", "kwargs": {}}]
    thread = KeepAliveThread(ScriptedScheduler(messages), "w1", 1.0, received.append)
    thread.ping_once()
    assert received == messages


def test_worker_ignores_messages_it_has_no_handler_for(caplog):
    scheduler = ScriptedScheduler([{"name": "shutdown_everything", "kwargs": {}}])
    with Worker(scheduler=scheduler, ping_interval=0.01) as worker:
        assert wait_for(lambda: scheduler.pings >= 2)
        assert worker.worker_processes == 1
    assert "no handler for scheduler message" in caplog.text


def test_failed_ping_is_logged_and_retried(caplog):
    class Flaky:
        calls = 0

        def ping(self, worker):
            Flaky.calls += 1
            raise ConnectionError("scheduler down")

    thread = KeepAliveThread(Flaky(), "w1", 0.01, lambda message: None)
    thread.start()
    assert wait_for(lambda: Flaky.calls >= 2)
    thread.stop()
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert "Failed pinging scheduler" in caplog.text


@pytest.mark.parametrize(("processes", "gap"), [(1, "before-start"), (2, "before-start"), (2, "before-slot")])
def test_a_message_fetched_by_a_ping_before_the_task_started_still_reaches_it(
    tmp_path, monkeypatch, processes, gap
):
    """The keep-alive ping can fetch a message for a task in the moment between the grant and the start."""

    class Listener(Task):
        accepts_messages = True

        def output(self):
            return LocalTarget(str(tmp_path / "heard"))

        def run(self):
            message = self.scheduler_messages.get(timeout=5)
            message.respond(f"heard {message.content}")
            with self.output().open("w") as out:
                out.write(str(message))

    scheduler = LockedScheduler(Scheduler())
    task_id = Listener().task_id
    sent = {}
    with Worker(scheduler=scheduler, worker_processes=processes, ping_interval=3600) as worker:

        def ping_in_the_gap(real):
            def patched(*args, **kwargs):
                # what the keep-alive thread does: fetch the queued messages, then dispatch them
                sent.update(
                    scheduler.send_scheduler_message(worker=worker._id, task=task_id, content="soon?")
                )
                for message in scheduler.ping(worker=worker._id)["rpc_messages"]:
                    worker._handle_rpc_message(message)
                return real(*args, **kwargs)

            return patched

        if gap == "before-start":
            worker._start_task = ping_in_the_gap(worker._start_task)
        else:
            monkeypatch.setattr(SlotPool, "start", ping_in_the_gap(SlotPool.start))
        worker.add(Listener())
        assert worker.run() is True
    answer = scheduler.get_scheduler_message_response(task_id=task_id, message_id=sent["message_id"])
    assert answer["response"] == "heard soon?"
