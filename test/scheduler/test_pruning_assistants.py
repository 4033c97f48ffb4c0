"""Pruning with an assistant connected (LUIGI_COMPAT f.5, j.2 Clock): tasks past their removal time are
kept while an assistant may still need them (unsettled tasks and their direct dependencies), and removed on
the usual schedule otherwise."""

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
def test_an_orphaned_pending_task_and_its_direct_dependencies_are_kept_only_for_an_assistant(assistant):
    sch, clock = scheduler()
    sch.add_task(worker=LEAVING, task_id="A", status="DONE")
    sch.add_task(worker=LEAVING, task_id="B", status="DONE", deps=["A"])
    sch.add_task(worker=LEAVING, task_id="Y", deps=["B"], runnable=False)  # nobody here can run it
    timeline = Timeline(sch, clock, assistant)
    timeline.first_prune_without_stakeholders()
    before, after = timeline.until_removal_time()
    assert before == {"A": "DONE", "B": "DONE", "Y": "PENDING"}
    assert after == ({"B": "DONE", "Y": "PENDING"} if assistant else {})  # A: a dependency's dependency


@WITH_AND_WITHOUT_ASSISTANT
def test_a_failed_task_and_its_dependencies_are_kept_past_their_removal_time_only_for_an_assistant(assistant):
    sch, clock = scheduler()
    sch.add_task(worker=LEAVING, task_id="D", status="DONE")
    sch.add_task(worker=LEAVING, task_id="F", status="FAILED", deps=["D"])
    timeline = Timeline(sch, clock, assistant)
    timeline.first_prune_without_stakeholders()
    before, after = timeline.until_removal_time()
    assert before == {"D": "DONE", "F": "FAILED"}
    assert after == ({"D": "DONE", "F": "FAILED"} if assistant else {})
    assert timeline.step(10 * REMOVE_DELAY) == after  # for as long as the assistant is there


@WITH_AND_WITHOUT_ASSISTANT
def test_a_task_the_scheduler_disabled_is_kept_for_an_assistant_but_one_a_worker_disabled_is_not(assistant):
    sch, clock = scheduler(retry_count=2, disable_persist=10**7)
    sch.add_task(worker=LEAVING, task_id="D1", status="DONE")
    for _ in range(2):  # failed retry_count times: disabled by the scheduler
        sch.add_task(worker=LEAVING, task_id="S", status="FAILED", deps=["D1"])
    sch.add_task(worker=LEAVING, task_id="D2", status="DONE")
    sch.add_task(worker=LEAVING, task_id="W", status="DISABLED", deps=["D2"])  # disabled by its worker
    assert known(sch) == {"D1": "DONE", "S": "DISABLED", "D2": "DONE", "W": "DISABLED"}
    timeline = Timeline(sch, clock, assistant)
    timeline.first_prune_without_stakeholders()
    before, after = timeline.until_removal_time()
    assert before == {"D1": "DONE", "S": "DISABLED", "D2": "DONE", "W": "DISABLED"}
    assert after == ({"D1": "DONE", "S": "DISABLED"} if assistant else {})


def failed_task_kept_for_an_assistant() -> Timeline:
    """FAILED F needing DONE D, both past their removal time and kept because an assistant is there."""
    sch, clock = scheduler()
    sch.add_task(worker=LEAVING, task_id="D", status="DONE")
    sch.add_task(worker=LEAVING, task_id="F", status="FAILED", deps=["D"])
    timeline = Timeline(sch, clock, assistant=True)
    timeline.first_prune_without_stakeholders()
    assert timeline.until_removal_time()[1] == {"D": "DONE", "F": "FAILED"}
    return timeline


def test_kept_tasks_go_at_the_prune_that_finds_the_assistant_gone():
    timeline = failed_task_kept_for_an_assistant()
    sch = timeline.sch
    timeline.assistant = False  # it stops calling in
    assert timeline.step(DISCONNECT_DELAY) == {"D": "DONE", "F": "FAILED"}  # not silent for long enough
    assert timeline.step(1) == {}
    assert sch._state.kept_back == set()  # so later prunes look at no task at all


def test_a_kept_dependency_goes_at_the_next_prune_once_its_dependent_is_done():
    timeline = failed_task_kept_for_an_assistant()
    timeline.sch.mark_as_done(task_id="F")  # settled; both removal times have long passed
    assert timeline.step(1) == {}


def test_a_task_wanted_again_is_not_removed_when_the_assistant_leaves():
    sch, clock = scheduler()
    sch.add_task(worker=LEAVING, task_id="F", status="FAILED")
    timeline = Timeline(sch, clock, assistant=True, alive=(STAYING,))
    timeline.first_prune_without_stakeholders()
    assert timeline.until_removal_time()[1] == {"F": "FAILED"}
    sch.add_task(worker=STAYING, task_id="F")  # a stakeholder again: no removal time
    timeline.assistant = False
    assert timeline.step(DISCONNECT_DELAY + 1) == {"F": "PENDING"}
    assert timeline.step(10 * REMOVE_DELAY) == {"F": "PENDING"}
