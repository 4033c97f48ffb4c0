"""``luigi.server.MetricsHandler`` as users' tests build and call it (LUIGI_COMPAT g, j.4, j.7).

Luigi's handler is built by tornado with one keyword, ``scheduler``; its ``get()`` reads the collector from
``scheduler._state._metrics_collector`` at each scrape, lets it set the answer's headers with
``configure_http_handler(handler)`` and writes ``generate_latest()`` when that gives a page.
"""

from __future__ import annotations

from unittest import mock

import tornado.web
from helpers.luigid import probe_for, serving_in_thread

import luigi.server
from luigi.metrics import NoMetricsCollector
from luigi.scheduler import Scheduler


def _handler(scheduler):
    return luigi.server.MetricsHandler(tornado.web.Application(), mock.MagicMock(), scheduler=scheduler)


def test_the_handler_is_built_with_the_scheduler_alone():
    scheduler = mock.MagicMock()
    assert _handler(scheduler)._scheduler is scheduler


def test_get_lets_the_collector_set_the_headers_then_writes_its_page():
    scheduler = mock.MagicMock()
    collector = scheduler._state._metrics_collector
    collector.generate_latest.return_value = b"luigi_task_started_total 1.0\n"
    handler = _handler(scheduler)
    calls = mock.Mock()
    collector.configure_http_handler.side_effect = calls.configure_http_handler
    with mock.patch.object(handler, "write", calls.write):
        handler.get()
    assert calls.mock_calls == [
        mock.call.configure_http_handler(handler),
        mock.call.write(b"luigi_task_started_total 1.0\n"),
    ]


def test_a_collector_without_a_page_gets_nothing_written():
    scheduler = mock.MagicMock()
    scheduler._state._metrics_collector.generate_latest.return_value = None
    handler = _handler(scheduler)
    with mock.patch.object(handler, "write") as write:
        handler.get()
    write.assert_not_called()


class HeaderSettingCollector(NoMetricsCollector):
    """A user's collector: its own page, its own content type."""

    def generate_latest(self):
        return "jobs_waiting 3\n"

    def configure_http_handler(self, http_handler):
        http_handler.set_header("Content-Type", "text/plain; version=0.0.4")


def test_the_collector_swapped_into_the_state_answers_the_metrics_page():
    scheduler = Scheduler()
    with serving_in_thread(scheduler) as server:
        scheduler._state._metrics_collector = HeaderSettingCollector()  # read at each scrape
        reply = probe_for(server).request("GET", "/metrics")
    assert (reply.status, reply.body) == (200, b"jobs_waiting 3\n")
    assert reply.headers["Content-Type"] == "text/plain; version=0.0.4"
