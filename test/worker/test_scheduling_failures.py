"""What ``add()`` does with what it cannot schedule (COMPAT j.5), through ``luigi.build``.

Non-tasks and uninitialised tasks raise TaskException; ``complete()`` raising or returning a non-bool is
announced to the scheduler (``announce_scheduling_failure``) before the "failed scheduling" mail; an error
of ours or the scheduler's is logged and mailed as a framework error, even with ``send_failure_email``
off, then re-raised. Mails go to a real SMTP server (aiosmtpd). ``multiprocess`` checks ``complete()`` in
a process pool.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.luigid import free_port
from helpers.smtp_server import Mailbox, smtp_on_localhost

import luigi
from luigi import configuration
from luigi.event import Event
from luigi.rpc import RPCError
from luigi.scheduler import Scheduler
from luigi.task import Task
from luigi.task_status import DONE, UNKNOWN
from luigi.worker import TaskException, Worker

HOST = socket.gethostname()


@pytest.fixture
def mailbox() -> Iterator[Mailbox]:
    """A real SMTP server on localhost, with ``[email]`` and ``[smtp]`` pointing at it."""
    with smtp_on_localhost() as box:
        set_config("smtp", host="127.0.0.1", port=str(box.port))
        set_config("email", receiver="ops@example.com", force_send="true", sender="luigi@example.com")
        yield box


def subjects(box: Mailbox) -> list[str]:
    return [delivery.subject for delivery in box.deliveries]


def set_config(section: str, **options: str) -> None:
    for name, value in options.items():
        configuration.get_config().set(section, name, value)


class RecordingScheduler(Scheduler):
    """The real scheduler, noting each ``announce_scheduling_failure`` and the mails sent by then."""

    def __init__(self, mailbox: Mailbox | None = None, fail_announcing: bool = False) -> None:
        super().__init__()
        self.announced: list[tuple[dict[str, Any], int]] = []
        self._mailbox = mailbox
        self._fail_announcing = fail_announcing

    def announce_scheduling_failure(self, **kwargs: Any) -> None:
        self.announced.append((kwargs, len(self._mailbox.deliveries) if self._mailbox else 0))
        if self._fail_announcing:
            raise RuntimeError("the scheduler cannot take the announcement")
        super().announce_scheduling_failure(**kwargs)


class Factory:
    """``luigi.build``'s ``worker_scheduler_factory``, handing out one given scheduler."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

    def create_local_scheduler(self) -> Scheduler:
        return self.scheduler

    def create_remote_scheduler(self, url: str) -> Scheduler:
        raise AssertionError("local only")

    def create_worker(self, scheduler, worker_processes, assistant=False) -> Worker:
        return Worker(scheduler=scheduler, worker_processes=worker_processes, assistant=assistant)


def build(tasks, **kwargs):
    return luigi.build(tasks, local_scheduler=True, detailed_summary=True, log_level="WARNING", **kwargs)


# -- what cannot be scheduled at all -------------------------------------------------------------------------


def test_scheduling_a_non_task_raises_naming_it():
    with pytest.raises(TaskException) as raised:
        luigi.build(["not a task"], local_scheduler=True, log_level="WARNING")
    assert str(raised.value) == "Can not schedule non-task not a task"


def test_scheduling_a_task_whose_init_skipped_super_raises_saying_so():
    class Forgetful(Task):
        def __init__(self):
            pass

    with pytest.raises(TaskException) as raised:
        luigi.build([Forgetful()], local_scheduler=True, log_level="WARNING")
    assert str(raised.value) == (
        "Task of class Forgetful not initialized. Did you override __init__ and forget to call "
        "super(...).__init__?"
    )


# -- scheduling failures: announced, then mailed -------------------------------------------------------------


class BrokenComplete(Task):
    owner_email = "owner@example.com"
    day = luigi.Parameter(default="monday")
    note = luigi.Parameter(default="", significant=False)

    def complete(self):
        raise ValueError("complete() is broken")


class Wishy(Task):
    def complete(self):
        return "yes"


def test_a_failing_complete_is_announced_to_the_scheduler_before_the_failed_scheduling_mail(mailbox):
    scheduler = RecordingScheduler(mailbox)
    task = BrokenComplete()
    result = build([task], worker_scheduler_factory=Factory(scheduler))
    assert result.worker._add_task_history == [(task, UNKNOWN, False)]
    [(announced, mails_before)] = scheduler.announced
    assert mails_before == 0
    assert {key: value for key, value in announced.items() if key != "expl"} == {
        "worker": result.worker._id,
        "task_name": "BrokenComplete(day=monday)",
        "family": "BrokenComplete",
        "params": {"day": "monday"},  # the significant parameters only
        "owners": ["owner@example.com"],
    }
    assert "ValueError: complete() is broken" in announced["expl"]
    [delivery] = mailbox.deliveries
    subject, text = delivery.subject, delivery.body
    assert subject == f"Luigi: BrokenComplete(day=monday) failed scheduling. Host: {HOST}"
    headline = "Will not run BrokenComplete(day=monday) or any dependencies due to error in complete() method"
    assert headline in text


def test_a_complete_returning_a_non_bool_is_a_scheduling_failure_with_luigis_message(mailbox):
    scheduler = RecordingScheduler(mailbox)
    result = build([Wishy()], worker_scheduler_factory=Factory(scheduler))
    assert result.status == luigi.LuigiStatusCode.SCHEDULING_FAILED
    [(announced, _)] = scheduler.announced
    assert "Return value of Task.complete() must be boolean (was 'yes')" in announced["expl"]
    assert "Return value of Task.complete() must be boolean (was 'yes')" in mailbox.deliveries[0].body


def test_without_failure_emails_the_failure_is_still_announced_but_not_mailed(mailbox):
    set_config("worker", send_failure_email="false")
    scheduler = RecordingScheduler(mailbox)
    build([BrokenComplete()], worker_scheduler_factory=Factory(scheduler))
    assert len(scheduler.announced) == 1 and mailbox.deliveries == []


def test_a_scheduler_that_fails_the_announcement_gets_framework_error_mails_and_add_raises(mailbox):
    set_config("worker", send_failure_email="false")  # framework errors are mailed all the same
    scheduler = RecordingScheduler(mailbox, fail_announcing=True)
    broken = []
    BrokenComplete.event_handler(Event.BROKEN_TASK)(lambda task, exc: broken.append((task, str(exc))))
    with pytest.raises(RuntimeError, match="the scheduler cannot take the announcement"):
        build([BrokenComplete()], worker_scheduler_factory=Factory(scheduler))
    subject = f"Luigi: Framework error while scheduling BrokenComplete(day=monday). Host: {HOST}"
    # one from the failed announcement, one from add() as the error leaves it
    assert subjects(mailbox) == [subject, subject]
    assert all(delivery.body.startswith("Luigi framework error") for delivery in mailbox.deliveries)
    assert broken == [(BrokenComplete(), "the scheduler cannot take the announcement")]


def test_an_unreachable_scheduler_while_adding_is_logged_mailed_as_a_framework_error_and_raised(
    mailbox, caplog
):
    closed_port = free_port()  # nothing listens there
    set_config("core", rpc_retry_attempts="1", rpc_retry_wait="0")
    set_config("worker", scheduler_unreachable_timeout="0", send_failure_email="false")

    class Anything(Task):
        def complete(self):
            return False

    with caplog.at_level(logging.ERROR, logger="luigi-interface"), pytest.raises(RPCError):
        luigi.build([Anything()], scheduler_url=f"http://127.0.0.1:{closed_port}/", log_level="WARNING")
    assert "Luigi unexpected framework error while scheduling Anything()" in caplog.messages
    assert subjects(mailbox) == [f"Luigi: Framework error while scheduling Anything(). Host: {HOST}"]


# -- complete() checks in a process pool ---------------------------------------------------------------------


class NotesPid(Task):
    """Complete, and notes the pid of the process that asked (module level: it pickles)."""

    path = luigi.Parameter()
    i = luigi.IntParameter()

    def complete(self):
        with open(self.path, "a") as log:
            log.write(f"{os.getpid()}\n")
        return True


class NeedsPids(Task):
    """Never complete, so each task it requires is checked on its own."""

    path = luigi.Parameter()

    def complete(self):
        return False

    def requires(self):
        return [NotesPid(path=self.path, i=i) for i in range(6)]


def test_parallel_scheduling_checks_complete_in_pool_processes(tmp_path):
    log = tmp_path / "pids"
    root = NeedsPids(path=str(log))
    result = build([root], parallel_scheduling=True, parallel_scheduling_processes=2, workers=0)
    done = {task for task, status, _ in result.worker._add_task_history if status == DONE}
    assert done == {NotesPid(path=str(log), i=i) for i in range(6)}
    pids = log.read_text().split()
    assert len(pids) == 6 and str(os.getpid()) not in pids and len(set(pids)) <= 2


def test_parallel_scheduling_checks_a_task_that_does_not_pickle_in_the_worker(tmp_path):
    log = tmp_path / "pids"

    class Local(Task):  # defined in a function: pickle cannot find it by name
        def complete(self):
            with open(log, "a") as out:
                out.write(f"{os.getpid()}\n")
            return True

    result = build([Local()], parallel_scheduling=True, parallel_scheduling_processes=2)
    assert result.worker._add_task_history == [(Local(), DONE, False)]
    assert Path(log).read_text().split() == [str(os.getpid())]


def test_parallel_scheduling_reports_a_failing_complete_like_a_serial_one(mailbox):
    scheduler = RecordingScheduler(mailbox)
    result = build(
        [BrokenComplete()],
        worker_scheduler_factory=Factory(scheduler),
        parallel_scheduling=True,
        parallel_scheduling_processes=2,
    )
    assert result.worker._add_task_history == [(BrokenComplete(), UNKNOWN, False)]
    assert "ValueError: complete() is broken" in scheduler.announced[0][0]["expl"]
