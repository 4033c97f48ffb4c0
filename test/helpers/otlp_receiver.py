"""A local OTLP/HTTP trace receiver: ``POST /v1/traces`` decoded with ``opentelemetry-proto``, spans kept.

``receiving_traces()`` serves it on a free loopback port (``helpers.json_http.serving``) and yields the
``OtlpReceiver`` whose ``endpoint`` goes into ``[otel] endpoint``; ``spans`` is what has arrived so far.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any

from helpers.json_http import serving
from helpers.luigid import wait_until

TRACES_PATH = "/v1/traces"


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as the receiver decoded it (ids in hex, attribute values as plain Python values)."""

    service: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str  # "" for a root span
    attributes: dict[str, Any]
    status_code: int  # 0 unset, 1 ok, 2 error (OTLP's StatusCode)
    start_ns: int
    end_ns: int


class OtlpReceiver:
    """The spans received, in arrival order; safe to read while requests come in."""

    def __init__(self) -> None:
        self.endpoint = ""
        self._lock = threading.Lock()
        self._spans: list[ReceivedSpan] = []

    @property
    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self._spans)

    def add_request(self, body: bytes) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        decoded = [
            _decoded(span, _service_of(resource_spans.resource))
            for resource_spans in request.resource_spans
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
        ]
        with self._lock:
            self._spans.extend(decoded)

    def wait_for(self, matches: Callable[[list[ReceivedSpan]], Any], what: str, timeout: float = 30.0) -> Any:
        """Wait (with a deadline) until ``matches(spans)`` is truthy; returns it."""
        return wait_until(lambda: matches(self.spans), timeout=timeout, what=what)


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


def _service_of(resource: Any) -> str:
    for attribute in resource.attributes:
        if attribute.key == "service.name":
            return str(_value(attribute.value))
    return ""


def _decoded(span: Any, service: str) -> ReceivedSpan:
    return ReceivedSpan(
        service=service,
        name=span.name,
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_span_id=span.parent_span_id.hex(),
        attributes={attribute.key: _value(attribute.value) for attribute in span.attributes},
        status_code=int(span.status.code),
        start_ns=int(span.start_time_unix_nano),
        end_ns=int(span.end_time_unix_nano),
    )


def _handler_for(receiver: OtlpReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802  # http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != TRACES_PATH:
                self.send_response(404)
                self.end_headers()
                return
            receiver.add_request(body)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  # keep test output quiet
            pass

    return Handler


@contextmanager
def receiving_traces() -> Iterator[OtlpReceiver]:
    """A receiver serving on a free port for the test's length."""
    receiver = OtlpReceiver()
    with serving(_handler_for(receiver), "otlp-receiver") as url:
        receiver.endpoint = url
        yield receiver
