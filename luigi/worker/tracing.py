"""The worker's spans (``[otel] endpoint``): one trace per worker run, one span per task run in it.

Made only when tracing is on (``Worker`` holds None otherwise, and pays one ``if`` per start and per
outcome). A task-run span lives in the worker's process, from the runner's start to the outcome the
worker handles, whichever runner ran the task (this process, a task slot, Dask); the run gets the span
as its ``traceparent`` (``TaskRunOptions.trace_parent``), so spans the task makes itself nest under it.
"""

from __future__ import annotations

import collections
from typing import Any

from luigi import otel
from luigi.task import Task
from luigi.task_status import DONE, FAILED
from luigi.worker.task_process import TaskOutcome

SERVICE_NAME = "luigi"


class RunSpans:
    """The root span of a worker's run and the span of each task run under it.

    ``attempt`` is the number of this run of the task within this worker's run (1 for its first): the
    worker does not know the scheduler's failure count, and a retry by another worker starts again at 1.
    """

    def __init__(self, tracer: Any, worker_id: str) -> None:
        self._tracer = tracer
        self._worker_id = worker_id
        self._root = tracer.start_span("luigi run", attributes={"luigi.worker.id": worker_id})
        self._runs: dict[str, Any] = {}  # task id -> its open span
        self._attempts: collections.Counter[str] = collections.Counter()

    @classmethod
    def configured(cls, worker_id: str) -> RunSpans | None:
        """The spans of a worker run when ``[otel] endpoint`` is set (and the SDK installed), else None."""
        tracer = otel.tracer(SERVICE_NAME)
        return cls(tracer, worker_id) if tracer is not None else None

    def started(self, task: Task) -> str:
        """Open the span of ``task``'s run; returns its ``traceparent`` for the run."""
        from opentelemetry import trace

        self._attempts[task.task_id] += 1
        attributes: dict[str, Any] = {
            "luigi.task.id": task.task_id,
            "luigi.task.family": task.task_family,
            "luigi.worker.id": self._worker_id,
            "luigi.task.attempt": self._attempts[task.task_id],
        }
        # Public parameters only: private and hidden values never leave the worker (as in the task id).
        for name, value in task.to_str_params(only_public=True).items():
            attributes[f"luigi.task.param.{name}"] = value
        context = trace.set_span_in_context(self._root)
        span = self._tracer.start_span(task.task_family, context=context, attributes=attributes)
        self._runs[task.task_id] = span
        return otel.traceparent(span)

    def ended(self, outcome: TaskOutcome) -> None:
        """Close the span of the run that ended with ``outcome`` (its status, and the error if FAILED)."""
        span = self._runs.pop(outcome.task_id, None)
        if span is None:
            return
        self._end(span, outcome.status, str(outcome.expl or "") if outcome.status == FAILED else "")

    def _end(self, span: Any, status: str, error: str) -> None:
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("luigi.task.status", status)
        if status == FAILED:
            span.set_status(Status(StatusCode.ERROR, error.strip().splitlines()[-1] if error.strip() else ""))
        elif status == DONE:
            span.set_status(Status(StatusCode.OK))
        span.end()

    def close(self) -> None:
        """End the runs still open (the worker stopped them) and the root span; send what is ended."""
        for span in self._runs.values():
            self._end(span, FAILED, "the worker stopped before the run ended")
        self._runs.clear()
        self._root.end()
        otel.flush()
