"""The datadog collector under Luigi's class name, as `[scheduler] metrics_collector = datadog` builds it.

What the collector sends is tested against a real UDP agent in test/compat/test_metrics.py.
"""

from __future__ import annotations

import pytest

pytest.importorskip("datadog")

from luigi import configuration  # noqa: E402
from luigi.contrib import datadog_metric  # noqa: E402
from luigi.contrib.datadog_metric import DatadogMetricsCollector  # noqa: E402
from luigi.metrics import MetricsCollectors  # noqa: E402
from luigi.scheduler import Scheduler  # noqa: E402


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
