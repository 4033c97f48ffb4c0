"""A call's way from its decoded JSON to the scheduler and back, with no transport in it.

Decoding a request's kwargs, serving one registered call or a ``_batch`` of them, the flush that makes
their changes durable before the answer, and the answer's JSON text; a refusal is a ``ClientError``.
The ``/api`` handlers (``luigi.server.api``) and the RPC channel (``luigi.server.channel``) both serve
through here, so a call answers the same on either; ``ServedScheduler`` is what it serves.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from luigi.rpc_methods import RpcArgumentError, RpcMethod, UnknownRpcMethodError, get_method, invoke
from luigi.server import store_health
from luigi.server.errors import ClientError

if TYPE_CHECKING:
    from luigi.server.served import ServedScheduler
    from luigi.server.tracing import RpcSpans

__all__ = [
    "BATCH_METHOD",
    "Batch",
    "call_scheduler",
    "decode_data",
    "flush_scheduler",
    "lookup_method",
    "parse_batch",
    "run_batch",
    "serve_batch",
    "serve_call",
    "serve_json_call",
    "utf8_text",
]

logger = logging.getLogger("luigi.server")

BATCH_METHOD = "_batch"
_CALL_KEYS = frozenset({"method", "kwargs"})
_BATCH_KEYS = frozenset({"calls", "stop_on_error"})

# [otel] scheduler_spans: the span maker of every served call, set by ``luigi.server.serve.run`` for
# the life of a luigid (None: untraced, the default).
rpc_spans: RpcSpans | None = None


def _read_constant(name: str) -> float:
    """Python's ``Infinity``, which Luigi's client writes for ``max_batch_size`` (its default, no limit),
    reads as a float for the argument's own check to judge; ``NaN`` and ``-Infinity`` are refused here."""
    if name == "Infinity":
        return math.inf
    raise ValueError(f"{name} is not a JSON number (JSON has no NaN or -Infinity)")


# Built once: ``json.loads`` given ``parse_constant`` would build a decoder (and its scanner) per request.
_DECODER = json.JSONDecoder(parse_constant=_read_constant)


def decode_data(text: str) -> dict[str, Any]:
    """The kwargs object in a ``data`` field, or a 400 naming what is wrong with it.

    Strict JSON but for ``Infinity``, which only an argument of the kind ``limit`` accepts
    (``luigi.rpc_values``); ``NaN`` and ``-Infinity`` are refused.
    """
    if text.startswith("\ufeff"):  # json.loads would say so; the decoder itself does not look
        raise ClientError(400, "'data' is not valid JSON: it starts with a byte order mark (send it without)")
    try:
        value = _DECODER.decode(text)
    except (ValueError, RecursionError) as exc:
        raise ClientError(400, f"'data' is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ClientError(
            400,
            f"'data' must be a JSON object of keyword arguments, got {type(value).__name__}: {text[:80]!r}",
        )
    return value


def lookup_method(name: str) -> RpcMethod:
    """The registered method called ``name``, or a 404."""
    try:
        return get_method(name)
    except UnknownRpcMethodError as exc:
        raise ClientError(404, str(exc)) from None


def call_scheduler(scheduler: ServedScheduler, method: RpcMethod, kwargs: Mapping[str, Any]) -> str:
    """Run one checked call and return its result encoded as JSON text.

    Bad arguments (the registry's checks, or the scheduler's own ``ValueError``) answer 400; anything
    else the scheduler raises answers 500 and is logged with its traceback.
    """
    started = time.perf_counter()
    status = 200
    try:
        result = invoke(scheduler, method.name, kwargs)
    except (RpcArgumentError, ValueError) as exc:
        status = 400
        raise ClientError(400, str(exc)) from None
    except Exception as exc:  # a scheduler bug must not take the server down; report it to the caller
        status = 500
        logger.exception("%s raised inside the scheduler", method.name)
        raise ClientError(
            500, f"{method.name} failed inside the scheduler: {type(exc).__name__}: {exc}"
        ) from None
    finally:
        seconds = time.perf_counter() - started
        _observe_rpc(scheduler, method.name, seconds)
        if rpc_spans is not None:
            rpc_spans.record(method.name, seconds, status)
    try:
        return json.dumps(result)
    except (TypeError, ValueError) as exc:
        logger.error("%s returned a value that is not JSON: %r", method.name, result)
        raise ClientError(500, f"{method.name} returned a value that cannot be sent as JSON: {exc}") from None


def _observe_rpc(scheduler: ServedScheduler, name: str, seconds: float) -> None:
    """Tell the scheduler's metrics collector how long the call took, if it listens (``observe_rpc``)."""
    observe = scheduler.metrics_extras.observe_rpc
    if observe is None:
        return
    try:
        observe(name, seconds)
    except Exception:  # a collector is a plug-in: its bug must not fail the call it measured
        logger.exception("Metrics collector failed on observing %s", name)


def flush_scheduler(scheduler: ServedScheduler, mutating: bool = True) -> None:
    """Make the scheduler's changes durable before answering (its ``flush()``, when it has one).

    A failure answers a mutating call 503 (``store_health``): the change is in memory, not yet stored,
    and the next flush retries it. A read answers as usual.
    """
    if not store_health.flush(scheduler) and mutating:
        raise store_health.refusal(scheduler)


def utf8_text(raw: bytes, what: str) -> str:
    """``raw`` decoded as UTF-8, or a 400 naming ``what`` was not."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ClientError(400, f"The {what} is not valid UTF-8: {exc}") from None


def serve_json_call(scheduler: ServedScheduler, name: str, data: dict[str, Any], client: str | None) -> str:
    """The ``response`` JSON of ``POST /api/<name>`` whose kwargs (or batch) are ``data``, flushed.

    What the RPC channel runs for each request; ``/api`` itself answers the same through its handlers.
    """
    if name == BATCH_METHOD:
        return serve_batch(scheduler, data, client)
    return serve_call(scheduler, lookup_method(name), data)


def serve_call(scheduler: ServedScheduler, method: RpcMethod, kwargs: Mapping[str, Any]) -> str:
    """``call_scheduler``, then the flush that makes its changes durable (also after a failed call)."""
    if method.mutating:
        _check_writable(scheduler, [(method.name, kwargs)])
    try:
        return call_scheduler(scheduler, method, kwargs)
    finally:
        flush_scheduler(scheduler, method.mutating)  # a call that failed half-way may have changed state


def serve_batch(scheduler: ServedScheduler, data: dict[str, Any], client: str | None) -> str:
    """The ``response`` JSON of a ``_batch`` request's ``data``: its calls run in order, then one flush."""
    batch = parse_batch(data)
    mutating = any(_is_mutating(name) for name, _ in batch.calls)
    if mutating:
        _check_writable(scheduler, batch.calls)
    parts = run_batch(scheduler, batch, client)
    flush_scheduler(scheduler, mutating)  # once per batch: one transaction for all its calls
    return "[" + ", ".join(parts) + "]"


def _check_writable(scheduler: ServedScheduler, calls: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
    """``store_health.check_writable``; a refused ping still tells that its worker is alive (that needs
    no save), so that an outage of the state store longer than the disconnect delay drops no worker."""
    try:
        store_health.check_writable(scheduler)
    except ClientError:
        for name, kwargs in calls:
            worker = kwargs.get("worker") if isinstance(kwargs, Mapping) else None
            if name == "ping" and isinstance(worker, str):
                scheduler.note_alive(worker)
        raise


def _is_mutating(name: str) -> bool:
    try:
        return get_method(name).mutating
    except UnknownRpcMethodError:
        return False  # answered 404 in its entry


def run_batch(scheduler: ServedScheduler, batch: Batch, client: str | None) -> list[str]:
    """Each call's JSON entry in order; with ``stop_on_error``, calls after a refused one answer 424."""
    parts: list[str] = []
    failed: str | None = None
    for index, (name, kwargs) in enumerate(batch.calls):
        if failed is not None:
            parts.append(json.dumps({"error": f"not run: {failed} was refused", "status": 424}))
            continue
        part, ok = _run_one(scheduler, index, name, kwargs, client)
        parts.append(part)
        if not ok and batch.stop_on_error:
            failed = f"call {index} ({name})"
    return parts


def _run_one(
    scheduler: ServedScheduler, index: int, name: str, kwargs: dict[str, Any], client: str | None
) -> tuple[str, bool]:
    """One call's entry, ``{"response": r}`` or ``{"error": msg, "status": code}``, and whether it ran."""
    try:
        return '{"response": ' + call_scheduler(scheduler, lookup_method(name), kwargs) + "}", True
    except ClientError as error:
        if error.status < 500:
            logger.warning(
                "_batch call %d (%s) from %s refused (%d): %s",
                index,
                name,
                client,
                error.status,
                error.message,
            )
        return json.dumps({"error": error.message, "status": error.status}), False


@dataclass(frozen=True)
class Batch:
    """The (method, kwargs) pairs of a ``/api/_batch`` request, and whether to stop at a refused call."""

    calls: list[tuple[str, dict[str, Any]]]
    stop_on_error: bool = False


def parse_batch(data: dict[str, Any]) -> Batch:
    """The calls of a batch, or a 400 naming the first malformed part (nothing runs)."""
    if "calls" not in data or not set(data) <= _BATCH_KEYS:
        extra = sorted(set(data) - _BATCH_KEYS)
        problem = f"unexpected keys {extra}" if extra else "missing 'calls'"
        raise ClientError(
            400, f'_batch: \'data\' must be {{"calls": [...], "stop_on_error": false}} ({problem})'
        )
    calls, stop = data["calls"], data.get("stop_on_error", False)
    if not isinstance(calls, list):
        raise ClientError(400, f"_batch: 'calls' must be a list, got {type(calls).__name__}")
    if not isinstance(stop, bool):
        raise ClientError(400, f"_batch: 'stop_on_error' must be true or false, got {stop!r:.80}")
    return Batch([_parse_call(index, call) for index, call in enumerate(calls)], stop)


def _parse_call(index: int, call: Any) -> tuple[str, dict[str, Any]]:
    where = f"_batch: call {index}"
    if not isinstance(call, dict):
        raise ClientError(
            400, f'{where} must be an object {{"method": ..., "kwargs": {{...}}}}, got {call!r:.80}'
        )
    extra = sorted(set(call) - _CALL_KEYS)
    if extra:
        raise ClientError(400, f"{where} has unexpected keys {extra} (expected 'method' and 'kwargs')")
    method = call.get("method")
    if not isinstance(method, str):
        raise ClientError(400, f"{where}: 'method' must be a string, got {method!r:.80}")
    kwargs = call.get("kwargs", {})
    if not isinstance(kwargs, dict):
        raise ClientError(400, f"{where} ({method}): 'kwargs' must be an object, got {type(kwargs).__name__}")
    return method, kwargs
