"""The worker's SIGUSR1 handler, as Luigi's (LUIGI_COMPAT h, j.5, e.1 ``--take-lock``).

A ``Worker`` installs ``handle_interrupt`` for SIGUSR1 when it is built, unless ``[worker]
no_install_shutdown_handler`` is true; on SIGUSR1 it stops asking for new work. Users check it with
``signal.getsignal``.
"""

from __future__ import annotations

import os
import signal

import pytest

import luigi
from luigi import configuration
from luigi.scheduler import Scheduler
from luigi.worker import Worker

RAN: list[str] = []


class Job(luigi.Task):
    name = luigi.Parameter()

    def run(self):
        RAN.append(self.name)

    def complete(self):
        return self.name in RAN


@pytest.fixture(autouse=True)
def sigusr1_heard():
    """A recording SIGUSR1 handler in place of the default (which would end the test run); restored after."""
    heard: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: heard.append(signum))
    RAN.clear()
    yield heard
    signal.signal(signal.SIGUSR1, previous)


def test_a_worker_installs_its_handle_interrupt_for_sigusr1():
    worker = Worker(scheduler=Scheduler())
    assert signal.getsignal(signal.SIGUSR1) == worker.handle_interrupt
    worker.stop()


def test_after_sigusr1_the_worker_asks_for_no_new_work(sigusr1_heard):
    with Worker(scheduler=Scheduler()) as worker:
        worker.add(Job(name="a"))
        os.kill(os.getpid(), signal.SIGUSR1)
        assert worker.run() is True
    assert RAN == [] and sigusr1_heard == []


def test_no_install_shutdown_handler_leaves_sigusr1_alone(sigusr1_heard):
    before = signal.getsignal(signal.SIGUSR1)
    with Worker(scheduler=Scheduler(), no_install_shutdown_handler=True) as worker:
        assert signal.getsignal(signal.SIGUSR1) is before
        worker.add(Job(name="a"))
        os.kill(os.getpid(), signal.SIGUSR1)
        assert worker.run() is True
    assert RAN == ["a"] and sigusr1_heard == [signal.SIGUSR1]


def test_the_worker_section_can_turn_the_handler_off(sigusr1_heard):
    configuration.get_config().set("worker", "no_install_shutdown_handler", "true")
    before = signal.getsignal(signal.SIGUSR1)
    worker = Worker(scheduler=Scheduler())
    assert signal.getsignal(signal.SIGUSR1) is before
    worker.stop()
