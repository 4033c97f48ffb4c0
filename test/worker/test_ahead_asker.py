"""The serial worker's side of asking ahead, on its own: when it asks, and which grants it runs."""

from __future__ import annotations

from typing import Any

import pytest

from luigi.rpc import RPCError
from luigi.worker import lookahead as lookahead_module
from luigi.worker.lookahead import AHEAD_TASKS, MAX_SKIP, SHORT_TASK, AheadAsker, Lookahead

# -- the policy ---------------------------------------------------------------------------------------------


def test_the_first_task_and_any_task_after_a_long_one_are_not_asked_ahead():
    policy = Lookahead(enabled=True)
    assert policy.should_ask() is False
    policy.ran(SHORT_TASK / 10)
    assert policy.should_ask() is True
    policy.ran(SHORT_TASK * 2)
    assert policy.should_ask() is False
    policy.ran(SHORT_TASK / 10)
    assert policy.should_ask() is True
    assert Lookahead(enabled=False).should_ask() is False


def test_asks_that_grant_nothing_skip_ever_more_tasks_up_to_a_cap_and_a_grant_resets_that():
    policy = Lookahead(enabled=True)
    policy.ran(0.0)
    skipped = []
    for _ in range(9):
        policy.answered(granted=False)
        count = 0
        while not policy.should_ask():
            count += 1
        skipped.append(count)
    assert skipped == [1, 2, 4, 8, 16, 32, MAX_SKIP, MAX_SKIP, MAX_SKIP]
    policy.answered(granted=True)
    assert policy.should_ask() is True
    policy.answered(granted=False)
    assert [policy.should_ask(), policy.should_ask()] == [False, True]


class AskingScheduler:
    """Answers ask_ahead with ``outcome`` (an exception is raised) and take_ahead with ``grant``;
    records the asks' kwargs and the flushes."""

    def __init__(self, outcome: Any, grant: dict[str, Any] | None = None) -> None:
        self.outcome = outcome
        self.grant = grant or {"task_id": "Next", "n_pending_tasks": 1}
        self.asks: list[dict[str, Any]] = []
        self.takes = 0
        self.flushes = 0

    def ask_ahead(self, **kwargs: Any) -> bool:
        self.asks.append(kwargs)
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return bool(self.outcome)

    def take_ahead(self) -> dict[str, Any]:
        self.takes += 1
        return self.grant

    def flush(self) -> None:
        self.flushes += 1


def short_policy() -> Lookahead:
    policy = Lookahead(enabled=True)
    policy.ran(0.0)
    return policy


def test_asking_ahead_raises_a_refused_report_as_the_ordinary_get_work_would():
    scheduler = AskingScheduler(RPCError("add_task(task_id='A'): HTTP 400: bad", status=400))
    asker = AheadAsker(scheduler, short_policy(), scheduler.flush)
    with pytest.raises(RPCError, match="HTTP 400"):
        asker.before_start("Current", True, dict)


def test_asking_ahead_leaves_an_unreachable_scheduler_to_the_ordinary_get_work_and_its_retries():
    scheduler = AskingScheduler(RPCError("no answer", ConnectionRefusedError("refused")))
    asker = AheadAsker(scheduler, short_policy(), scheduler.flush)
    asker.before_start("Current", True, dict)
    assert asker.take() is None


def test_an_ask_ahead_says_the_task_about_to_run_is_expected_to_finish_done():
    scheduler = AskingScheduler(True)
    asker = AheadAsker(scheduler, short_policy(), scheduler.flush)
    asker.before_start("Current", True, lambda: {"worker": "w", "current_tasks": ["Current"]})
    assert scheduler.asks == [
        {"worker": "w", "current_tasks": ["Current"], "assume_done": ["Current"], "max_tasks": AHEAD_TASKS}
    ]


@pytest.mark.parametrize(
    ("outcome", "runs_it"), [("DONE", True), ("FAILED", False), ("PENDING", False), (None, False)]
)
def test_a_grant_assuming_the_current_task_is_taken_only_if_that_task_finished_done(outcome, runs_it):
    grant = {"task_id": "Next", "assumes_done": ["Current"]}
    asker = AheadAsker(AskingScheduler(True, grant), short_policy(), lambda: None)
    asker.before_start("Current", True, dict)
    if outcome is not None:  # None: no outcome was handled for it
        asker.finished("Current", outcome == "DONE")
    assert asker.take() == (grant if runs_it else None)


def test_a_grant_assuming_a_task_other_than_the_one_that_ran_is_not_taken():
    grant = {"task_id": "Next", "assumes_done": ["Other"]}
    asker = AheadAsker(AskingScheduler(True, grant), short_policy(), lambda: None)
    asker.before_start("Current", True, dict)
    asker.finished("Current", True)
    assert asker.take() is None


def test_a_task_granted_ahead_that_will_not_ask_ahead_itself_sends_the_held_reports_first():
    scheduler = AskingScheduler(True)
    asker = AheadAsker(scheduler, short_policy(), scheduler.flush)
    asker.before_start("Current", True, dict)
    assert asker.take() == {"task_id": "Next", "n_pending_tasks": 1}
    asker.before_start("Next", False, dict)  # the granted task runs in a child process: no ask ahead
    assert scheduler.flushes == 1


def test_the_tasks_one_ask_granted_run_in_order_and_the_next_ask_goes_out_while_one_still_waits(monkeypatch):
    monkeypatch.setattr(lookahead_module, "ASK_WHILE_QUEUED", 1)
    grant = {
        "task_id": "B",
        "assumes_done": ["A"],
        "n_pending_tasks": 7,
        "more_tasks": [{"task_id": "C", "assumes_done": ["B"]}, {"task_id": "D"}],
    }
    scheduler = AskingScheduler(True, grant)
    asker = AheadAsker(scheduler, short_policy(), scheduler.flush)
    asker.before_start("A", True, dict)
    asker.finished("A", True)
    assert asker.take() == grant
    assert asker.queued() == ["C", "D"]  # the worker's current tasks, with those it runs
    asker.before_start("B", True, dict)  # two more wait: nothing is asked, the reports stay held
    asker.finished("B", True)
    assert asker.take() == {"task_id": "C", "assumes_done": ["B"], "n_pending_tasks": 7}
    scheduler.grant = {"task_id": "E", "assumes_done": ["D"]}

    asker.before_start("C", True, lambda: {"current_tasks": ["C", *asker.queued()]})  # D waits: ask now
    assumed = {"assume_done": ["C", "D"], "max_tasks": AHEAD_TASKS}
    assert scheduler.asks[-1] == {"current_tasks": ["C", "D"], **assumed}
    asker.finished("C", True)
    assert asker.take() == {"task_id": "D", "n_pending_tasks": 7}  # before the answer is read
    asker.before_start("D", True, dict)  # the ask is out: nothing more is sent
    assert (len(scheduler.asks), scheduler.takes, scheduler.flushes) == (2, 1, 0)
    asker.finished("D", True)
    assert asker.take() == {"task_id": "E", "assumes_done": ["D"]}  # the answer, read now
    assert scheduler.takes == 2


def test_a_waiting_grant_still_runs_when_the_task_it_assumes_finished_before_the_next_ask(monkeypatch):
    monkeypatch.setattr(lookahead_module, "ASK_WHILE_QUEUED", 1)
    grant = {"task_id": "B", "more_tasks": [{"task_id": "C"}, {"task_id": "D", "assumes_done": ["B"]}]}
    scheduler = AskingScheduler(True, grant)
    asker = AheadAsker(scheduler, short_policy(), scheduler.flush)
    asker.before_start("A", True, dict)
    asker.finished("A", True)
    assert asker.take()["task_id"] == "B"
    asker.before_start("B", True, dict)
    asker.finished("B", True)
    assert asker.take()["task_id"] == "C"
    asker.before_start("C", True, dict)  # the next ask: B finished before it
    asker.finished("C", True)
    assert asker.take() == {"task_id": "D", "assumes_done": ["B"]}


def test_a_grant_assuming_a_task_that_failed_is_dropped_with_the_grants_assuming_it_in_turn():
    grant = {
        "task_id": "B",
        "more_tasks": [
            {"task_id": "C", "assumes_done": ["B"]},
            {"task_id": "D", "assumes_done": ["C"]},
            {"task_id": "E"},
        ],
    }
    asker = AheadAsker(AskingScheduler(True, grant), short_policy(), lambda: None)
    asker.before_start("A", True, dict)
    asker.finished("A", True)
    assert asker.take()["task_id"] == "B"
    asker.before_start("B", True, dict)
    asker.finished("B", False)
    assert asker.take()["task_id"] == "E"  # C and D are not run: the scheduler puts them back


def test_after_a_long_task_the_reports_held_for_the_queued_tasks_are_sent_before_the_next_starts():
    grant = {"task_id": "B", "more_tasks": [{"task_id": "C"}, {"task_id": "D"}]}
    scheduler = AskingScheduler(True, grant)
    policy = short_policy()
    asker = AheadAsker(scheduler, policy, scheduler.flush)
    asker.before_start("A", True, dict)
    asker.take()
    policy.ran(SHORT_TASK * 2)  # B ran long
    asker.take()
    asker.before_start("C", True, dict)
    assert (len(scheduler.asks), scheduler.flushes) == (1, 1)


def test_a_batch_granted_ahead_is_taken_and_never_listed_as_a_current_task_without_an_id():
    grant = {"task_id": None, "batch_id": "b1", "batch_task_ids": ["P1", "P2"]}
    asker = AheadAsker(AskingScheduler(True, grant), short_policy(), lambda: None)
    asker._receive(grant)  # what take() does with the answer it reads
    assert asker.queued() == []
    assert asker.take() == grant
