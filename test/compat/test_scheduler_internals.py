"""The scheduler internals users' tests read or patch (LUIGI_COMPAT j.2 "Internals" and "Metrics", j.7,
LUIGI_CONTRIB 1.19): ``Scheduler._state`` with Luigi's ``SimpleTaskState`` methods, task records under
Luigi's attribute names (and the two writes tests make), ``_config``, the retry-policy helpers, and
metrics collectors replaced or mocked the ways users' tests do it.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from helpers.luigid import probe_for, serving_in_thread
from prometheus_client import CollectorRegistry

import luigi.metrics
import luigi.scheduler
from luigi.metrics import MetricsCollector, MetricsCollectors
from luigi.scheduler import (
    DISABLED,
    DONE,
    FAILED,
    PENDING,
    RUNNING,
    RetryPolicy,
    Scheduler,
    SimpleTaskState,
    TaskRecord,
)
from luigi.scheduler.store import SqlStore

WORKER = "myworker"

# Luigi's [scheduler] options (LUIGI_COMPAT, the [scheduler] section): tests read them off ``_config``.
LUIGI_SCHEDULER_OPTIONS = (
    "retry_delay", "remove_delay", "worker_disconnect_delay", "state_path", "batch_emails", "disable_window",
    "retry_count", "disable_hard_timeout", "disable_persist", "max_shown_tasks", "max_graph_nodes",
    "record_task_history", "prune_on_get_work", "pause_enabled", "send_messages", "metrics_collector",
    "metrics_custom_import", "stable_done_cooldown_secs",
)  # fmt: skip
# The four methods Luigi's MetricsCollector declares abstract, and the three it defines (j.7): all a
# collector written for Luigi has.
LUIGI_COLLECTOR_METHODS = [
    "handle_task_started", "handle_task_failed", "handle_task_disabled", "handle_task_done",
    "handle_task_statistics", "generate_latest", "configure_http_handler",
]  # fmt: skip


def run_one(sch: Scheduler, task_id: str, status: str = DONE) -> None:
    """The worker takes ``task_id`` and reports ``status`` for it."""
    assert sch.get_work(worker=WORKER)["task_id"] == task_id
    sch.add_task(worker=WORKER, task_id=task_id, status=status)


# -- _state: reading tasks and workers -------------------------------------------------------------------


def test_get_task_shows_a_reported_task_under_luigis_attribute_names():
    sch = Scheduler()
    sch.add_task(worker=WORKER, task_id="B", family="B")
    sch.add_task(
        worker=WORKER,
        task_id="A",
        family="Load",
        params={"day": "2024-01-01"},
        priority=5,
        deps=["B"],
        resources={"db": 1},
        retry_policy_dict={"retry_count": 4},
    )
    task = sch._state.get_task("A")
    assert (task.id, task.status, task.family, task.priority) == ("A", PENDING, "Load", 5)
    assert task.params == {"day": "2024-01-01"}
    assert set(task.deps) == {"B"} and task.resources == {"db": 1}
    assert set(task.stakeholders) == {WORKER} and list(task.workers) == [WORKER]
    assert (task.worker_running, task.time_running) == (None, None)
    assert task.retry_policy.retry_count == 4 and task.failures.num_failures() == 0
    assert task.updated == task.time > 0
    assert task.pretty_id == "Load(day=2024-01-01)"  # any other field of ours reads through


def test_get_task_follows_the_task_through_its_run():
    sch = Scheduler()
    sch.add_task(worker=WORKER, task_id="A")
    task = sch._state.get_task("A")
    sch.get_work(worker=WORKER)
    assert (task.status, task.worker_running) == (RUNNING, WORKER) and task.time_running is not None
    sch.add_task(worker=WORKER, task_id="A", status=DONE)
    assert task.status == DONE and sch._state.get_task("A") == task


def test_get_task_of_an_unknown_id_gives_the_default_and_adds_nothing():
    sch = Scheduler()
    assert sch._state.get_task("nope") is None
    assert sch._state.get_task("nope", default="absent") == "absent"
    assert sch.task_list("", "") == {}


def test_get_task_with_setdefault_adds_the_record_which_the_scheduler_then_schedules():
    sch = Scheduler()
    record = TaskRecord(
        id="A", status=PENDING, created=1.0, updated=1.0, retry_policy=sch.config.retry_policy(), family="A"
    )
    task = sch._state.get_task("A", setdefault=record)
    assert task.record is record and task.status == PENDING
    assert sch._state.get_task("A", setdefault=record) == task  # known now: returned as it is
    sch.add_task(worker=WORKER, task_id="A")
    run_one(sch, "A")
    assert record.status == DONE


def test_get_task_refuses_a_setdefault_of_another_id():
    sch = Scheduler()
    other = TaskRecord(
        id="B", status=PENDING, created=1.0, updated=1.0, retry_policy=sch.config.retry_policy()
    )
    with pytest.raises(ValueError, match=r"needs a TaskRecord whose id is 'A'"):
        sch._state.get_task("A", setdefault=other)
    assert sch._state.get_task("B") is None


def test_active_tasks_and_the_pending_count():
    sch = Scheduler()
    for task_id in ("A", "B", "C"):
        sch.add_task(worker=WORKER, task_id=task_id)
    sch.add_task(worker=WORKER, task_id="D", status=DONE)
    sch.get_work(worker=WORKER)  # one of A, B, C runs
    assert {task.id for task in sch._state.get_active_tasks()} == {"A", "B", "C", "D"}
    assert [task.id for task in sch._state.get_active_tasks_by_status(DONE)] == ["D"]
    assert sch._state.num_pending_tasks() == 3  # PENDING and RUNNING


def test_get_worker_creates_an_unknown_worker_and_active_workers_filter_as_luigis_do():
    sch = Scheduler()
    sch.add_task(worker="old", task_id="A")
    sch.get_work(worker="old")
    first_ask = sch._state.get_worker("old").last_get_work
    assert [w.id for w in sch._state.get_active_workers()] == ["old"]
    fresh = sch._state.get_worker("fresh")
    assert fresh.id == "fresh" and {w.id for w in sch._state.get_active_workers()} == {"old", "fresh"}
    assert [w.id for w in sch._state.get_active_workers(last_get_work_gt=first_ask - 1)] == ["old"]
    assert [w.id for w in sch._state.get_active_workers(last_active_lt=fresh.last_active)] == ["old"]


# -- the writes tests make --------------------------------------------------------------------------------


def test_time_running_written_by_a_test_shows_in_the_task_list():
    sch = Scheduler()
    sch.add_task(worker=WORKER, task_id="A")
    sch.get_work(worker=WORKER)
    sch._state.get_task("A").time_running = 1234.5
    assert sch.task_list(RUNNING, "")["A"]["time_running"] == 1234.5


def test_time_running_written_by_a_test_is_the_start_of_the_run_time_prometheus_reports():
    sch = Scheduler(metrics_collector=MetricsCollectors.prometheus)
    sch.add_task(worker=WORKER, task_id="A", family="Fam")
    sch.get_work(worker=WORKER)
    task = sch._state.get_task("A")
    task.time_running = task.time_running - 7.0
    sch.add_task(worker=WORKER, task_id="A", status=DONE)
    registry: CollectorRegistry = sch._state._metrics_collector.registry
    seconds = registry.get_sample_value("luigi_task_execution_time_seconds", {"family": "Fam"})
    assert seconds == task.updated - task.time_running >= 7.0


def test_updated_written_by_a_test_ends_the_cooldown_of_a_task_just_done():
    sch = Scheduler()  # stable_done_cooldown_secs = 10
    sch.add_task(worker=WORKER, task_id="A")
    run_one(sch, "A")
    sch.add_task(worker="other", task_id="A", status=PENDING)
    assert sch._state.get_task("A").status == DONE  # done a moment ago: a PENDING report is ignored
    sch._state.get_task("A").updated -= 60
    sch.add_task(worker="other", task_id="A", status=PENDING)
    assert sch._state.get_task("A").status == PENDING


def test_written_times_are_saved_like_any_change(tmp_path):
    path = tmp_path / "state.sqlite"
    sch = Scheduler(store=SqlStore.for_file(path))
    sch.add_task(worker=WORKER, task_id="A")
    sch.get_work(worker=WORKER)
    task = sch._state.get_task("A")
    task.time_running, task.updated = 100.0, 200.0
    sch.close()  # flushes what was marked changed
    restarted = Scheduler(store=SqlStore.for_file(path))
    restarted.load()
    try:
        again = restarted._state.get_task("A")
        assert (again.time_running, again.updated) == (100.0, 200.0)
    finally:
        restarted.close()


def test_other_attributes_are_read_only_with_the_way_to_change_them():
    sch = Scheduler()
    sch.add_task(worker=WORKER, task_id="A")
    task = sch._state.get_task("A")
    with pytest.raises(AttributeError, match=r"Cannot set 'status' on scheduler task 'A': .*\(add_task"):
        task.status = DONE
    assert task.status == PENDING


def test_failures_count_adds_and_clears_as_luigis_do_and_the_disable_rule_sees_it():
    sch = Scheduler(retry_count=3, retry_delay=0)
    sch.add_task(worker=WORKER, task_id="A")
    run_one(sch, "A", FAILED)
    failures = sch._state.get_task("A").failures
    assert failures.num_failures() == 1 and failures.first_failure_time is not None
    failures.add_failure()
    assert failures.num_failures() == 2
    failures.clear()
    assert failures.num_failures() == 0 and failures.first_failure_time is None
    sch.prune()  # the retry delay (0) has passed: PENDING again
    run_one(sch, "A", FAILED)
    sch._state.get_task("A").failures.add_failure()
    sch.prune()
    run_one(sch, "A", FAILED)  # the third failure counted in the window
    assert sch._state.get_task("A").status == DISABLED


# -- _config and the retry policies ------------------------------------------------------------------------


def test_config_has_luigis_option_names_and_its_retry_policy():
    sch = Scheduler(disable_persist=10, retry_count=2, disable_window=2)
    assert all(hasattr(sch._config, name) for name in LUIGI_SCHEDULER_OPTIONS)
    assert (sch._config.disable_persist, sch._config.retry_count, sch._config.disable_window) == (10, 2, 2)
    assert sch._config._get_retry_policy() == RetryPolicy(2, 999999999, 2)
    assert luigi.scheduler.scheduler(retry_count=5)._get_retry_policy() == RetryPolicy(5, 999999999, 3600)


def test_generate_retry_policy_puts_a_tasks_values_over_the_configs():
    sch = Scheduler(retry_count=2)
    assert sch._generate_retry_policy({"disable_window": 30, "retry_count": None}) == RetryPolicy(
        2, 999999999, 30
    )
    assert sch._generate_retry_policy({}) == RetryPolicy(2, 999999999, 3600)
    assert luigi.scheduler._get_empty_retry_policy() == RetryPolicy(None, None, None)


def test_simple_task_state_is_built_from_a_state_path_as_luigis_is():
    state = SimpleTaskState("/tmp/luigi-state.pickle")
    assert state.config.state_path == "/tmp/luigi-state.pickle"
    record = TaskRecord(
        id="A", status=PENDING, created=1.0, updated=1.0, retry_policy=state.config.retry_policy()
    )
    assert state.get_task("A", setdefault=record).status == PENDING
    assert state.num_pending_tasks() == 1 and state.get_worker("W").id == "W"
    assert isinstance(state._metrics_collector, luigi.metrics.NoMetricsCollector)


# -- metrics collectors as users' tests replace or mock them -------------------------------------------------


def test_a_mock_collector_set_on_the_state_hears_each_transition_with_the_task_get_task_returns():
    sch = Scheduler(retry_count=1)
    collector = sch._state._metrics_collector = mock.MagicMock()
    sch.add_task(worker=WORKER, task_id="A")
    sch.add_task(worker=WORKER, task_id="B")
    collector.handle_task_started.assert_not_called()  # adding a PENDING task tells it nothing
    run_one(sch, "A")
    a = sch._state.get_task("A")
    collector.handle_task_started.assert_called_once_with(a)
    collector.handle_task_done.assert_called_once_with(a)
    run_one(sch, "B", FAILED)
    collector.handle_task_disabled.assert_called_once_with(sch._state.get_task("B"), sch._config)
    sch.report_task_statistics("A", {"rows": 3})
    collector.handle_task_statistics.assert_called_once_with(a, {"rows": 3})
    collector.handle_task_started.reset_mock()
    sch.update_metrics_task_started(a)  # as a user's code may call it with the task
    collector.handle_task_started.assert_called_once_with(a)


def test_patching_the_default_collector_class_gives_the_scheduler_a_mock():
    with mock.patch("luigi.metrics.NoMetricsCollector") as collector_class:
        sch = Scheduler()
    collector = collector_class.return_value
    assert sch._state._metrics_collector is collector
    sch.add_task(worker=WORKER, task_id="A")
    run_one(sch, "A", FAILED)
    collector.handle_task_failed.assert_called_once_with(sch._state.get_task("A"))


def test_patching_one_method_of_the_configured_collector():
    sch = Scheduler(metrics_collector=MetricsCollectors.prometheus)
    sch.add_task(worker=WORKER, task_id="A")
    with mock.patch.object(sch._state._metrics_collector, "handle_task_started") as started:
        sch.get_work(worker=WORKER)
    started.assert_called_once_with(sch._state.get_task("A"))


LUIGI_ONLY_MODULE = '''
from unittest import mock

from luigi.metrics import MetricsCollector

HEARD = mock.MagicMock()


class LuigiOnly(MetricsCollector):
    """A collector as written for Luigi: its four abstract methods and nothing of ours."""

    def __init__(self):
        pass

    def handle_task_started(self, task):
        HEARD.started(task.id)

    def handle_task_failed(self, task):
        HEARD.failed(task.id)

    def handle_task_disabled(self, task, config):
        HEARD.disabled(task.id, config.retry_count)

    def handle_task_done(self, task):
        HEARD.done(task.id, task.updated - task.time_running >= 0)
'''


@pytest.fixture
def luigi_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    (tmp_path / "luigi_only_metrics.py").write_text(LUIGI_ONLY_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import luigi_only_metrics

    yield luigi_only_metrics
    sys.modules.pop("luigi_only_metrics", None)


def test_a_custom_collector_with_only_luigis_methods_hears_the_run(luigi_only):
    sch = Scheduler(
        metrics_collector=MetricsCollectors.custom, metrics_custom_import="luigi_only_metrics.LuigiOnly"
    )
    assert isinstance(sch._state._metrics_collector, luigi_only.LuigiOnly)
    sch.add_task(worker=WORKER, task_id="A")
    run_one(sch, "A")
    assert luigi_only.HEARD.mock_calls == [mock.call.started("A"), mock.call.done("A", True)]


def test_luigid_serves_with_a_collector_that_has_none_of_our_hooks(caplog):
    sch = Scheduler()
    collector = sch._state._metrics_collector = mock.Mock(spec=LUIGI_COLLECTOR_METHODS)
    collector.generate_latest.return_value = None
    with caplog.at_level(logging.WARNING), serving_in_thread(sch) as server:
        probe = probe_for(server)
        assert probe.call("add_task", {"worker": WORKER, "task_id": "A"}).status == 200
        assert probe.call("get_work", {"worker": WORKER}).json()["response"]["task_id"] == "A"
        assert probe.request("GET", "/metrics").status == 200
    collector.handle_task_started.assert_called_once_with(sch._state.get_task("A"))
    assert not [r for r in caplog.records if "Metrics collector failed" in r.getMessage()]


def test_the_optional_hooks_are_ours_to_skip():
    assert luigi.metrics.CollectorExtras.of(mock.Mock(spec=LUIGI_COLLECTOR_METHODS)).observe_rpc is None
    assert luigi.metrics.CollectorExtras.of(luigi.metrics.NoMetricsCollector()).watch_scheduler is None
    heard = luigi.metrics.CollectorExtras.of(mock.MagicMock())
    assert heard.observe_rpc is not None and heard.watch_scheduler is not None
    assert issubclass(luigi.metrics.NoMetricsCollector, MetricsCollector)
