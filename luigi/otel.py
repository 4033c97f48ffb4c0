"""OpenTelemetry traces (``[otel] endpoint``): the tracer, the W3C trace context, and a task run inside it.

Off by default. Nothing here imports ``opentelemetry`` until ``[otel] endpoint`` is set and a worker or
``luigid`` starts tracing, so a run without the setting never loads it. With the setting and without the
library (``pip install 'luigi[otel]'``), one warning is logged and everything runs untraced: an
observability setting must not stop a pipeline. Spans go to ``<endpoint>/v1/traces`` as OTLP/HTTP
protobuf through a batch processor, flushed when the worker stops and when the process exits.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
from collections.abc import Iterator
from typing import Any

from luigi import configuration

logger = logging.getLogger("luigi-interface")

SECTION = "otel"
TRACEPARENT = "TRACEPARENT"  # the environment variable a task's run (and what it starts) reads
INSTALL_HINT = "pip install 'luigi[otel]'"

# The one provider of this process, made at the first ``tracer()``; its pid tells a forked task slot
# (which inherits it) that it must flush its spans itself before it goes on.
_provider: Any = None
_provider_pid: int | None = None
_warned = False


def endpoint() -> str:
    """``[otel] endpoint`` (e.g. ``http://collector:4318``), or "" when tracing is off."""
    return str(configuration.get_config().get(SECTION, "endpoint", "") or "").strip()


def scheduler_spans() -> bool:
    """``[otel] scheduler_spans``: whether ``luigid`` makes a span of each RPC it serves."""
    return bool(configuration.get_config().getboolean(SECTION, "scheduler_spans", False))


def tracer(service_name: str) -> Any:
    """The tracer of this process's spans, or None when ``[otel] endpoint`` is unset or the SDK missing.

    The first call builds the provider (``service.name`` = ``service_name``) and makes it the global one
    when none is set, so a task's own ``trace.get_tracer(...)`` spans go to the same endpoint.
    """
    global _provider, _provider_pid
    url = endpoint()
    if not url:
        return None
    if not url.startswith(("http://", "https://")):
        _warn_once(
            f"[otel] endpoint = {url!r} is not an http(s) URL (e.g. http://collector:4318); running untraced"
        )
        return None
    if _provider is None:
        _provider = _build_provider(url, service_name)
        if _provider is None:
            return None
        _provider_pid = os.getpid()
        atexit.register(_provider.shutdown)
    return _provider.get_tracer("luigi")


def _warn_once(message: str) -> None:
    """One warning per process: tracing is misconfigured, the run goes on untraced."""
    global _warned
    if not _warned:
        logger.warning("%s", message)
        _warned = True


def _build_provider(url: str, service_name: str) -> Any:
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        _warn_once(
            f"[otel] endpoint is set but OpenTelemetry cannot be imported ({exc}): {INSTALL_HINT}; "
            "running untraced"
        )
        return None
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    exporter = OTLPSpanExporter(endpoint=url.rstrip("/") + "/v1/traces")
    provider.add_span_processor(BatchSpanProcessor(exporter))
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):  # none set yet: ours
        trace.set_tracer_provider(provider)
    return provider


def flush() -> None:
    """Send the spans ended so far (at a worker's stop; the rest go at exit)."""
    if _provider is not None:
        _provider.force_flush()


def traceparent(span: Any) -> str:
    """The W3C ``traceparent`` naming ``span`` as the parent."""
    context = span.get_span_context()
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


@contextlib.contextmanager
def run_in_trace(parent: str) -> Iterator[None]:
    """A task's run under the span ``parent`` names: ``TRACEPARENT`` in the environment (for the programs
    it starts) and, when the API is installed here, the current context (so its own spans nest).

    In a process forked from the worker (a task slot) the spans the task made are sent before it goes
    on: a slot may be killed or retire without running ``atexit``.
    """
    previous = os.environ.get(TRACEPARENT)
    os.environ[TRACEPARENT] = parent
    token = _attach(parent)
    try:
        yield
    finally:
        if token is not None:
            from opentelemetry import context

            context.detach(token)
        if previous is None:
            os.environ.pop(TRACEPARENT, None)
        else:
            os.environ[TRACEPARENT] = previous
        if _provider is not None and _provider_pid != os.getpid():
            _provider.force_flush()


def _attach(parent: str) -> Any:
    try:
        from opentelemetry import context
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    except ImportError:  # e.g. a Dask worker without the library: the environment variable still goes
        return None
    return context.attach(TraceContextTextMapPropagator().extract({"traceparent": parent}))
