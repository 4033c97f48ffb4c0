"""``[scheduler] metrics_collector = datadog``: task transitions sent to a DogStatsD agent over UDP.

Each transition is a counter (``<metric_namespace>.task.started``, ``.task.failed``, ``.task.disabled``,
``.task.done``) and an event; a DONE task also sends its run time as the gauge
``<metric_namespace>.task.execution_time``. Every packet is tagged with ``[datadog] default_tags``,
``environment:<environment>``, ``task_name:<family>`` and one ``<parameter>:<value>`` tag per task
parameter. The agent at ``statsd_host:statsd_port`` forwards all of it to Datadog with its own key, so
the scheduler needs no access to Datadog's web API. Needs the ``datadog`` package
(``pip install 'luigi[datadog]'``).
"""

from __future__ import annotations

from typing import Any

from luigi import parameter
from luigi.contrib.optional import require
from luigi.metrics import MetricsCollector
from luigi.task import Config

require("datadog", "datadog", "luigi.contrib.datadog_metric")
from datadog.dogstatsd import DogStatsd  # noqa: E402

__all__ = ["DataDogMetricsCollector", "DatadogMetricsCollector", "datadog"]


class datadog(Config):
    """``[datadog]``: where the DogStatsD agent listens and how the metrics are named and tagged."""

    api_key = parameter.Parameter(default="dummy_api_key", description="API key provided by Datadog")
    app_key = parameter.Parameter(default="dummy_app_key", description="APP key provided by Datadog")
    default_tags = parameter.Parameter(
        default="application:luigi", description="Comma-separated tags added to every metric and event"
    )
    environment = parameter.Parameter(default="development", description="Environment of the pipeline")
    metric_namespace = parameter.Parameter(
        default="luigi", description="Prefix of every metric name (followed by a dot)"
    )
    statsd_host = parameter.Parameter(default="localhost", description="Host of the DogStatsD agent")
    statsd_port = parameter.IntParameter(default=8125, description="UDP port of the DogStatsD agent")


class DatadogMetricsCollector(MetricsCollector):
    """Sends a counter and an event for each task transition to the DogStatsD agent."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._config = datadog(**kwargs)
        constant_tags = [tag.strip() for tag in self._config.default_tags.split(",") if tag.strip()]
        constant_tags.append(f"environment:{self._config.environment}")
        self._statsd = DogStatsd(
            host=self._config.statsd_host,
            port=self._config.statsd_port,
            namespace=self._config.metric_namespace or None,
            constant_tags=constant_tags,
            disable_telemetry=True,  # only the pipeline's own metrics: no client self-reports
        )

    def handle_task_started(self, task: Any) -> None:
        self._report(task, "started", "has been started", "info")

    def handle_task_failed(self, task: Any) -> None:
        self._report(task, "failed", "has failed", "error")

    def handle_task_disabled(self, task: Any, config: Any) -> None:
        policy = getattr(task, "retry_policy", None)
        detail = (
            f"has been disabled after failing {policy.retry_count} times in {policy.disable_window} seconds"
            if policy is not None
            else "has been disabled"
        )
        self._report(task, "disabled", detail, "error")

    def handle_task_done(self, task: Any) -> None:
        self._report(task, "done", "has finished", "info")
        if task.time_running is not None:  # reported DONE without running here: no run time to send
            self._statsd.gauge("task.execution_time", task.updated - task.time_running, tags=self._tags(task))

    def _report(self, task: Any, state: str, what: str, alert_type: str) -> None:
        tags = self._tags(task)
        self._statsd.increment(f"task.{state}", tags=tags)
        self._statsd.event(
            f"Luigi: a task {what}",
            f"{task.family} {what}: {task.id}",
            alert_type=alert_type,
            priority="low" if alert_type == "info" else "normal",
            tags=[*tags, f"task_state:{state.upper()}"],
        )

    @staticmethod
    def _tags(task: Any) -> list[str]:
        return [
            f"task_name:{task.family}",
            *(f"{name}:{value}" for name, value in (task.params or {}).items()),
        ]


DataDogMetricsCollector = DatadogMetricsCollector  # this project's earlier spelling, kept for its users
