"""Pruning with an assistant connected (LUIGI_COMPAT f.5, j.2 Clock): an assistant keeps no task alive.

It is never a stakeholder, so tasks whose workers have left are removed at the same times with or without
one, whatever their status; only a task the assistant itself runs stays (its runner is alive).
"""

from __future__ import annotations

import pytest
from helpers.scheduler import make_scheduler

REMOVE_DELAY = 600
DISCONNECT_DELAY = 60
ASSISTANT = "helper"
LEAVING = "leaving-worker"
STAYING = "staying-worker"
WITH_AND_WITHOUT_ASSISTANT = pytest.mark.parametrize("assistant", [False, True], ids=["alone", "assisted"])


def scheduler(**options):
    options = {"worker_disconnect_delay": DISCONNECT_DELAY, "remove_delay": REMOVE_DELAY, **options}
    return make_scheduler(retry_delay=10**7, **options)


def known(sch) -> dict[str, str]:
    """Every task the scheduler still has, with its status."""
    return {task_id: task["status"] for task_id, task in sch.task_list("", "").items()}


class Timeline:
    """Moves the clock in steps; at each the live workers call in, then the scheduler prunes."""

    def __init__(self, sch, clock, assistant: bool, alive: tuple[str, ...] = ()) -> None:
        self.sch, self.clock = sch, clock
        self.assistant = assistant
        self.alive = list(alive)
        if assistant:
            sch.get_work(worker=ASSISTANT, assistant=True)

    def step(self, seconds: float) -> dict[str, str]:
        self.clock.advance(seconds)
        for worker in self.alive:
            self.sch.ping(worker=worker)
        if self.assistant:
            self.sch.get_work(worker=ASSISTANT, assistant=True)
        self.sch.prune()
        return known(self.sch)

    def first_prune_without_stakeholders(self) -> dict[str, str]:
        """The leaving worker times out: its tasks get ``remove = now + remove_delay``."""
        return self.step(DISCONNECT_DELAY + 1)

    def until_removal_time(self) -> tuple[dict[str, str], dict[str, str]]:
        """The tasks a second before the removal time and at it (Luigi removes once ``now >= remove``)."""
        return self.step(REMOVE_DELAY - 1), self.step(1)


@WITH_AND_WITHOUT_ASSISTANT
def test_done_tasks_nobody_wants_go_at_their_removal_time_while_a_dependent_keeps_its_dependency(assistant):
    sch, clock = scheduler()
    sch.add_task(worker=LEAVING, task_id="A", status="DONE")
    sch.add_task(worker=LEAVING, task_id="B", status="DONE", deps=["A"])
    sch.add_task(worker=LEAVING, task_id="C", status="DONE", deps=["B"])
    sch.add_task(worker=STAYING, task_id="Y", deps=["C"], runnable=False)  # STAYING is C's stakeholder too
    timeline = Timeline(sch, clock, assistant, alive=(STAYING,))
    timeline.first_prune_without_stakeholders()
    before, after = timeline.until_removal_time()
    assert before == {"A": "DONE", "B": "DONE", "C": "DONE", "Y": "PENDING"}
    assert after == {"C": "DONE", "Y": "PENDING"}


@WITH_AND_WITHOUT_ASSISTANT
def test_failed_and_pending_tasks_and_their_dependencies_go_at_their_removal_time(assistant):
    sch, clock = scheduler()
    sch.add_task(worker=LEAVING, task_id="A", status="DONE")
    sch.add_task(worker=LEAVING, task_id="F", status="FAILED", deps=["A"])
    sch.add_task(worker=LEAVING, task_id="P", deps=["F"])
    timeline = Timeline(sch, clock, assistant)
    timeline.first_prune_without_stakeholders()
    before, after = timeline.until_removal_time()
    assert before == {"A": "DONE", "F": "FAILED", "P": "PENDING"}
    assert after == {}


def test_an_assistant_keeps_only_the_task_it_runs_whatever_the_others_statuses():
    sch, clock = scheduler()
    sch.add_worker(ASSISTANT, [("assistant", True)])
    sch.add_task(worker=LEAVING, task_id="running", status="PENDING")
    assert sch.get_work(worker=ASSISTANT, assistant=True)["task_id"] == "running"
    for task_id, status in [
        ("done", "DONE"),
        ("disabled", "DISABLED"),
        ("pending", "PENDING"),
        ("failed", "FAILED"),
        ("unknown", "UNKNOWN"),
    ]:
        sch.add_task(worker=LEAVING, task_id=task_id, status=status)
    timeline = Timeline(sch, clock, assistant=False, alive=(ASSISTANT,))  # it pings, asks for no more
    timeline.first_prune_without_stakeholders()
    before, after = timeline.until_removal_time()
    assert len(before) == 6
    assert after == {"running": "RUNNING"}
