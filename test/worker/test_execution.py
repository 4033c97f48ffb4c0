"""The execution seam: the worker runs tasks only through a ``TaskRunner``, chosen in one place; where its
grants come from is the ``WorkSource``'s, beside it."""

from __future__ import annotations

from typing import Any

import pytest

from luigi.parameter import Parameter
from luigi.scheduler import Scheduler
from luigi.task import Task
from luigi.task_status import DONE, FAILED
from luigi.worker import TaskRunner, Worker
from luigi.worker.execution import InProcessRunner, RunnerChoice
from luigi.worker.lookahead import AheadAsker, Lookahead
from luigi.worker.messages import Message
from luigi.worker.slots import SlotRunner
from luigi.worker.task_process import TaskOutcome, TaskRunOptions
from luigi.worker.work_source import AskAheadSource, WorkSource

RAN: list[str] = []
AFTER = {"c": "b", "b": "a"}  # the step each step needs


class Step(Task):
    """Records its name in RAN when it runs, after the step AFTER names."""

    name = Parameter()

    def requires(self) -> list[Step]:
        return [Step(name=AFTER[self.name])] if self.name in AFTER else []

    def complete(self) -> bool:
        return self.name in RAN

    def run(self) -> None:
        RAN.append(self.name)


@pytest.fixture(autouse=True)
def _fresh_runs():
    RAN.clear()


# -- another runner plugs into the seam ---------------------------------------------------------------------


class CallingRunner:
    """A third runner: calls ``run()`` itself and says DONE, with nothing but the protocol's methods."""

    def __init__(self) -> None:
        self.started: list[tuple[str, float | None]] = []
        self.outcomes: list[TaskOutcome] = []
        self.shut_downs = 0

    def start(self, task: Task, timeout: float | None, trace_parent: str | None = None) -> None:
        self.started.append((task.task_id, timeout))
        task.run()
        self.outcomes.append(TaskOutcome(task.task_id, DONE))

    def capacity(self, worker_processes: int) -> int:
        return 1

    def deliver(self, task_id: str, message: Message) -> bool:
        return False

    def wait(self, longest: float) -> None:
        pass

    def collect(self) -> list[TaskOutcome]:
        outcomes, self.outcomes = self.outcomes, []
        return outcomes

    def shut_down(self) -> None:
        self.shut_downs += 1


class CallingWorker(Worker):
    def _build_runner(self) -> TaskRunner:
        self.calling = CallingRunner()
        return self.calling


def test_a_runner_plugged_into_the_seam_runs_the_graph_in_order_and_each_outcome_reaches_the_scheduler():
    scheduler = Scheduler()
    worker = CallingWorker(scheduler=scheduler, timeout=7)
    assert worker.add(Step(name="c"))
    assert worker.run() is True

    assert RAN == ["a", "b", "c"]
    assert [timeout for _, timeout in worker.calling.started] == [7, 7, 7]  # [worker] timeout, as given
    assert set(scheduler.task_list(DONE, "")) == {Step(name=name).task_id for name in "abc"}
    assert worker.calling.shut_downs == 1  # at the end of run()


# -- the one place a runner is chosen -----------------------------------------------------------------------


class FakeSlots:
    """Stands in for the SlotRunner: records starts and hands back the outcomes it is given."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.outcomes: list[TaskOutcome] = []

    def start(self, task: Task, timeout: float | None, trace_parent: str | None = None) -> None:
        self.started.append(task.task_id)

    def deliver(self, task_id: str, message: Message) -> bool:
        return task_id in self.started

    def cancel_run(self, task_id: str, reason: str) -> bool:
        return False  # the tests here cancel no run in a slot (test_cancel.py runs real ones)

    def wait(self, longest: float) -> None:
        pass

    def collect(self) -> list[TaskOutcome]:
        outcomes, self.outcomes = self.outcomes, []
        return outcomes

    def shut_down(self) -> None:
        pass


def runner_choice(worker_processes: int = 1, force_slots: bool = False) -> tuple[RunnerChoice, FakeSlots]:
    options = TaskRunOptions(worker_id="w", check_unfulfilled_deps=False)
    in_process = InProcessRunner(Scheduler(), options, lambda task_id: None)
    slots = FakeSlots()
    choice = RunnerChoice(in_process, lambda: slots, lambda: worker_processes, force_slots)
    return choice, slots


@pytest.mark.parametrize(
    ("timeout", "worker_processes", "force_slots", "in_slot"),
    [(None, 1, False, False), (5, 1, False, True), (None, 2, False, True), (None, 1, True, True)],
)
def test_a_task_runs_in_a_slot_for_a_timeout_several_processes_or_when_forced_and_else_in_process(
    timeout, worker_processes, force_slots, in_slot
):
    choice, slots = runner_choice(worker_processes=worker_processes, force_slots=force_slots)
    choice.start(Step(name="a"), timeout)
    assert (choice.in_slots is slots) is in_slot  # no slot runner is made while no task needs one
    assert (slots.started == [Step(name="a").task_id]) is in_slot
    assert (RAN == ["a"]) is not in_slot
    assert [outcome.status for outcome in choice.collect()] == ([] if in_slot else [DONE])


def test_a_cancel_of_a_task_that_does_not_run_here_is_refused():
    choice, _ = runner_choice()
    assert choice.cancel_run(Step(name="a").task_id, "why") is False


def test_the_slot_runner_satisfies_the_protocol_and_has_nothing_to_collect_before_a_start():
    runner: TaskRunner = SlotRunner(Scheduler(), TaskRunOptions(worker_id="w"), {}, lambda task_id: None)
    assert runner.collect() == []
    runner.shut_down()


# -- the runner and the work source: a grant made ahead waits for the runs it assumes ----------------------


class AskingScheduler:
    """Grants ``reply`` to the first ask ahead; counts the flushes of held reports. Tracks no leases."""

    def __init__(self, reply: dict[str, Any]) -> None:
        self.reply = reply
        self.flushes = 0

    def ask_ahead(self, **kwargs: Any) -> bool:
        return True

    def take_ahead(self) -> dict[str, Any]:
        return self.reply

    def flush(self) -> None:
        self.flushes += 1

    def scheduler_features(self) -> dict[str, Any]:
        return {}


class Loop:
    """The worker loop's part, by hand: the source hears of each start and end, the runner runs."""

    def __init__(self, scheduler: AskingScheduler) -> None:
        options = TaskRunOptions(worker_id="w", check_unfulfilled_deps=False)
        in_process = InProcessRunner(Scheduler(), options, lambda task_id: None)
        self.slots = FakeSlots()
        self.choice = RunnerChoice(in_process, lambda: self.slots, lambda: 1, False)
        ahead = AheadAsker(scheduler, Lookahead(True), scheduler.flush)  # type: ignore[arg-type]
        self.source: WorkSource = AskAheadSource(
            scheduler,  # type: ignore[arg-type]
            "w",
            1.0,
            ahead,
            self.choice.runs_here,
            lambda: True,
            lambda: {"worker": "w"},
            lambda task_id: False,
            lambda task_id: None,
        )
        self.source.begin_run(pinged=False)

    def start(self, name: str, timeout: float | None = None) -> list[TaskOutcome]:
        """Start ``name``; the outcomes collected right after (a run in a slot has none yet)."""
        task = Step(name=name)
        cancelled = self.source.before_start(task.task_id, timeout)
        if cancelled is not None:
            return [TaskOutcome(task.task_id, FAILED, cancelled)]
        self.choice.start(task, timeout)
        self.source.after_start()
        return self.collect()

    def collect(self) -> list[TaskOutcome]:
        outcomes = self.choice.collect()
        for outcome in outcomes:
            assert self.source.ended(outcome) == {}  # nothing was handed over
        return outcomes


def granted_b_then_c_ahead() -> tuple[Loop, AskingScheduler, dict[str, Any]]:
    """A worker that ran ``a`` twice, asked ahead and took the grant of ``b``; ``c``'s grant waits."""
    a, b, c = (Step(name=name).task_id for name in "abc")
    grant_c = {"task_id": c, "assumes_done": [b]}
    scheduler = AskingScheduler({"task_id": b, "assumes_done": [a], "more_tasks": [grant_c]})
    loop = Loop(scheduler)
    for _ in range(2):  # the second short task asks ahead
        assert [outcome.status for outcome in loop.start("a")] == [DONE]
    grant = loop.source.next_grant()
    assert grant is not None and grant["task_id"] == b
    return loop, scheduler, grant_c


@pytest.mark.parametrize(("status", "taken"), [(DONE, True), (FAILED, False)])
def test_a_grant_ahead_assuming_a_task_that_ran_in_a_slot_is_taken_only_if_that_task_finished_done(
    status, taken
):
    loop, scheduler, grant_c = granted_b_then_c_ahead()
    b, c = Step(name="b").task_id, grant_c["task_id"]
    assert loop.source.unstarted() == [c]  # listed among the worker's current tasks

    assert loop.start("b", timeout=5) == []  # granted ahead, but its timeout needs a slot: no ask before it
    assert loop.slots.started == [b] and scheduler.flushes == 1  # so the held reports go now
    loop.slots.outcomes.append(TaskOutcome(b, status))
    assert [outcome.task_id for outcome in loop.collect()] == [b]
    assert loop.source.next_grant() == (grant_c if taken else None)


@pytest.mark.parametrize("timeout", [None, 5], ids=["in-process", "would-need-a-slot"])
def test_a_task_granted_ahead_and_cancelled_before_it_starts_fails_without_running(timeout):
    loop, _, grant_c = granted_b_then_c_ahead()
    c = grant_c["task_id"]
    assert [outcome.status for outcome in loop.start("b")] == [DONE]
    assert loop.source.unstarted() == [c]

    assert loop.source.cancel_before_start(c, "Cancelled from the visualiser") is True
    assert loop.source.next_grant() == grant_c
    [outcome] = loop.start("c", timeout)
    assert (outcome.task_id, outcome.status, outcome.expl) == (c, FAILED, "Cancelled from the visualiser")
    assert RAN == ["a", "a", "b"] and loop.slots.started == []  # c never ran, here or in a slot


def test_a_cancel_of_a_task_not_granted_ahead_is_refused():
    loop = Loop(AskingScheduler({"task_id": None}))
    assert loop.source.cancel_before_start(Step(name="a").task_id, "why") is False
