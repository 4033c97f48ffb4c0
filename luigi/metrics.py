"""Scheduler metrics: which collector ``[scheduler] metrics_collector`` names, and what a collector hears.

The scheduler tells its collector when a task is handed out, fails, is disabled or is done, and passes on
the statistics a running task reports. ``generate_latest()`` and ``configure_http_handler()`` serve the
collector's own page at ``luigid``'s ``/metrics``. The default collector does nothing.
"""

from __future__ import annotations

import abc
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from luigi.scheduler.views.vitals import SchedulerVitals

__all__ = [
    "CollectorExtras",
    "MetricsCollector",
    "MetricsCollectors",
    "MetricsSetupError",
    "NoMetricsCollector",
]


class MetricsSetupError(ValueError):
    """``[scheduler] metrics_collector`` (or ``metrics_custom_import``) names no collector to build."""


class MetricsCollectors(Enum):
    """The collectors ``[scheduler] metrics_collector`` may name (``none`` is an alias of ``default``)."""

    custom = -1
    default = 1
    none = 1
    datadog = 2
    prometheus = 3

    @classmethod
    def get(cls, which: MetricsCollectors | str, custom_import: str | None = None) -> MetricsCollector:
        """A new collector of kind ``which``; ``custom`` builds the class ``custom_import`` names."""
        member = cls[which] if isinstance(which, str) else which
        if member is cls.default:
            return NoMetricsCollector()
        try:
            if member is cls.datadog:
                from luigi.contrib.datadog_metric import DatadogMetricsCollector

                return DatadogMetricsCollector()
            if member is cls.prometheus:
                from luigi.contrib.prometheus_metric import PrometheusMetricsCollector

                return PrometheusMetricsCollector()
        except ImportError as exc:  # the collector's library is an optional extra: say which
            raise MetricsSetupError(f"[scheduler] metrics_collector = {member.name}: {exc}") from exc
        if member is cls.custom:
            return _custom_collector(custom_import)
        raise MetricsSetupError(f"MetricsCollectors value ' {member} ' isn't supported")


def _custom_collector(custom_import: str | None) -> MetricsCollector:
    """An instance of the collector class named by ``[scheduler] metrics_custom_import``."""
    if custom_import is None:
        raise MetricsSetupError(
            f"MetricsCollectors value ' {MetricsCollectors.custom} ' is -1 and custom_import is None"
        )
    collector_class = _import_class(custom_import)
    if not (isinstance(collector_class, type) and issubclass(collector_class, MetricsCollector)):
        raise MetricsSetupError(f"Custom Import: {custom_import} is not a subclass of MetricsCollector")
    return collector_class()


def _import_class(dotted: str) -> Any:
    module_name, _, class_name = dotted.rpartition(".")
    if not module_name:
        raise MetricsSetupError(
            f"[scheduler] metrics_custom_import {dotted!r} must be a dotted path: package.Class"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise MetricsSetupError(
            f"[scheduler] metrics_custom_import {dotted!r}: cannot import {module_name!r}: {exc}"
        ) from exc
    try:
        return getattr(module, class_name)
    except AttributeError:
        raise MetricsSetupError(
            f"[scheduler] metrics_custom_import {dotted!r}: module {module_name!r} has no {class_name!r}"
        ) from None


class MetricsCollector(abc.ABC):
    """What the scheduler calls as its tasks move; ``task`` is the scheduler's record of the task.

    The last two methods below are ours (no-ops here, and optional: ``CollectorExtras`` finds them):
    ``observe_rpc`` hears how long each RPC served by ``luigid`` took, and ``watch_scheduler`` receives the
    read-only figures (tasks per status, workers, history backlog) a collector may report.
    """

    @abc.abstractmethod
    def __init__(self) -> None:
        pass

    @abc.abstractmethod
    def handle_task_started(self, task: Any) -> None:
        """The scheduler handed the task to a worker."""

    @abc.abstractmethod
    def handle_task_failed(self, task: Any) -> None:
        """The task became FAILED."""

    @abc.abstractmethod
    def handle_task_disabled(self, task: Any, config: Any) -> None:
        """The task became DISABLED (``config`` holds the retry settings)."""

    @abc.abstractmethod
    def handle_task_done(self, task: Any) -> None:
        """The task became DONE."""

    def handle_task_statistics(self, task: Any, statistics: Any) -> None:  # noqa: B027 - optional, a no-op by default
        """A running task reported statistics (``status_reporter.report_task_statistics``)."""

    def generate_latest(self) -> Any:
        """The text ``/metrics`` answers with, or None for no page."""
        return None

    def configure_http_handler(self, http_handler: Any) -> None:  # noqa: B027 - optional, a no-op by default
        """Set headers (such as the content type) on the ``/metrics`` answer."""

    def observe_rpc(self, method: str, seconds: float) -> None:  # noqa: B027 - optional, a no-op by default
        """``luigid`` served the RPC ``method`` in ``seconds``."""

    def watch_scheduler(self, vitals: SchedulerVitals) -> None:  # noqa: B027 - optional, a no-op by default
        """The scheduler's read-only figures, to be read when the collector reports."""


@dataclass(frozen=True)
class CollectorExtras:
    """Our hooks beyond Luigi's collector methods, found once on a collector: None where it has none of
    its own, so a collector written for Luigi (a subclass with only its methods, a ``MagicMock``, an
    object of any class) works, and one that inherits our no-ops costs nothing per call."""

    observe_rpc: Callable[[str, float], None] | None
    watch_scheduler: Callable[[SchedulerVitals], None] | None

    @classmethod
    def of(cls, collector: Any) -> CollectorExtras:
        """The optional hooks ``collector`` implements."""
        return cls(_own_hook(collector, "observe_rpc"), _own_hook(collector, "watch_scheduler"))


def _own_hook(collector: Any, name: str) -> Any:
    # The one place optional hooks are looked up: a collector need not subclass MetricsCollector.
    hook = getattr(collector, name, None)
    if not callable(hook) or getattr(hook, "__func__", None) is getattr(MetricsCollector, name):
        return None
    return hook


class NoMetricsCollector(MetricsCollector):
    """The default: hears everything and reports nothing."""

    def __init__(self) -> None:
        pass

    def handle_task_started(self, task: Any) -> None:
        pass

    def handle_task_failed(self, task: Any) -> None:
        pass

    def handle_task_disabled(self, task: Any, config: Any) -> None:
        pass

    def handle_task_done(self, task: Any) -> None:
        pass
