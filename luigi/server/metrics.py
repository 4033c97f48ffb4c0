"""``/metrics``: the page of the scheduler's metrics collector (``[scheduler] metrics_collector``).

The collector writes the page (Prometheus' text format for ``prometheus``) and sets its headers. With the
default collector nothing is collected, so ``/metrics`` answers 404 with one line naming the setting that
turns it on (a scraper pointed at it then fails visibly instead of scraping an empty page). The bearer
token, when luigid has one, is needed as for the API: the page names task families and parameters.
"""

from __future__ import annotations

from luigi.metrics import NoMetricsCollector
from luigi.server.handlers import GuardedHandler
from luigi.server.served import MetricsSource
from luigi.server.settings import ServerSettings

__all__ = ["MetricsHandler"]

NO_COLLECTOR = (
    "luigid collects no metrics: set [scheduler] metrics_collector = prometheus "
    "(or datadog, or custom with metrics_custom_import) in its configuration\n"
)


class MetricsHandler(GuardedHandler):
    """``GET /metrics``: ``generate_latest()`` of the collector, after its ``configure_http_handler``."""

    def initialize(  # type: ignore[override]
        self, scheduler: MetricsSource, server_settings: ServerSettings | None = None
    ) -> None:
        """``scheduler=`` alone, as Luigi's handler is built; without settings they come from the config."""
        super().initialize(server_settings if server_settings is not None else ServerSettings.from_config())
        self._scheduler = scheduler

    def get(self) -> None:
        collector = self._scheduler._state._metrics_collector  # looked up per scrape: tests may replace it
        if type(collector) is NoMetricsCollector:  # the default itself; a user's subclass has its own page
            self.set_status(404)
            self.set_header("Content-Type", "text/plain; charset=utf-8")
            self.write(NO_COLLECTOR)
            return
        metrics = collector.generate_latest()
        if metrics:
            collector.configure_http_handler(self)
            self.write(metrics)
