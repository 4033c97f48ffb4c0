"""The execution seam: the worker runs tasks only through a ``TaskRunner``, chosen in one place."""

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

    def deliver(self, task_id: str, message: Message) -> bool:
        return False

    def wait(self, longest: float) -> None:
        pass

    def collect(self) -> list[TaskOutcome]:
        outcomes, self.outcomes = self.outcomes, []
        return outcomes

    def take_granted_ahead(self) -> dict[str, Any] | None:
        return None

    def granted_ahead(self) -> list[str]:
        return []

    def shut_down(self) -> None:
        self.shut_downs += 1


class CallingWorker(Worker):
    def _build_runner(self, remote: bool) -> TaskRunner:
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

    def take_granted_ahead(self) -> dict[str, Any] | None:
        return None

    def granted_ahead(self) -> list[str]:
        return []

    def shut_down(self) -> None:
        pass


class AskingScheduler:
    """Grants ``reply`` to the first ask ahead; counts the flushes of held reports."""

    def __init__(self, reply: dict[str, Any]) -> None:
        self.reply = reply
        self.flushes = 0

    def ask_ahead(self, **kwargs: Any) -> bool:
        return True

    def take_ahead(self) -> dict[str, Any]:
        return self.reply

    def flush(self) -> None:
        self.flushes += 1


def runner_choice(
    scheduler: Any = None, worker_processes: int = 1, force_slots: bool = False
) -> tuple[RunnerChoice, FakeSlots]:
    ahead = AheadAsker(scheduler, Lookahead(True), scheduler.flush) if scheduler is not None else None
    options = TaskRunOptions(worker_id="w", check_unfulfilled_deps=False)
    in_process = InProcessRunner(scheduler, options, ahead, dict, lambda: True, lambda task_id: None)
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


def granted_b_then_c_ahead() -> tuple[RunnerChoice, FakeSlots, AskingScheduler, dict[str, Any]]:
    """A runner that ran ``a`` twice, asked ahead and took the grant of ``b``; ``c``'s grant waits."""
    a, b, c = (Step(name=name).task_id for name in "abc")
    grant_c = {"task_id": c, "assumes_done": [b]}
    scheduler = AskingScheduler({"task_id": b, "assumes_done": [a], "more_tasks": [grant_c]})
    choice, slots = runner_choice(scheduler)
    for _ in range(2):  # the second short task asks ahead
        choice.start(Step(name="a"), None)
        assert [outcome.status for outcome in choice.collect()] == [DONE]
    assert choice.take_granted_ahead()["task_id"] == b
    return choice, slots, scheduler, grant_c


@pytest.mark.parametrize(("status", "taken"), [(DONE, True), (FAILED, False)])
def test_a_grant_ahead_assuming_a_task_that_ran_in_a_slot_is_taken_only_if_that_task_finished_done(
    status, taken
):
    choice, slots, scheduler, grant_c = granted_b_then_c_ahead()
    b, c = Step(name="b").task_id, grant_c["task_id"]
    assert choice.granted_ahead() == [c]

    choice.start(Step(name="b"), 5)  # granted ahead, but its timeout needs a slot: no ask goes before it
    assert slots.started == [b] and scheduler.flushes == 1  # so the held reports go now
    slots.outcomes.append(TaskOutcome(b, status))
    assert [outcome.task_id for outcome in choice.collect()] == [b]
    assert choice.take_granted_ahead() == (grant_c if taken else None)


@pytest.mark.parametrize("timeout", [None, 5], ids=["in-process", "would-need-a-slot"])
def test_a_task_granted_ahead_and_cancelled_before_it_starts_fails_without_running(timeout):
    choice, slots, _, grant_c = granted_b_then_c_ahead()
    c = grant_c["task_id"]
    choice.start(Step(name="b"), None)
    assert [outcome.status for outcome in choice.collect()] == [DONE]
    assert choice.granted_ahead() == [c]

    assert choice.cancel_run(c, "Cancelled from the visualiser") is True
    assert choice.take_granted_ahead() == grant_c
    choice.start(Step(name="c"), timeout)
    [outcome] = choice.collect()
    assert (outcome.task_id, outcome.status, outcome.expl) == (c, FAILED, "Cancelled from the visualiser")
    assert RAN == ["a", "a", "b"] and slots.started == []  # c never ran, here or in a slot


def test_a_cancel_of_a_task_neither_running_nor_granted_ahead_is_refused():
    choice, _ = runner_choice(AskingScheduler({"task_id": None}))
    assert choice.cancel_run(Step(name="a").task_id, "why") is False


def test_the_slot_runner_satisfies_the_protocol_and_never_asks_ahead():
    runner: TaskRunner = SlotRunner(Scheduler(), TaskRunOptions(worker_id="w"), {}, lambda task_id: None)
    assert runner.take_granted_ahead() is None and runner.granted_ahead() == []
    assert runner.collect() == []
    runner.shut_down()


# -- a run in this process leaves the interpreter as it found it ------------------------------------------

_PROFILE_AFTER_A_RUN = """
import cProfile
import luigi

class Quick(luigi.Task):
    def complete(self):
        return False

    def run(self):
        pass

def plus_one(value):
    return value + 1

luigi.build([Quick()], local_scheduler=True, workers=1, log_level="WARNING")
profile = cProfile.Profile()
profile.enable()
plus_one(1)
profile.disable()
print("profiled")
"""


def test_a_profiler_started_after_an_in_process_run_works(tmp_path):
    """A run must not leave CPython's async-exception flag raised: on 3.11 a profiler or debugger
    (cProfile, pdb, coverage) started after it would spin for ever."""
    import os
    import subprocess
    import sys

    script = tmp_path / "profile_after_run.py"
    script.write_text(_PROFILE_AFTER_A_RUN)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "profiled"
