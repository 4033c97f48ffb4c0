"""[otel] traces of a real ``luigi`` run: one trace per run, a span per task run, a task's own spans nested.

Each test runs ``python -m luigi`` as a user would, with ``[otel] endpoint`` pointing at a local OTLP/HTTP
receiver (``helpers.otlp_receiver``) that decodes what the worker sends.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from helpers.dask_cluster import TEST_DIR, DaskCluster
from helpers.otlp_receiver import ReceivedSpan, receiving_traces
from helpers.worker_process import start_worker, write_module

pytest_plugins = ["helpers.dask_cluster"]

RUN_TIMEOUT = 60.0
STATUS_OK, STATUS_ERROR = 1, 2

PIPELINE = """
    import os

    import luigi
    from luigi.parameter import ParameterVisibility
    from opentelemetry import trace


    class Leaf(luigi.Task):
        day = luigi.Parameter()
        password = luigi.Parameter(default="s3cret", visibility=ParameterVisibility.PRIVATE)
        note = luigi.Parameter(default="hush", visibility=ParameterVisibility.HIDDEN)
        flag = luigi.Parameter(default="loud", significant=False)

        def output(self):
            return luigi.LocalTarget(f"leaf-{self.day}.txt")

        def run(self):
            with trace.get_tracer("pipeline").start_as_current_span("inner work"):
                pass
            with self.output().open("w") as out:
                out.write(os.environ["TRACEPARENT"])


    class Broken(luigi.Task):
        def run(self):
            raise ValueError("no good")


    class Grows(luigi.Task):
        # runs twice: its first run yields a dependency it finds missing
        def output(self):
            return luigi.LocalTarget("grows.txt")

        def run(self):
            yield Leaf(day="d2")
            with self.output().open("w") as out:
                out.write("grown")


    class Top(luigi.WrapperTask):
        def requires(self):
            return [Leaf(day="d1"), Broken(), Grows()]
"""


def run_luigi(directory: Path, task: list[str], workers: int, config: str, module: str = "pipe") -> int:
    process = start_worker(directory, module, task, workers=workers, config=config)
    try:
        return process.wait(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise


def by_name(spans: list[ReceivedSpan], name: str) -> list[ReceivedSpan]:
    return [span for span in spans if span.name == name]


def leaf_spans(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
    return sorted(by_name(spans, "Leaf"), key=lambda span: span.attributes["luigi.task.param.day"])


@pytest.mark.parametrize("workers", [1, 2], ids=["in-process", "task-slots"])
def test_a_run_is_one_trace_with_a_span_per_task_run_and_the_tasks_own_spans_under_it(
    tmp_path: Path, workers: int
) -> None:
    write_module(tmp_path, "pipe", PIPELINE)
    with receiving_traces() as receiver:
        run_luigi(tmp_path, ["Top"], workers, f"[otel]\nendpoint = {receiver.endpoint}\n")
        spans = receiver.wait_for(
            lambda spans: (
                spans if by_name(spans, "luigi run") and len(by_name(spans, "inner work")) == 2 else None
            ),
            "the run's root span and both inner spans",
        )
    (root,) = by_name(spans, "luigi run")
    assert root.service == "luigi" and root.parent_span_id == ""
    task_spans = [span for span in spans if span.name in ("Leaf", "Broken", "Grows", "Top")]
    assert {span.trace_id for span in spans} == {root.trace_id}
    assert {span.parent_span_id for span in task_spans} == {root.span_id}

    first, second = leaf_spans(spans)
    assert first.attributes["luigi.task.family"] == "Leaf"
    assert first.attributes["luigi.task.id"].startswith("Leaf_d1_")
    assert first.attributes["luigi.worker.id"] == root.attributes["luigi.worker.id"]
    assert first.attributes["luigi.task.status"] == "DONE" and first.status_code == STATUS_OK
    assert first.attributes["luigi.task.attempt"] == 1
    # public parameters only: PRIVATE and HIDDEN values stay out, as they stay out of the task id
    params = {key: value for key, value in first.attributes.items() if key.startswith("luigi.task.param.")}
    assert params == {"luigi.task.param.day": "d1", "luigi.task.param.flag": "loud"}
    assert first.end_ns >= first.start_ns

    inner = {span.parent_span_id for span in by_name(spans, "inner work")}
    assert inner == {first.span_id, second.span_id}
    # the run's environment names its span, for whatever the task starts
    version, trace_id, parent_id, flags = (tmp_path / "leaf-d1.txt").read_text().split("-")
    assert (version, trace_id, parent_id) == ("00", root.trace_id, first.span_id)
    assert int(flags, 16) & 1  # sampled

    (broken,) = by_name(spans, "Broken")
    assert broken.attributes["luigi.task.status"] == "FAILED" and broken.status_code == STATUS_ERROR

    grows = sorted(by_name(spans, "Grows"), key=lambda span: span.attributes["luigi.task.attempt"])
    assert [
        (span.attributes["luigi.task.attempt"], span.attributes["luigi.task.status"]) for span in grows
    ] == [
        (1, "PENDING"),
        (2, "DONE"),
    ]


NO_OTEL_PROBE = """
    import sys

    import luigi


    class Probe(luigi.Task):
        def output(self):
            return luigi.LocalTarget("modules.txt")

        def run(self):
            loaded = sorted(name for name in sys.modules if name.split(".")[0] == "opentelemetry")
            with self.output().open("w") as out:
                out.write(repr(loaded))
"""


@pytest.mark.parametrize("workers", [1, 2], ids=["in-process", "task-slots"])
def test_a_run_without_an_otel_endpoint_never_imports_opentelemetry(tmp_path: Path, workers: int) -> None:
    write_module(tmp_path, "pipe", NO_OTEL_PROBE)
    assert run_luigi(tmp_path, ["Probe"], workers, "[otel]\nscheduler_spans = true\n") == 0
    assert (tmp_path / "modules.txt").read_text() == "[]"


def test_an_endpoint_without_the_library_warns_once_and_runs_untraced(tmp_path: Path) -> None:
    write_module(tmp_path, "pipe", NO_OTEL_PROBE)
    # a package of that name that cannot be imported stands for one that is not installed
    (tmp_path / "opentelemetry").mkdir()
    (tmp_path / "opentelemetry" / "__init__.py").write_text("raise ImportError('not installed here')\n")
    with receiving_traces() as receiver:
        assert run_luigi(tmp_path, ["Probe"], 1, f"[otel]\nendpoint = {receiver.endpoint}\n") == 0
        assert receiver.spans == []
    log = (tmp_path / "worker.log").read_text()
    assert log.count("pip install 'luigi[otel]'") == 1
    assert "[otel] endpoint is set but OpenTelemetry cannot be imported" in log
    assert "running untraced" in log


def test_an_endpoint_that_is_not_an_http_url_warns_once_and_runs_untraced(tmp_path: Path) -> None:
    write_module(tmp_path, "pipe", NO_OTEL_PROBE)
    assert run_luigi(tmp_path, ["Probe"], 1, "[otel]\nendpoint = collector:4318\n") == 0
    assert (tmp_path / "modules.txt").read_text() == "[]"
    log = (tmp_path / "worker.log").read_text()
    assert log.count("[otel] endpoint = 'collector:4318' is not an http(s) URL") == 1


def test_a_task_run_on_dask_has_its_span_in_the_run_and_gets_it_as_traceparent(
    dask_cluster: DaskCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TEST_DIR), os.environ.get("PYTHONPATH", "")]))
    with receiving_traces() as receiver:
        config = (
            f"[worker]\nexecutor = dask\n[dask]\nscheduler_address = {dask_cluster.address}\n"
            f"[otel]\nendpoint = {receiver.endpoint}\n"
        )
        task = ["RecordsItsTraceParent", "--root", str(tmp_path)]
        assert run_luigi(tmp_path, task, 1, config, module="helpers.dask_tasks") == 0
        spans = receiver.wait_for(
            lambda spans: spans if by_name(spans, "luigi run") else None, "the run's root span"
        )
    (root,) = by_name(spans, "luigi run")
    (run,) = by_name(spans, "RecordsItsTraceParent")
    assert run.parent_span_id == root.span_id and run.attributes["luigi.task.status"] == "DONE"
    record = json.loads((tmp_path / "traceparent.json").read_text())
    assert record["pid"] in dask_cluster.worker_pids()
    assert record["traceparent"].split("-")[1:3] == [root.trace_id, run.span_id]
