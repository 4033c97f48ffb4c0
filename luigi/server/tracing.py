"""``luigid``'s spans (``[otel] endpoint`` with ``[otel] scheduler_spans = true``): one per RPC served.

Off unless both are set; ``luigi.server.dispatch`` then pays one ``if`` per call. Each served call, on
``/api/<method>``, in ``/api/_batch`` or on an upgraded channel, becomes a span named ``luigid <method>``
with the method and the HTTP status the call answered.
"""

from __future__ import annotations

import time
from typing import Any

from luigi import otel

SERVICE_NAME = "luigid"


class RpcSpans:
    """Makes the span of each RPC ``luigid`` served, after the call (its start is taken from its length)."""

    def __init__(self, tracer: Any) -> None:
        self._tracer = tracer

    @classmethod
    def configured(cls) -> RpcSpans | None:
        """This ``luigid``'s spans when ``[otel] scheduler_spans`` and ``endpoint`` are set, else None."""
        if not otel.endpoint() or not otel.scheduler_spans():
            return None
        tracer = otel.tracer(SERVICE_NAME)
        return cls(tracer) if tracer is not None else None

    def record(self, method: str, seconds: float, status: int) -> None:
        """The span of one call of ``method`` that took ``seconds`` and answered ``status``."""
        from opentelemetry.trace import SpanKind, Status, StatusCode

        ended = time.time_ns()
        attributes = {"rpc.system": "luigi", "rpc.method": method, "http.response.status_code": status}
        span = self._tracer.start_span(
            f"luigid {method}",
            kind=SpanKind.SERVER,
            start_time=ended - int(seconds * 1e9),
            attributes=attributes,
        )
        if status >= 400:
            span.set_status(Status(StatusCode.ERROR, f"answered {status}"))
        span.end(end_time=ended)
