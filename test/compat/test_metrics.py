"""Scheduler metrics (LUIGI_COMPAT j.2, j.4, j.7): ``luigi.metrics``, the collector the scheduler calls,
``luigid``'s ``/metrics`` with the Prometheus collector, and the Datadog collector's packets.

Pipelines run in real workers; ``/metrics`` is fetched from a real ``luigid`` subprocess (and from the
server in a thread where a test swaps the collector), and parsed with ``prometheus_client``'s own parser;
the Datadog collector sends to a real UDP socket standing in for the DogStatsD agent and posts events
to a real local HTTP server standing in for Datadog's web API.
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import prometheus_client
import pytest
from helpers.luigid import LUIGID, luigid_env, probe_for, running_luigid, serving_in_thread, wait_until
from helpers.scheduler import HeldSchedulerFactory as Factory
from prometheus_client.parser import text_string_to_metric_families

import luigi
import luigi.server
from luigi import configuration
from luigi.contrib.datadog_metric import DataDogMetricsCollector
from luigi.contrib.prometheus_metric import PrometheusMetricsCollector
from luigi.metrics import MetricsCollector, MetricsCollectors, NoMetricsCollector
from luigi.scheduler import Scheduler
from luigi.server import MetricsHandler, ServerSettings

LUIGI = Path(sys.executable).parent / "luigi"


def _set(section: str, option: str, value: str) -> None:
    configuration.get_config().set(section, option, value)


# -- luigi.metrics (j.7) -------------------------------------------------------------------------------------


def test_the_collectors_enum_has_luigis_values_with_none_an_alias_of_default():
    values = {member.name: member.value for member in MetricsCollectors}
    assert values == {"custom": -1, "default": 1, "datadog": 2, "prometheus": 3}
    assert MetricsCollectors.none is MetricsCollectors.default
    assert MetricsCollectors["none"] is MetricsCollectors.default


def test_get_builds_each_kind_of_collector():
    assert isinstance(MetricsCollectors.get(MetricsCollectors.default), NoMetricsCollector)
    assert isinstance(MetricsCollectors.get(MetricsCollectors.none), NoMetricsCollector)
    assert isinstance(MetricsCollectors.get(MetricsCollectors.prometheus), PrometheusMetricsCollector)
    assert isinstance(MetricsCollectors.get(MetricsCollectors.datadog), DataDogMetricsCollector)


def test_custom_needs_an_import_path_of_a_metrics_collector_subclass():
    with pytest.raises(ValueError) as missing:
        MetricsCollectors.get(MetricsCollectors.custom)
    assert (
        str(missing.value)
        == "MetricsCollectors value ' MetricsCollectors.custom ' is -1 and custom_import is None"
    )
    with pytest.raises(ValueError) as foreign:
        MetricsCollectors.get(MetricsCollectors.custom, "collections.OrderedDict")
    assert (
        str(foreign.value) == "Custom Import: collections.OrderedDict is not a subclass of MetricsCollector"
    )
    with pytest.raises(ValueError, match="cannot import 'no_such_package_here'"):
        MetricsCollectors.get(MetricsCollectors.custom, "no_such_package_here.Collector")


def test_the_abstract_collector_requires_the_four_transition_hooks_and_defaults_the_rest():
    assert MetricsCollector.__abstractmethods__ == {
        "__init__",
        "handle_task_started",
        "handle_task_failed",
        "handle_task_disabled",
        "handle_task_done",
    }
    collector = NoMetricsCollector()
    assert collector.generate_latest() is None
    assert collector.handle_task_statistics(object(), {}) is None
    assert collector.configure_http_handler(object()) is None


# -- the scheduler calls the collector (j.2) -----------------------------------------------------------------

COLLECTOR_MODULE = '''
from luigi.metrics import MetricsCollector

HEARD = []


class Recording(MetricsCollector):
    """Writes down what the scheduler tells it, as the scheduler's records are at that moment."""

    def __init__(self):
        HEARD.clear()

    def handle_task_started(self, task):
        HEARD.append(("started", task.id, task.status))

    def handle_task_failed(self, task):
        HEARD.append(("failed", task.id, task.status))

    def handle_task_disabled(self, task, config):
        HEARD.append(("disabled", task.id, config.retry_count))

    def handle_task_done(self, task):
        HEARD.append(("done", task.id, task.status))

    def handle_task_statistics(self, task, statistics):
        HEARD.append(("statistics", task.id, statistics))


class Stats:
    """A [worker] task_process_context that reports statistics, as Luigi's docs show."""

    def __init__(self, task_process):
        self.task_process = task_process

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.task_process.status_reporter.report_task_statistics({"rows": 42})
        return False
'''


@pytest.fixture
def recording(tmp_path, monkeypatch) -> Any:
    """``[scheduler] metrics_collector = custom`` naming a collector module written for the test."""
    (tmp_path / "recording_metrics.py").write_text(COLLECTOR_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    _set("scheduler", "metrics_collector", "custom")
    _set("scheduler", "metrics_custom_import", "recording_metrics.Recording")
    import recording_metrics

    yield recording_metrics
    sys.modules.pop("recording_metrics", None)


RAN: set[int] = set()


@pytest.fixture(autouse=True)
def _nothing_ran_yet() -> None:
    RAN.clear()


class Works(luigi.Task):
    n = luigi.IntParameter()

    def run(self) -> None:
        RAN.add(self.n)

    def complete(self) -> bool:
        return self.n in RAN


class Fails(luigi.Task):
    def run(self) -> None:
        raise ValueError("no")

    def complete(self) -> bool:
        return False


def test_the_configured_custom_collector_hears_each_start_done_failure_and_disable(recording):
    scheduler = Scheduler(retry_count=1)
    assert isinstance(scheduler._state._metrics_collector, recording.Recording)
    luigi.build([Works(n=1), Fails()], worker_scheduler_factory=Factory(scheduler), local_scheduler=True)
    works, fails = Works(n=1).task_id, Fails().task_id
    heard = recording.HEARD
    assert ("started", works, "RUNNING") in heard and ("done", works, "DONE") in heard
    assert ("started", fails, "RUNNING") in heard and ("disabled", fails, 1) in heard
    assert heard.index(("started", works, "RUNNING")) < heard.index(("done", works, "DONE"))


def test_a_failure_below_the_retry_count_is_heard_as_failed(recording):
    scheduler = Scheduler()
    luigi.build([Fails()], worker_scheduler_factory=Factory(scheduler), local_scheduler=True)
    assert ("failed", Fails().task_id, "FAILED") in recording.HEARD


def test_statistics_a_task_process_context_reports_reach_the_collector(recording):
    _set("worker", "task_process_context", "recording_metrics.Stats")
    scheduler = Scheduler()
    luigi.build([Works(n=2)], worker_scheduler_factory=Factory(scheduler), local_scheduler=True)
    assert ("statistics", Works(n=2).task_id, {"rows": 42}) in recording.HEARD


def test_statistics_of_an_unknown_task_are_ignored(recording):
    scheduler = Scheduler()
    scheduler.report_task_statistics("Nobody()", {"rows": 1})
    assert recording.HEARD == []


def test_code_passes_the_member_and_flags_name_it(recording):
    assert isinstance(
        Scheduler(metrics_collector=MetricsCollectors.none)._state._metrics_collector, NoMetricsCollector
    )
    assert Scheduler(metrics_collector="prometheus").config.metrics_collector is MetricsCollectors.prometheus
    with pytest.raises(ValueError, match="'prom' is not a metrics collector"):
        Scheduler(metrics_collector="prom")


def test_a_bad_collector_name_in_the_config_is_one_clear_error():
    _set("scheduler", "metrics_collector", "graphite")
    with pytest.raises(ValueError) as error:
        Scheduler()
    assert str(error.value) == (
        "[scheduler] metrics_collector = 'graphite' is not a metrics collector "
        "(one of: custom, default, none, datadog, prometheus)"
    )


def test_a_collector_that_raises_does_not_stop_scheduling(recording, monkeypatch):
    def broken(task: Any) -> None:
        raise RuntimeError("collector bug")

    scheduler = Scheduler()
    monkeypatch.setattr(scheduler._state._metrics_collector, "handle_task_done", broken)
    assert luigi.build([Works(n=3)], worker_scheduler_factory=Factory(scheduler), local_scheduler=True)
    assert scheduler.task_list("DONE", "")[Works(n=3).task_id]["status"] == "DONE"


# -- Prometheus (j.4, issue 17 section 3) -------------------------------------------------------------------


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a Prometheus text page, keyed by name and sorted labels."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_prometheus_labels_follow_the_prometheus_section():
    _set("prometheus", "task_parameters_to_use_in_labels", '["n"]')
    scheduler = Scheduler(metrics_collector=MetricsCollectors.prometheus)
    luigi.build([Works(n=7)], worker_scheduler_factory=Factory(scheduler), local_scheduler=True)
    page = scheduler._state._metrics_collector.generate_latest().decode()
    samples = _samples(page)
    assert samples[("luigi_task_done_total", (("family", "Works"), ("n", "7")))] == 1
    assert samples[("luigi_task_execution_time_seconds", (("family", "Works"), ("n", "7")))] >= 0


def test_prometheus_without_any_label_is_refused_with_the_fix():
    _set("prometheus", "use_task_family_in_labels", "false")
    with pytest.raises(ValueError, match=r"\[prometheus\] labels are empty: set use_task_family_in_labels"):
        PrometheusMetricsCollector()


PIPELINE = """
import os

import luigi

ROOT = os.environ["PIPELINE_DIR"]


class Step(luigi.Task):
    i = luigi.IntParameter()

    def output(self):
        return luigi.LocalTarget(os.path.join(ROOT, f"step-{self.i}"))

    def run(self):
        with self.output().open("w") as out:
            out.write("done")


class Broken(luigi.Task):
    def run(self):
        raise ValueError("broken")


class All(luigi.WrapperTask):
    def requires(self):
        return [Step(i=i) for i in range(3)] + [Broken()]
"""


def _run_pipeline(tmp_path: Path, url: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    env = {k: v for k, v in os.environ.items() if k not in ("LUIGI_CONFIG_PATH", "LUIGI_CONFIG_PARSER")}
    env["PIPELINE_DIR"] = str(tmp_path)
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [str(LUIGI), "--module", "pipeline", "All", "--scheduler-url", url, "--no-lock"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_luigid_metrics_page_counts_the_runs_tasks_by_family(tmp_path):
    config = "[scheduler]\nmetrics_collector = prometheus\n"
    with running_luigid(tmp_path, config=config) as luigid:
        run = _run_pipeline(tmp_path, luigid.url)
        assert "ValueError: broken" in run.stderr, run.stderr
        reply = luigid.probe().request("GET", "/metrics")
    assert reply.status == 200
    assert reply.headers["Content-Type"] == prometheus_client.CONTENT_TYPE_LATEST
    samples = _samples(reply.body.decode())
    assert samples[("luigi_task_started_total", (("family", "Step"),))] == 3
    assert samples[("luigi_task_done_total", (("family", "Step"),))] == 3
    assert samples[("luigi_task_started_total", (("family", "Broken"),))] == 1
    assert samples[("luigi_task_failed_total", (("family", "Broken"),))] == 1
    assert samples.get(("luigi_task_done_total", (("family", "All"),)), 0) == 0  # its dependency failed
    assert samples[("luigid_tasks", (("status", "DONE"),))] == 3
    assert samples[("luigid_tasks", (("status", "FAILED"),))] == 1
    assert samples[("luigid_tasks", (("status", "PENDING"),))] == 1
    assert samples[("luigid_rpc_duration_seconds_count", (("method", "get_work"),))] >= 4
    assert samples[("luigid_rpc_duration_seconds_count", (("method", "add_task"),))] >= 5
    assert samples[("luigid_workers_alive", ())] == 1
    assert samples[("luigid_task_history_events_waiting", ())] == 0


def test_without_a_collector_the_metrics_page_is_not_found_and_names_the_setting(tmp_path):
    with running_luigid(tmp_path) as luigid:
        reply = luigid.probe().request("GET", "/metrics")
    assert reply.status == 404
    assert reply.headers["Content-Type"] == "text/plain; charset=utf-8"
    lines = reply.body.decode().splitlines()
    assert len(lines) == 1
    assert "[scheduler] metrics_collector = prometheus" in lines[0]
    assert "datadog" in lines[0] and "custom" in lines[0]


def test_a_users_collector_without_a_page_still_answers_an_empty_page():
    scheduler = Scheduler()
    scheduler._state._metrics_collector = mock.MagicMock()  # a collector written for Luigi
    scheduler._state._metrics_collector.generate_latest.return_value = None
    with serving_in_thread(scheduler) as server:
        reply = probe_for(server).request("GET", "/metrics")
    assert (reply.status, reply.body) == (200, b"")


class PageCollector(NoMetricsCollector):
    """A collector with a page of its own, as a user's would be."""

    def generate_latest(self) -> str:
        return "my_metric 1\n"

    def configure_http_handler(self, http_handler: Any) -> None:
        http_handler.set_header("Content-Type", "text/plain; charset=utf-8")
        http_handler.set_header("X-Collector", "mine")


def test_metrics_handler_serves_whatever_collector_the_state_holds_and_needs_the_token():
    scheduler = Scheduler()
    scheduler._state._metrics_collector = PageCollector()  # how users' tests swap it
    assert "MetricsHandler" in luigi.server.__all__ and luigi.server.MetricsHandler is MetricsHandler
    with serving_in_thread(scheduler, ServerSettings(auth_token="s3cret")) as server:
        refused = probe_for(server).request("GET", "/metrics")
        reply = probe_for(server, token="s3cret").request("GET", "/metrics")
    assert refused.status == 401
    assert (reply.status, reply.body, reply.headers["X-Collector"]) == (200, b"my_metric 1\n", "mine")


# -- Datadog -------------------------------------------------------------------------------------------------


@pytest.fixture
def statsd_agent() -> Iterator[socket.socket]:
    """A UDP socket on localhost standing in for the DogStatsD agent; ``[datadog]`` points at it."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as agent:
        agent.bind(("127.0.0.1", 0))
        agent.settimeout(0.05)
        _set("datadog", "statsd_host", "127.0.0.1")
        _set("datadog", "statsd_port", str(agent.getsockname()[1]))
        yield agent


def _packets(agent: socket.socket, enough: Callable[[list[str]], bool]) -> list[str]:
    """Every packet received until ``enough(packets)`` holds (with a deadline)."""
    received: list[str] = []

    def arrived() -> bool:
        try:
            received.extend(agent.recv(65535).decode().splitlines())
        except TimeoutError:
            pass
        return enough(received)

    wait_until(arrived, timeout=10, what="the expected datadog packets")
    return received


def _has(prefix: str, count: int = 1) -> Callable[[list[str]], bool]:
    return lambda packets: sum(p.startswith(prefix) for p in packets) >= count


@pytest.fixture
def events_api() -> Iterator[list[dict[str, Any]]]:
    """A local HTTP server standing in for Datadog's web API; ``[datadog] api_host`` points at it."""
    posted: list[dict[str, Any]] = []

    class EventsHandler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers["Content-Length"]))
            posted.append({"path": self.path.split("?")[0], **json.loads(body)})
            reply = b'{"status": "ok"}'
            self.send_response(202)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), EventsHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _set("datadog", "api_host", f"http://127.0.0.1:{server.server_address[1]}")
    try:
        yield posted
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_datadog_counters_reach_the_agent_and_events_the_web_api(statsd_agent, events_api):
    _set("datadog", "metric_namespace", "pipes")
    _set("datadog", "environment", "staging")
    _set("datadog", "default_tags", "application:luigi,team:data")
    scheduler = Scheduler(metrics_collector=MetricsCollectors.datadog, retry_count=1)
    luigi.build([Works(n=5), Fails()], worker_scheduler_factory=Factory(scheduler), local_scheduler=True)
    packets = _packets(
        statsd_agent, lambda p: _has("pipes.task.execution")(p) and _has("pipes.task.disabled")(p)
    )
    common = "environment:staging,application:luigi,team:data"
    assert f"pipes.task.started:1|c|#task_name:Works,n:5,{common}" in packets
    assert f"pipes.task.done:1|c|#task_name:Works,n:5,{common}" in packets
    assert f"pipes.task.disabled:1|c|#task_name:Fails,{common}" in packets
    (timing,) = [p for p in packets if p.startswith("pipes.task.execution_time:")]
    assert timing.endswith(f"|g|#task_name:Works,n:5,{common}")
    wait_until(lambda: len(events_api) >= 4, timeout=10, what="four events at the web API")
    disabled = next(e for e in events_api if "task_state:DISABLED" in e["tags"])
    assert disabled["path"] == "/api/v1/events"
    assert disabled["title"] == "Luigi: A task has been disabled!"
    assert disabled["alert_type"] == "error"
    assert disabled["text"].startswith("A task has been disabled in the pipeline named: Fails. The task has")
    assert disabled["tags"] == ["task_name:Fails", "task_state:DISABLED", *common.split(",")]


@pytest.mark.slow
def test_datadog_through_luigid(tmp_path, statsd_agent, events_api):
    port = statsd_agent.getsockname()[1]
    api_host = configuration.get_config().get("datadog", "api_host")
    config = textwrap.dedent(
        f"""
        [scheduler]
        metrics_collector = datadog
        [datadog]
        statsd_host = 127.0.0.1
        statsd_port = {port}
        api_host = {api_host}
        """
    )
    with running_luigid(tmp_path, config=config) as luigid:
        _run_pipeline(tmp_path, luigid.url)
        step_done = "luigi.task.done:1|c|#task_name:Step,"
        packets = _packets(statsd_agent, lambda p: _has(step_done, 3)(p) and _has("luigi.task.failed")(p))
    assert len([p for p in packets if p.startswith(step_done)]) == 3
    assert any(p.startswith("luigi.task.failed:1|c|#task_name:Broken,") for p in packets)
    wait_until(lambda: any("task_state:FAILED" in e["tags"] for e in events_api), what="the failure event")


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            "metrics_collector = graphite",
            "[scheduler] metrics_collector = 'graphite' is not a metrics collector",
        ),
        ("metrics_collector = custom", "MetricsCollectors value ' MetricsCollectors.custom ' is -1"),
        (
            "metrics_collector = custom\nmetrics_custom_import = nowhere_at_all.Collector",
            "[scheduler] metrics_custom_import 'nowhere_at_all.Collector': cannot import 'nowhere_at_all'",
        ),
    ],
)
def test_luigid_refuses_a_bad_collector_in_one_line(tmp_path, config, message):
    luigid = subprocess.run(
        [str(LUIGID), "--port", "0", "--state-path", str(tmp_path / "state.db")],
        env=luigid_env(tmp_path, f"[scheduler]\n{config}\n"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert luigid.returncode == 1
    assert f"luigid: {message}" in luigid.stderr
    assert "Traceback" not in luigid.stderr
