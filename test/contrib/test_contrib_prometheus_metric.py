"""The prometheus collector as users' tests see it: Luigi's series names, label sets and the execution-time
gauge, read from the collector's own registry after the scheduler's records pass through it.

The page ``luigid`` serves is tested end to end in test/compat/test_metrics.py.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest

prometheus_client = pytest.importorskip("prometheus_client")

from helpers.scheduler import HeldSchedulerFactory  # noqa: E402

import luigi  # noqa: E402
from luigi.contrib.prometheus_metric import PrometheusMetricsCollector  # noqa: E402
from luigi.metrics import MetricsCollectors  # noqa: E402
from luigi.scheduler import Scheduler  # noqa: E402

FAMILY_ONLY = {"family": "TaskFamily"}


def _scheduler(**collector_options: Any) -> Scheduler:
    scheduler = Scheduler(metrics_collector=MetricsCollectors.prometheus)
    if collector_options:  # as Luigi's tests do: a collector of their own, with options as keywords
        scheduler._state._metrics_collector = PrometheusMetricsCollector(**collector_options)
    return scheduler


def _ran_task(scheduler: Scheduler) -> Any:
    """A task record that started at 0 and was last updated at 5, as Luigi's tests set them."""
    scheduler.add_task(
        worker="myworker", task_id="TaskID", family="TaskFamily", params={"a": "1", "b": "2", "c": "3"}
    )
    task = scheduler._state.get_task("TaskID")
    task.time_running = 0
    task.updated = 5
    return task


def _value(scheduler: Scheduler, name: str, labels: dict[str, str]) -> float | None:
    value: float | None = scheduler._state._metrics_collector.registry.get_sample_value(name, labels=labels)
    return value


@pytest.mark.parametrize(
    ("handler", "counter"),
    [
        ("handle_task_failed", "luigi_task_failed_total"),
        ("handle_task_disabled", "luigi_task_disabled_total"),
        ("handle_task_done", "luigi_task_done_total"),
    ],
)
def test_an_ending_counts_once_and_sets_the_execution_time(handler, counter):
    scheduler = _scheduler()
    task = _ran_task(scheduler)
    collector = scheduler._state._metrics_collector
    args = (task, scheduler._config) if handler == "handle_task_disabled" else (task,)
    getattr(collector, handler)(*args)
    assert _value(scheduler, counter, FAMILY_ONLY) == 1
    assert _value(scheduler, "luigi_task_execution_time_seconds", FAMILY_ONLY) == 5


def test_a_start_counts_once_and_shows_the_execution_time_at_zero():
    scheduler = _scheduler()
    scheduler._state._metrics_collector.handle_task_started(_ran_task(scheduler))
    assert _value(scheduler, "luigi_task_started_total", FAMILY_ONLY) == 1
    assert _value(scheduler, "luigi_task_execution_time_seconds", FAMILY_ONLY) == 0


def test_parameters_alone_label_the_series_when_the_family_is_turned_off():
    scheduler = _scheduler(use_task_family_in_labels=False, task_parameters_to_use_in_labels=["a", "c"])
    scheduler._state._metrics_collector.handle_task_started(_ran_task(scheduler))
    assert _value(scheduler, "luigi_task_started_total", {"a": "1", "c": "3"}) == 1


def test_the_family_label_comes_after_the_parameter_labels():
    scheduler = _scheduler(task_parameters_to_use_in_labels=["b"])
    collector = scheduler._state._metrics_collector
    collector.handle_task_done(_ran_task(scheduler))
    assert collector.labels == ["b", "family"]
    assert _value(scheduler, "luigi_task_done_total", {"family": "TaskFamily", "b": "2"}) == 1


def test_a_parameter_the_task_lacks_is_labelled_none_as_luigi_labels_it():
    scheduler = _scheduler(task_parameters_to_use_in_labels=["missing"])
    scheduler._state._metrics_collector.handle_task_failed(_ran_task(scheduler))
    assert _value(scheduler, "luigi_task_failed_total", {"family": "TaskFamily", "missing": "None"}) == 1


def test_the_metrics_page_is_served_with_prometheus_content_type():
    collector = PrometheusMetricsCollector()
    handler = mock.MagicMock()
    collector.configure_http_handler(handler)
    handler.set_header.assert_called_once_with("Content-Type", prometheus_client.CONTENT_TYPE_LATEST)


class Step(luigi.Task):
    n = luigi.IntParameter()
    done = False

    def run(self) -> None:
        type(self).done = True

    def complete(self) -> bool:
        return type(self).done


def test_a_pipeline_run_through_the_scheduler_counts_started_and_done_under_luigis_labels():
    luigi.configuration.get_config().set("prometheus", "task_parameters_to_use_in_labels", '["n"]')
    scheduler = Scheduler(metrics_collector=MetricsCollectors.prometheus)
    assert luigi.build(
        [Step(n=3)], worker_scheduler_factory=HeldSchedulerFactory(scheduler), local_scheduler=True
    )
    labels = {"n": "3", "family": "Step"}
    assert _value(scheduler, "luigi_task_started_total", labels) == 1
    assert _value(scheduler, "luigi_task_done_total", labels) == 1
    assert _value(scheduler, "luigi_task_execution_time_seconds", labels) >= 0
