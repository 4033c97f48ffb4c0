"""luigid's [otel] spans, seen through a real ``luigid`` subprocess and a local OTLP/HTTP receiver."""

from __future__ import annotations

import subprocess
from pathlib import Path

from helpers.luigid import running_luigid
from helpers.otlp_receiver import ReceivedSpan, receiving_traces
from helpers.worker_process import start_worker, write_module

STATUS_ERROR = 2

PIPELINE = """
    import luigi


    class Hello(luigi.Task):
        def output(self):
            return luigi.LocalTarget("hello.txt")

        def run(self):
            with self.output().open("w") as out:
                out.write("hello")
"""


def run_worker_against(directory: Path, url: str, config: str) -> None:
    write_module(directory, "pipe", PIPELINE)
    process = start_worker(directory, "pipe", ["Hello"], scheduler_url=url, config=config)
    try:
        assert process.wait(timeout=60) == 0
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise


def luigid_spans(spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
    return [span for span in spans if span.service == "luigid"]


def test_luigid_makes_a_span_of_each_rpc_it_serves_with_its_method_and_status(tmp_path: Path) -> None:
    with receiving_traces() as receiver:
        config = f"[otel]\nendpoint = {receiver.endpoint}\nscheduler_spans = true\n"
        with running_luigid(tmp_path, config=config) as luigid:
            run_worker_against(tmp_path, luigid.url, "")
            assert luigid.probe().call("add_task", {"task_id": ["not", "a", "string"]}).status == 400
        # luigid sends what it has when it stops
        spans = receiver.wait_for(
            lambda spans: luigid_spans(spans) if len(luigid_spans(spans)) >= 3 else None, "luigid's spans"
        )
    methods = {span.attributes["rpc.method"] for span in spans}
    assert {"add_task", "get_work"} <= methods
    for span in spans:
        assert span.name == f"luigid {span.attributes['rpc.method']}"
        assert span.attributes["rpc.system"] == "luigi"
        assert span.end_ns >= span.start_ns
    refused = [span for span in spans if span.attributes["http.response.status_code"] == 400]
    assert [(span.attributes["rpc.method"], span.status_code) for span in refused] == [
        ("add_task", STATUS_ERROR)
    ]
    done = [span for span in spans if span.attributes["http.response.status_code"] == 200]
    assert len(done) == len(spans) - 1


def test_luigid_makes_no_spans_unless_scheduler_spans_is_set(tmp_path: Path) -> None:
    with receiving_traces() as receiver:
        config = f"[otel]\nendpoint = {receiver.endpoint}\n"
        with running_luigid(tmp_path, config=config) as luigid:
            run_worker_against(tmp_path, luigid.url, config)
        # the worker's run arrived (it sends at its end, before luigid stops): luigid sent nothing
        spans = receiver.wait_for(
            lambda spans: spans if any(span.name == "luigi run" for span in spans) else None,
            "the worker's trace",
        )
    assert (tmp_path / "hello.txt").read_text() == "hello"
    assert {span.service for span in spans} == {"luigi"}
    assert luigid_spans(receiver.spans) == []
