"""Scheduler metrics: which collector ``[scheduler] metrics_collector`` names.

Placeholder holding only the ``MetricsCollectors`` choice, so that ``[scheduler]`` can declare its flag;
the collectors themselves come with the metrics work.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["MetricsCollectors"]


class MetricsCollectors(Enum):
    """The collectors ``[scheduler] metrics_collector`` may name (``none`` is another name of ``default``)."""

    custom = -1
    default = 1
    none = 1
    datadog = 2
    prometheus = 3
