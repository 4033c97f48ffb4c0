"""``[scheduler] metrics_collector = prometheus``: task counters and the scheduler's figures at ``/metrics``.

Luigi's series, labelled per ``[prometheus]`` (the task family, and any task parameters named in
``task_parameters_to_use_in_labels``):

- ``luigi_task_started_total``, ``luigi_task_failed_total``, ``luigi_task_disabled_total``,
  ``luigi_task_done_total`` (counters);
- ``luigi_task_execution_time_seconds`` (a gauge: the last run's time, set when a task is DONE).

Ours, about the scheduler itself:

- ``luigid_tasks{status}``: tasks held per status;
- ``luigid_workers_alive``: workers heard from within ``worker_disconnect_delay``;
- ``luigid_rpc_duration_seconds{method}``: a histogram of each RPC served (``get_work`` among them);
- ``luigid_task_history_events_waiting`` and ``luigid_task_history_events_lost_total``: the task history
  backlog.

The scheduler's figures are read when ``/metrics`` is scraped, never between scrapes. Needs the
``prometheus_client`` package (``pip install 'luigi[prometheus]'``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from luigi import parameter
from luigi.contrib.optional import require
from luigi.metrics import MetricsCollector
from luigi.task import Config

if TYPE_CHECKING:
    from luigi.scheduler.views.vitals import SchedulerVitals

prometheus_client = require("prometheus_client", "prometheus", "luigi.contrib.prometheus_metric")
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily  # noqa: E402

__all__ = ["PrometheusMetricsCollector", "prometheus"]

FAMILY_LABEL = "family"
# RPCs take from tens of microseconds to seconds: finer buckets than the client's defaults at the low end.
RPC_BUCKETS = (1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class prometheus(Config):
    """``[prometheus]``: which labels the task series carry."""

    use_task_family_in_labels = parameter.BoolParameter(
        default=True,
        parsing=parameter.BoolParameter.EXPLICIT_PARSING,
        description="Label every task series with the task family",
    )
    task_parameters_to_use_in_labels = parameter.ListParameter(
        default=[], description="Task parameters whose values label the task series"
    )


class PrometheusMetricsCollector(MetricsCollector):
    """Counts task transitions per label set, in a registry of its own that ``/metrics`` serves."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        config = prometheus(**kwargs)
        self.labels = _label_names(config.use_task_family_in_labels, config.task_parameters_to_use_in_labels)
        self.registry = prometheus_client.CollectorRegistry()
        self.task_started_counter = self._counter("luigi_task_started", "number of started luigi tasks")
        self.task_failed_counter = self._counter("luigi_task_failed", "number of failed luigi tasks")
        self.task_disabled_counter = self._counter("luigi_task_disabled", "number of disabled luigi tasks")
        self.task_done_counter = self._counter("luigi_task_done", "number of done luigi tasks")
        self.task_execution_time = prometheus_client.Gauge(
            "luigi_task_execution_time_seconds",
            "luigi task execution time in seconds",
            self.labels,
            registry=self.registry,
        )
        self.rpc_duration = prometheus_client.Histogram(
            "luigid_rpc_duration_seconds",
            "time luigid took to serve each RPC, by method",
            ["method"],
            buckets=RPC_BUCKETS,
            registry=self.registry,
        )
        self._rpc_children: dict[str, Any] = {}
        self._children: dict[int, dict[tuple[str, ...], Any]] = {}
        self._vitals = _VitalsCollector()
        self.registry.register(self._vitals)

    def _counter(self, name: str, documentation: str) -> Any:
        return prometheus_client.Counter(name, documentation, self.labels, registry=self.registry)

    def _label_values(self, task: Any) -> tuple[str, ...]:
        params = task.params or {}
        return tuple(
            task.family if label == FAMILY_LABEL else str(params.get(label, "")) for label in self.labels
        )

    def _child(self, metric: Any, task: Any) -> Any:
        """The series of ``metric`` for the task's labels, cached: a transition costs a dict lookup."""
        values = self._label_values(task)
        children = self._children.setdefault(id(metric), {})
        child = children.get(values)
        if child is None:
            child = children[values] = metric.labels(*values)
        return child

    def handle_task_started(self, task: Any) -> None:
        self._child(self.task_started_counter, task).inc()

    def handle_task_failed(self, task: Any) -> None:
        self._child(self.task_failed_counter, task).inc()

    def handle_task_disabled(self, task: Any, config: Any) -> None:
        self._child(self.task_disabled_counter, task).inc()

    def handle_task_done(self, task: Any) -> None:
        self._child(self.task_done_counter, task).inc()
        if task.time_running is not None:  # a task reported DONE without running here has no run time
            self._child(self.task_execution_time, task).set(task.updated - task.time_running)

    def observe_rpc(self, method: str, seconds: float) -> None:
        child = self._rpc_children.get(method)
        if child is None:  # method names come from the registry, so the label set stays small
            child = self._rpc_children[method] = self.rpc_duration.labels(method=method)
        child.observe(seconds)

    def watch_scheduler(self, vitals: SchedulerVitals) -> None:
        self._vitals.vitals = vitals

    def generate_latest(self) -> bytes:
        """The registry in Prometheus' text format."""
        text: bytes = prometheus_client.generate_latest(self.registry)
        return text

    def configure_http_handler(self, http_handler: Any) -> None:
        http_handler.set_header("Content-Type", prometheus_client.CONTENT_TYPE_LATEST)


def _label_names(use_family: bool, parameters: Any) -> list[str]:
    labels = ([FAMILY_LABEL] if use_family else []) + [str(name) for name in parameters]
    if not labels:
        raise ValueError(
            "[prometheus] labels are empty: set use_task_family_in_labels = true or list parameters "
            "in task_parameters_to_use_in_labels"
        )
    return labels


class _VitalsCollector:
    """A custom prometheus_client collector: the scheduler's figures, read at each scrape."""

    def __init__(self) -> None:
        self.vitals: SchedulerVitals | None = None

    def describe(self) -> list[Any]:
        return []  # nothing to check at registration: the series exist only once a scheduler is watched

    def collect(self) -> Iterator[Any]:
        vitals = self.vitals
        if vitals is None:
            return
        tasks = GaugeMetricFamily("luigid_tasks", "tasks the scheduler holds, by status", labels=["status"])
        for status, count in vitals.tasks_by_status().items():
            tasks.add_metric([status], count)
        yield tasks
        yield GaugeMetricFamily(
            "luigid_workers_alive",
            "workers heard from within worker_disconnect_delay",
            value=vitals.workers_alive(),
        )
        history = vitals.history()
        yield GaugeMetricFamily(
            "luigid_task_history_events_waiting",
            "task history events waiting to be written",
            value=history.buffered,
        )
        yield CounterMetricFamily(
            "luigid_task_history_events_lost",
            "task history events not recorded (dropped in an outage or refused by the database)",
            value=history.lost,
        )
