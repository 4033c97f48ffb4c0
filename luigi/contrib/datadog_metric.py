"""``[scheduler] metrics_collector = datadog``: task transitions sent to Datadog, as Luigi sends them.

Each transition is a counter (``<metric_namespace>.task.started``, ``.task.failed``, ``.task.disabled``,
``.task.done``) sent with ``datadog.statsd.increment`` to the DogStatsD agent at
``statsd_host:statsd_port``, and an event posted with ``datadog.api.Event.create`` to Datadog's web API
(``api_key``, ``app_key``); a DONE task also sends its run time with ``datadog.statsd.gauge`` as
``<metric_namespace>.task.execution_time``. The calls go through the ``datadog`` package's own objects,
looked up at each call, so a test's ``mock.patch('datadog.statsd.increment')`` sees them. Tags:
``task_name:<family>``, one ``<parameter>:<value>`` per task parameter, ``task_state:<STATE>`` on events,
then ``environment:<environment>`` and ``[datadog] default_tags``. Needs the ``datadog`` package
(``pip install 'luigi[datadog]'``).
"""

from __future__ import annotations

from typing import Any

from luigi import parameter
from luigi.contrib.optional import require
from luigi.metrics import MetricsCollector
from luigi.task import Config

datadog_client = require("datadog", "datadog", "luigi.contrib.datadog_metric")

__all__ = ["DataDogMetricsCollector", "DatadogMetricsCollector", "datadog"]


class datadog(Config):
    """``[datadog]``: where the agent and the web API are, and how the metrics are named and tagged."""

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
    api_host = parameter.OptionalParameter(
        default=None,
        description="Datadog's web API for events (default: $DATADOG_HOST, else https://api.datadoghq.com)",
    )


class DatadogMetricsCollector(MetricsCollector):
    """Sends a counter and an event for each task transition, and the run time of each finished task."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._config = datadog(**kwargs)
        datadog_client.initialize(
            api_key=self._config.api_key,
            app_key=self._config.app_key,
            statsd_host=self._config.statsd_host,
            statsd_port=self._config.statsd_port,
            api_host=self._config.api_host,
        )

    @property
    def default_tags(self) -> list[str]:
        """``environment:<environment>`` and ``[datadog] default_tags``, added to every metric and event."""
        tags = [f"environment:{self._config.environment}"]
        if self._config.default_tags:
            tags += self._config.default_tags.split(",")
        return tags

    def handle_task_started(self, task: Any) -> None:
        self._send_increment("task.started", tags=self._task_tags(task))
        self._send_task_event(task, "STARTED", "has been started", "A task has been started in", "info")

    def handle_task_failed(self, task: Any) -> None:
        self._send_increment("task.failed", tags=self._task_tags(task))
        self._send_task_event(task, "FAILED", "has failed", "A task has failed in", "error")

    def handle_task_disabled(self, task: Any, config: Any) -> None:
        self._send_increment("task.disabled", tags=self._task_tags(task))
        why = (
            f". The task has failed {config.retry_count} times in the last {config.disable_window} seconds, "
            f"so it is being disabled for {config.disable_persist} seconds."
        )
        self._send_task_event(
            task, "DISABLED", "has been disabled", "A task has been disabled in", "error", why
        )

    def handle_task_done(self, task: Any) -> None:
        if task.time_running is None:  # reported DONE without running here: Luigi sends nothing
            return
        tags = self._task_tags(task)
        self._send_increment("task.done", tags=tags)
        self._send_gauge("task.execution_time", task.updated - task.time_running, tags=tags)
        self._send_task_event(task, "DONE", "has been completed", "A task has completed in", "info")

    def _send_task_event(
        self, task: Any, state: str, title: str, text: str, alert_type: str, detail: str = ""
    ) -> None:
        self._send_event(
            title=f"Luigi: A task {title}!",
            text=f"{text} the pipeline named: {task.family}{detail}",
            tags=[*self._task_tags(task), f"task_state:{state}"],
            alert_type=alert_type,
            priority="low" if alert_type == "info" else "normal",
        )

    def _task_tags(self, task: Any) -> list[str]:
        return [f"task_name:{task.family}", *self._format_task_params_to_tags(task)]

    @staticmethod
    def _format_task_params_to_tags(task: Any) -> list[str]:
        """One ``<parameter>:<value>`` tag per task parameter (Luigi's name for it)."""
        return [f"{name}:{value}" for name, value in (task.params or {}).items()]

    def _send_increment(self, metric: str, value: int = 1, tags: list[str] | None = None) -> None:
        name = f"{self._config.metric_namespace}.{metric}"
        datadog_client.statsd.increment(name, value, tags=[*(tags or []), *self.default_tags])

    def _send_gauge(self, metric: str, value: float, tags: list[str] | None = None) -> None:
        name = f"{self._config.metric_namespace}.{metric}"
        datadog_client.statsd.gauge(name, value, tags=[*(tags or []), *self.default_tags])

    def _send_event(self, **params: Any) -> None:
        params["tags"] = [*params["tags"], *self.default_tags]
        datadog_client.api.Event.create(**params)


DataDogMetricsCollector = DatadogMetricsCollector  # this project's earlier spelling, kept for its users
