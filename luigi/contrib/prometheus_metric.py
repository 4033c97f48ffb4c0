"""``[scheduler] metrics_collector = prometheus``: task counters and the scheduler's figures at ``/metrics``.

Luigi's series, labelled per ``[prometheus]`` (the task family, and any task parameters named in
``task_parameters_to_use_in_labels``):

- ``luigi_task_started_total``, ``luigi_task_failed_total``, ``luigi_task_disabled_total``,
  ``luigi_task_done_total`` (counters);
- ``luigi_task_execution_time_seconds`` (a gauge: 0 when a task starts, then its run time when it is done,
  failed or disabled).

Ours, about the scheduler itself:

- ``luigid_tasks{status}``: tasks held per status;
- ``luigid_workers_alive``: workers heard from within ``worker_disconnect_delay``;
- ``luigid_rpc_duration_seconds{method}``: a histogram of each RPC served (``get_work`` among them);
- ``luigid_task_history_events_waiting`` and ``luigid_task_history_events_lost_total``: the task history
  backlog;
- ``luigid_schedule_late_total{schedule}``: runs of each ``[schedule:<name>]`` that were late (its
  ``deadline``), kept across restarts.

The scheduler's figures are read when ``/metrics`` is scraped, never between scrapes. Needs the
``prometheus_client`` package (``pip install 'luigi[prometheus]'``).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from luigi import parameter
from luigi.contrib.optional import require
from luigi.metrics import MetricsCollector
from luigi.task import Config

if TYPE_CHECKING:
    from luigi.scheduler.views.vitals import SchedulerVitals

prometheus_client = require("prometheus_client", "prometheus", "luigi.contrib.prometheus_metric")
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily  # noqa: E402
from prometheus_client.utils import floatToGoString  # noqa: E402

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
    """Counts task transitions per label set, in a registry of its own that ``/metrics`` serves.

    Cheap on the scheduler's path: each label set's series are looked up once and cached, and RPC
    timings are plain bucket counts until a scrape turns them into a histogram.
    """

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
        self._series: dict[tuple[str, ...], _TaskSeries] = {}
        self._scheduler_figures = _SchedulerFigures()
        self.registry.register(self._scheduler_figures)

    def _counter(self, name: str, documentation: str) -> Any:
        return prometheus_client.Counter(name, documentation, self.labels, registry=self.registry)

    def _series_of(self, task: Any) -> _TaskSeries:
        """The task's label set's series (made on first use)."""
        params = task.params or {}
        key = tuple(  # as Luigi labels them: a parameter the task lacks is labelled "None"
            str(task.family if label == FAMILY_LABEL else params.get(label)) for label in self.labels
        )
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = _TaskSeries(
                self.task_started_counter.labels(*key),
                self.task_failed_counter.labels(*key),
                self.task_disabled_counter.labels(*key),
                self.task_done_counter.labels(*key),
                self.task_execution_time.labels(*key),
            )
        return series

    def handle_task_started(self, task: Any) -> None:
        self._series_of(task).started.inc()  # (making the series shows its execution time at 0, as Luigi)

    def handle_task_failed(self, task: Any) -> None:
        series = self._series_of(task)
        series.failed.inc()
        _set_execution_time(series, task)

    def handle_task_disabled(self, task: Any, config: Any) -> None:
        series = self._series_of(task)
        series.disabled.inc()
        _set_execution_time(series, task)

    def handle_task_done(self, task: Any) -> None:
        series = self._series_of(task)
        series.done.inc()
        _set_execution_time(series, task)

    def observe_rpc(self, method: str, seconds: float) -> None:
        self._scheduler_figures.observe_rpc(method, seconds)

    def watch_scheduler(self, vitals: SchedulerVitals) -> None:
        self._scheduler_figures.vitals = vitals

    def generate_latest(self) -> bytes:
        """The registry in Prometheus' text format."""
        text: bytes = prometheus_client.generate_latest(self.registry)
        return text

    def configure_http_handler(self, http_handler: Any) -> None:
        http_handler.set_header("Content-Type", prometheus_client.CONTENT_TYPE_LATEST)


@dataclass(frozen=True)
class _TaskSeries:
    """Luigi's five series for one label set."""

    started: Any
    failed: Any
    disabled: Any
    done: Any
    execution_time: Any


def _set_execution_time(series: _TaskSeries, task: Any) -> None:
    """The gauge takes the task's run time; a task that never ran here (reported by a worker) has none."""
    if task.time_running is not None:
        series.execution_time.set(task.updated - task.time_running)


def _label_names(use_family: bool, parameters: Any) -> list[str]:
    labels = [str(name) for name in parameters] + ([FAMILY_LABEL] if use_family else [])
    if not labels:
        raise ValueError(
            "[prometheus] labels are empty: set use_task_family_in_labels = true or list parameters "
            "in task_parameters_to_use_in_labels"
        )
    return labels


class _RpcTimings:
    """One method's RPC durations as bucket counts (the last one is +Inf) and their sum."""

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(RPC_BUCKETS) + 1)
        self.total = 0.0


class _SchedulerFigures:
    """A custom prometheus_client collector: RPC timings, and the scheduler's figures read at each scrape."""

    def __init__(self) -> None:
        self.vitals: SchedulerVitals | None = None
        self._rpc: dict[str, _RpcTimings] = {}

    def observe_rpc(self, method: str, seconds: float) -> None:
        timings = self._rpc.get(method)
        if timings is None:  # method names come from the registry, so the label set stays small
            timings = self._rpc[method] = _RpcTimings()
        timings.counts[bisect.bisect_left(RPC_BUCKETS, seconds)] += 1  # a bucket holds values <= its bound
        timings.total += seconds

    def describe(self) -> list[Any]:
        return []  # nothing to check at registration: the series exist only once a scheduler is watched

    def collect(self) -> Iterator[Any]:
        yield self._rpc_histogram()
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
        late = CounterMetricFamily(
            "luigid_schedule_late",
            "schedule runs that did not end well within their schedule's deadline, by schedule",
            labels=["schedule"],
        )
        for schedule, count in vitals.schedules_late().items():
            late.add_metric([schedule], count)
        yield late

    def _rpc_histogram(self) -> HistogramMetricFamily:
        family = HistogramMetricFamily(
            "luigid_rpc_duration_seconds", "time luigid took to serve each RPC, by method", labels=["method"]
        )
        for method, timings in sorted(self._rpc.items()):
            cumulative = list(itertools.accumulate(timings.counts))
            bounds = [floatToGoString(bound) for bound in RPC_BUCKETS] + ["+Inf"]
            family.add_metric([method], list(zip(bounds, cumulative, strict=True)), timings.total)
        return family
