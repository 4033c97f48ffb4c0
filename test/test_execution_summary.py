"""The execution summary text and verdict, computed from a worker's bookkeeping.

These tests hand-build the three bookkeeping attributes a worker keeps (what it told the scheduler, what
get_work answered, which tasks it scheduled), so every layout rule can be pinned down exactly.
"""

from __future__ import annotations

import datetime
import textwrap
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from luigi import configuration, parameter
from luigi.execution_summary import LuigiRunResult, LuigiStatusCode, _summary_dict, summary
from luigi.task import ExternalTask, Task

PENDING, DONE, FAILED, UNKNOWN = "PENDING", "DONE", "FAILED", "UNKNOWN"


@dataclass
class RecordedWorker:
    """Just the bookkeeping the summary reads from a worker."""

    _add_task_history: list[tuple[Task, str, bool]] = field(default_factory=list)
    _get_work_response_history: list[dict[str, Any]] = field(default_factory=list)
    _id: str = "me"
    _scheduled_tasks: dict[str, Task] = field(default_factory=dict)

    def saw(self, task: Task, *statuses: str, runnable: bool = True) -> RecordedWorker:
        for status in statuses:
            self._add_task_history.append((task, status, runnable))
        self._scheduled_tasks[task.task_id] = task
        return self

    def told_busy(self, *running: tuple[Task, str]) -> RecordedWorker:
        """get_work answered 'nothing for you' while other workers ran these tasks."""
        self._get_work_response_history.append(
            {
                "task_id": None,
                "running_tasks": [{"task_id": task.task_id, "worker": w} for task, w in running],
            }
        )
        return self


def framed(body: str) -> str:
    return (
        "\n===== Luigi Execution Summary =====\n\n"
        + textwrap.dedent(body).strip("\n")
        + ("\n\n===== Luigi Execution Summary =====\n")
    )


@pytest.fixture
def t() -> SimpleNamespace:
    """The tasks these tests use, defined per test so the registry restore drops them afterwards."""

    class Leaf(Task):
        pass

    class Root(Task):
        def requires(self):
            return Leaf()

    class Missing(ExternalTask):
        pass

    class NeedsMissing(Task):
        def requires(self):
            return Missing()

    class Numbered(Task):
        n = parameter.IntParameter()

    class Dated(Task):
        day = parameter.DateParameter()

    class Pair(Task):
        a = parameter.IntParameter()
        b = parameter.IntParameter()

    return SimpleNamespace(
        **{cls.__name__: cls for cls in (Leaf, Root, Missing, NeedsMissing, Numbered, Dated, Pair)}
    )


def test_successful_run_lists_already_done_and_completed_tasks(t):
    worker = RecordedWorker().saw(t.Root(), PENDING, DONE).saw(t.Leaf(), DONE)
    assert summary(worker) == framed(
        """
        Scheduled 2 tasks of which:
        * 1 complete ones were encountered:
            - 1 Leaf()
        * 1 ran successfully:
            - 1 Root()

        This progress looks :) because there were no failed tasks or missing dependencies
        """
    )


def test_failed_dependency_leaves_its_dependent_pending_with_a_reason(t):
    worker = RecordedWorker().saw(t.Root(), PENDING).saw(t.Leaf(), PENDING, FAILED)
    assert summary(worker) == framed(
        """
        Scheduled 2 tasks of which:
        * 1 failed:
            - 1 Leaf()
        * 1 were left pending, among these:
            * 1 had failed dependencies:
                - 1 Root()

        This progress looks :( because there were failed tasks
        """
    )
    assert LuigiRunResult(worker).status is LuigiStatusCode.FAILED


def test_missing_external_data_is_reported_and_nothing_ran(t):
    worker = RecordedWorker().saw(t.NeedsMissing(), PENDING).saw(t.Missing(), PENDING, runnable=False)
    assert summary(worker) == framed(
        """
        Scheduled 2 tasks of which:
        * 2 were left pending, among these:
            * 1 were missing external dependencies:
                - 1 Missing()
            * 1 had missing dependencies:
                - 1 NeedsMissing()

        Did not run any tasks
        This progress looks :| because there were missing external dependencies
        """
    )


def test_task_run_by_another_worker_names_that_worker(t):
    root = t.Root()
    worker = RecordedWorker().saw(root, PENDING).told_busy((root, "other-worker"))
    assert summary(worker) == framed(
        """
        Scheduled 1 tasks of which:
        * 1 were left pending, among these:
            * 1 were being run by another worker:
                - 1 Root()

        The other workers were:
            - other-worker ran 1 tasks

        Did not run any tasks
        This progress looks :) because there were no failed tasks or missing dependencies
        """
    )
    assert _summary_dict(worker)["run_by_other_worker"] == {root}


def test_dependency_run_by_another_worker_is_an_upstream_reason(t):
    leaf = t.Leaf()
    worker = RecordedWorker().saw(t.Root(), PENDING).saw(leaf, PENDING).told_busy((leaf, "w2"))
    sets = _summary_dict(worker)
    assert sets["upstream_run_by_other_worker"] == {t.Root()}
    assert sets["not_run"] == set()


def test_scheduling_error_is_reported(t):
    worker = RecordedWorker().saw(t.Root(), UNKNOWN)
    assert summary(worker) == framed(
        """
        Scheduled 1 tasks of which:
        * 1 failed scheduling:
            - 1 Root()

        Did not run any tasks
        This progress looks :( because there were tasks whose scheduling failed
        """
    )


def test_dependency_whose_scheduling_failed_is_an_upstream_reason(t):
    worker = RecordedWorker().saw(t.Root(), PENDING).saw(t.Leaf(), UNKNOWN)
    assert "    * 1 had dependencies whose scheduling failed:\n        - 1 Root()\n" in summary(worker)


def test_nothing_scheduled_says_so():
    assert summary(RecordedWorker()) == framed("Did not schedule any tasks")


def test_pending_task_with_no_blocked_dependency_was_not_granted_permission(t):
    worker = RecordedWorker().saw(t.Root(), PENDING).saw(t.Leaf(), DONE)
    result = LuigiRunResult(worker)
    assert (
        "    * 1 was not granted run permission by the scheduler:\n        - 1 Root()\n"
        in result.summary_text
    )
    assert result.status is LuigiStatusCode.NOT_RUN
    assert result.one_line_summary == (
        "This progress looks :| because "
        "there were tasks that were not granted run permission by the scheduler"
    )


def test_failure_that_later_succeeded_is_success_with_retry(t):
    worker = RecordedWorker().saw(t.Root(), PENDING, FAILED, PENDING, DONE)
    result = LuigiRunResult(worker)
    assert result.status is LuigiStatusCode.SUCCESS_WITH_RETRY
    assert "* 1 ran successfully:\n    - 1 Root()\n" in result.summary_text
    assert "failed" not in result.summary_text.split("This progress")[0]


def test_failures_and_scheduling_errors_together(t):
    worker = RecordedWorker().saw(t.Root(), PENDING, FAILED).saw(t.Leaf(), UNKNOWN)
    assert LuigiRunResult(worker).status is LuigiStatusCode.FAILED_AND_SCHEDULING_FAILED


def test_run_result_carries_worker_text_and_scheduling_flag(t):
    worker = RecordedWorker().saw(t.Root(), PENDING, DONE)
    result = LuigiRunResult(worker, worker_add_run_status=False)
    assert result.worker is worker
    assert result.scheduling_succeeded is False
    assert result.summary_text == summary(worker)
    assert result.one_line_summary == (
        "This progress looks :) because there were no failed tasks or missing dependencies"
    )
    assert str(result) == "LuigiRunResult with status LuigiStatusCode.SUCCESS"


def test_status_codes_carry_smiley_and_reason():
    assert LuigiStatusCode.SUCCESS.value == (":)", "there were no failed tasks or missing dependencies")
    assert LuigiStatusCode.MISSING_EXT.value == (":|", "there were missing external dependencies")
    assert [code.value[0] for code in LuigiStatusCode] == [":)", ":)", ":(", ":(", ":(", ":|", ":|"]


# -- per-family lines -----------------------------------------------------------------------------------


def _completed_lines(*tasks: Task) -> list[str]:
    worker = RecordedWorker()
    for task in tasks:
        worker.saw(task, PENDING, DONE)
    text = summary(worker)
    block = text.split("* ", 1)[1].split("\n\n")[0]
    return block.splitlines()[1:]


def test_more_than_three_contiguous_values_collapse_to_a_range(t):
    assert _completed_lines(*(t.Numbered(n=n) for n in (4, 1, 3, 2, 5))) == ["    - 5 Numbered(n=1...5)"]


def test_three_contiguous_values_are_listed(t):
    assert _completed_lines(t.Numbered(n=1), t.Numbered(n=2), t.Numbered(n=3)) == [
        "    - 3 Numbered(n=1,2,3)"
    ]


def test_values_with_gaps_are_listed_in_order(t):
    assert _completed_lines(*(t.Numbered(n=n) for n in (1, 2, 3, 5))) == ["    - 4 Numbered(n=1,2,3,5)"]


def test_contiguous_dates_collapse_to_a_range(t):
    days = [t.Dated(day=datetime.date(2024, 1, d)) for d in range(1, 11)]
    assert _completed_lines(*days) == ["    - 10 Dated(day=2024-01-01...2024-01-10)"]


def test_long_value_list_is_cut_short(t):
    tasks = [t.Numbered(n=n) for n in range(1000000, 1000040, 2)]
    assert _completed_lines(*tasks) == ["    - 20 Numbered(n=1000000,1000002,1000004,1000006,...)"]


def test_one_varying_parameter_among_several_collapses_to_a_range(t):
    tasks = [t.Pair(a=7, b=b) for b in (1, 2, 3)]
    assert _completed_lines(*tasks) == ["    - 3 Pair(a=7, b=1...3)"]


def test_several_parameters_show_one_or_two_tasks_or_the_first_and_an_ellipsis(t):
    assert _completed_lines(t.Pair(a=1, b=2)) == ["    - 1 Pair(a=1, b=2)"]
    assert _completed_lines(t.Pair(a=1, b=2), t.Pair(a=3, b=4)) == [
        "    - 2 Pair(a=1, b=2) and Pair(a=3, b=4)"
    ]
    assert _completed_lines(t.Pair(a=1, b=2), t.Pair(a=3, b=4), t.Pair(a=5, b=6)) == [
        "    - 3 Pair(a=1, b=2) ..."
    ]


def test_tasks_with_long_parameter_names_are_abbreviated():
    class Verbose(Task):
        a_parameter_with_a_remarkably_long_name = parameter.IntParameter()
        another_parameter_with_a_remarkably_long_name = parameter.IntParameter()

    task = Verbose(a_parameter_with_a_remarkably_long_name=1, another_parameter_with_a_remarkably_long_name=2)
    assert _completed_lines(task) == ["    - 1 Verbose(...)"]


def test_families_are_sorted_and_capped_at_summary_length():
    families = [type(f"Family{letter}", (Task,), {}) for letter in "GFEDCBA"]
    lines = _completed_lines(*(cls() for cls in families))
    assert lines == [f"    - 1 Family{letter}()" for letter in "ABCDE"] + ["    ..."]


def test_summary_length_comes_from_config_and_zero_means_unlimited():
    families = [type(f"Family{letter}", (Task,), {}) for letter in "ABCDEFG"]
    configuration.get_config().set("execution_summary", "summary_length", "2")
    assert len(_completed_lines(*(cls() for cls in families))) == 3
    configuration.get_config().set("execution_summary", "summary_length", "0")
    assert len(_completed_lines(*(cls() for cls in families))) == 7


def test_at_most_four_other_workers_are_named_when_more_remain(t):
    worker = RecordedWorker()
    tasks = [t.Numbered(n=n) for n in range(6)]
    for task in tasks:
        worker.saw(task, PENDING)
    worker.told_busy(*((task, f"w{task.n}") for task in tasks))
    text = summary(worker)
    others = text.split("The other workers were:\n")[1].split("\n\n")[0].splitlines()
    assert others == [f"    - w{i} ran 1 tasks" for i in range(4)] + ["    and 2 other workers"]


def test_own_worker_and_unknown_tasks_in_running_list_are_ignored(t):
    root = t.Root()
    worker = RecordedWorker().saw(root, PENDING)
    worker._get_work_response_history.append(
        {
            "task_id": None,
            "running_tasks": [
                {"task_id": root.task_id, "worker": "me"},
                {"task_id": "Nope_1", "worker": "w"},
            ],
        }
    )
    worker._get_work_response_history.append(
        {"task_id": root.task_id, "running_tasks": [{"task_id": root.task_id, "worker": "w9"}]}
    )
    assert _summary_dict(worker)["run_by_other_worker"] == set()


def test_deep_dependency_chains_do_not_hit_the_recursion_limit(t):
    class Chain(Task):
        n = parameter.IntParameter()

        def requires(self):
            return Chain(n=self.n - 1) if self.n > 0 else t.Missing()

    worker = RecordedWorker().saw(t.Missing(), PENDING, runnable=False)
    for n in range(3000):
        worker.saw(Chain(n=n), PENDING)
    sets = _summary_dict(worker)
    assert len(sets["upstream_missing_dependency"]) == 3000
    assert "    * 3000 had missing dependencies:\n        - 3000 Chain(n=0...2999)\n" in summary(worker)


@pytest.mark.parametrize(
    ("category", "statuses", "runnable"),
    [
        ("already_done", (DONE,), True),
        ("completed", (PENDING, DONE), True),
        ("failed", (PENDING, FAILED), True),
        ("scheduling_error", (UNKNOWN,), True),
        ("still_pending_ext", (PENDING,), False),
        ("still_pending_not_ext", (PENDING,), True),
    ],
)
def test_reported_statuses_map_to_categories(category, statuses, runnable, t):
    worker = RecordedWorker().saw(t.Leaf(), *statuses, runnable=runnable)
    sets = _summary_dict(worker)
    assert sets[category] == {t.Leaf()}
    expected = {category, "not_run"} if category == "still_pending_not_ext" else {category}
    assert {name for name, tasks in sets.items() if tasks and name != "ever_failed"} == expected
