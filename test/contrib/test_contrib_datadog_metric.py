"""The datadog collector as users' tests see it: Luigi's class name, and Luigi's calls to
``datadog.statsd.increment``/``gauge`` and ``datadog.api.Event.create``, which those tests patch.

What reaches a real UDP agent and a real web API is tested in test/compat/test_metrics.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest

pytest.importorskip("datadog")

from luigi import configuration  # noqa: E402
from luigi.contrib import datadog_metric  # noqa: E402
from luigi.contrib.datadog_metric import DatadogMetricsCollector  # noqa: E402
from luigi.metrics import MetricsCollectors  # noqa: E402
from luigi.scheduler import Scheduler  # noqa: E402

DEFAULT_TAGS = ["environment:development", "application:luigi"]


def test_the_scheduler_configured_for_datadog_builds_luigis_datadog_metrics_collector():
    configuration.get_config().set("scheduler", "metrics_collector", "datadog")

    collector = Scheduler().metrics_collector

    assert type(collector) is DatadogMetricsCollector
    assert type(collector).__name__ == "DatadogMetricsCollector"


def test_metrics_collectors_get_returns_exactly_luigis_class():
    assert type(MetricsCollectors.get(MetricsCollectors.datadog)) is DatadogMetricsCollector
    assert type(MetricsCollectors.get("datadog")) is DatadogMetricsCollector


def test_the_earlier_spelling_is_the_same_class():
    assert datadog_metric.DataDogMetricsCollector is DatadogMetricsCollector
    assert {"DatadogMetricsCollector", "DataDogMetricsCollector"} <= set(datadog_metric.__all__)


@pytest.fixture
def patched() -> Iterator[dict[str, Any]]:
    """The three datadog entry points patched the way Luigi's own tests patch them."""
    with (
        mock.patch("datadog.api.Event.create") as create,
        mock.patch("datadog.statsd.increment") as increment,
        mock.patch("datadog.statsd.gauge") as gauge,
    ):
        yield {"event": create, "increment": increment, "gauge": gauge}


@pytest.fixture
def scheduler(patched) -> Scheduler:
    return Scheduler(
        metrics_collector=MetricsCollectors.datadog, disable_persist=10, retry_count=2, disable_window=2
    )


def _added_task(scheduler: Scheduler, **params: str) -> Any:
    scheduler.add_task(worker="myworker", task_id="DDTaskID", family="DDTaskName", params=params)
    return scheduler._state.get_task("DDTaskID")


def test_adding_a_pending_task_sends_nothing(scheduler, patched):
    _added_task(scheduler)
    assert [m.call_count for m in patched.values()] == [0, 0, 0]


DISABLED_TEXT = (
    "A task has been disabled in the pipeline named: DDTaskName. The task has failed 2 times in the last 2 "
    "seconds, so it is being disabled for 10 seconds."
)


@pytest.mark.parametrize(
    ("handler", "metric", "title", "text", "alert_type", "priority", "state"),
    [
        (
            "handle_task_started",
            "luigi.task.started",
            "Luigi: A task has been started!",
            "A task has been started in the pipeline named: DDTaskName",
            "info",
            "low",
            "STARTED",
        ),
        (
            "handle_task_failed",
            "luigi.task.failed",
            "Luigi: A task has failed!",
            "A task has failed in the pipeline named: DDTaskName",
            "error",
            "normal",
            "FAILED",
        ),
        (
            "handle_task_disabled",
            "luigi.task.disabled",
            "Luigi: A task has been disabled!",
            DISABLED_TEXT,
            "error",
            "normal",
            "DISABLED",
        ),
    ],
)
def test_each_transition_sends_luigis_counter_then_event(
    scheduler, patched, handler, metric, title, text, alert_type, priority, state
):
    task = _added_task(scheduler)
    collector = scheduler._state._metrics_collector
    arguments = (task, scheduler._config) if handler == "handle_task_disabled" else (task,)
    getattr(collector, handler)(*arguments)

    patched["increment"].assert_called_once_with(metric, 1, tags=["task_name:DDTaskName", *DEFAULT_TAGS])
    patched["event"].assert_called_once_with(
        alert_type=alert_type,
        priority=priority,
        tags=["task_name:DDTaskName", f"task_state:{state}", *DEFAULT_TAGS],
        text=text,
        title=title,
    )


def test_a_done_task_sends_its_run_time_as_a_gauge(scheduler, patched, monkeypatch):
    monkeypatch.setattr("time.time", lambda: 0)
    task = _added_task(scheduler)
    task.time_running = 0
    scheduler._state._metrics_collector.handle_task_done(task)

    tags = ["task_name:DDTaskName", *DEFAULT_TAGS]
    patched["increment"].assert_called_once_with("luigi.task.done", 1, tags=tags)
    patched["gauge"].assert_called_once_with("luigi.task.execution_time", 0, tags=tags)
    patched["event"].assert_called_once_with(
        alert_type="info",
        priority="low",
        tags=["task_name:DDTaskName", "task_state:DONE", *DEFAULT_TAGS],
        text="A task has completed in the pipeline named: DDTaskName",
        title="Luigi: A task has been completed!",
    )


def test_a_task_done_without_having_run_here_sends_nothing(scheduler, patched):
    scheduler._state._metrics_collector.handle_task_done(_added_task(scheduler))
    assert [m.call_count for m in patched.values()] == [0, 0, 0]


def test_task_parameters_become_tags_after_the_task_name(scheduler, patched):
    task = _added_task(scheduler, a="1", b="2")
    scheduler._state._metrics_collector.handle_task_started(task)
    patched["increment"].assert_called_once_with(
        "luigi.task.started", 1, tags=["task_name:DDTaskName", "a:1", "b:2", *DEFAULT_TAGS]
    )


def test_the_scheduler_sends_started_when_a_worker_takes_the_task(scheduler, patched):
    _added_task(scheduler)
    scheduler.get_work(worker="myworker")
    patched["increment"].assert_called_once_with(
        "luigi.task.started", 1, tags=["task_name:DDTaskName", *DEFAULT_TAGS]
    )


def test_namespace_environment_and_default_tags_come_from_the_datadog_section(patched):
    config = configuration.get_config()
    config.set("datadog", "metric_namespace", "pipes")
    config.set("datadog", "environment", "staging")
    config.set("datadog", "default_tags", "application:luigi,team:data")
    scheduler = Scheduler(metrics_collector=MetricsCollectors.datadog)
    scheduler._state._metrics_collector.handle_task_failed(_added_task(scheduler))
    patched["increment"].assert_called_once_with(
        "pipes.task.failed",
        1,
        tags=["task_name:DDTaskName", "environment:staging", "application:luigi", "team:data"],
    )
