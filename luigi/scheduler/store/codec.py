"""Converting task and worker records to table rows and back, checking the shape of what is read.

Each persisted field has a kind that fixes its column type and its encoding: scalars get their own
column, collections and free-form values are JSON text. JSON has no infinity, so non-finite floats
(``max_batch_size=inf``) are written as ``{"$float": "inf"}`` and read back as floats.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from luigi.scheduler.config import RetryPolicy
from luigi.scheduler.records import TaskRecord, WorkerRecord
from luigi.scheduler.state import STATUSES
from luigi.scheduler.store.base import CorruptStateError

# Field kinds: "key" (text primary key), "text", "time" (a float), "bool", "status", and JSON kinds:
# "json" (any value), "dict", "list", "set" (of text), "ordered" (text keys of an ordered dict),
# "times" (list of floats), "policy" (a RetryPolicy), "number", "texts" (list of text).
# A trailing "?" allows None.
TASK_FIELDS: tuple[tuple[str, str], ...] = (
    ("id", "key"),
    ("status", "status"),
    ("created", "time"),
    ("updated", "time"),
    ("retry_policy", "policy"),
    ("deps", "set"),
    ("priority", "json"),
    ("family", "text"),
    ("module", "text?"),
    ("params", "dict"),
    ("param_visibilities", "dict"),
    ("resources", "dict"),
    ("stakeholders", "set"),
    ("workers", "ordered"),
    ("retry", "time?"),
    ("remove", "time?"),
    ("worker_running", "text?"),
    ("time_running", "time?"),
    ("resources_running", "dict?"),
    ("expl", "json"),
    ("accepts_messages", "bool"),
    ("tracking_url", "json"),
    ("status_message", "json"),
    ("progress_percentage", "json"),
    ("scheduler_message_responses", "dict"),
    ("scheduler_disable_time", "time?"),
    ("failure_times", "times"),
    ("first_failure_time", "time?"),
    ("runnable", "bool"),
    ("batchable", "bool"),
    ("batch_id", "text?"),
    ("owners", "list"),
)

WORKER_FIELDS: tuple[tuple[str, str], ...] = (
    ("id", "key"),
    ("started", "time"),
    ("last_active", "time"),
    ("last_get_work", "time?"),
    ("reference", "dict?"),
    ("info", "dict"),
    ("disabled", "bool"),
    ("rpc_messages", "list"),
)

# Record fields rebuilt from the others on load (below the ``derived`` marker in records.py).
DERIVED_TASK_FIELDS = frozenset({"unfinished_deps", "resource_key", "pretty_cache"})
DERIVED_WORKER_FIELDS = frozenset({"tasks", "stake", "pending_counts"})

_FLOAT_TAG = "$float"
_NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


# -- JSON with explicit non-finite floats ---------------------------------------------------------------


def dumps(value: Any) -> str:
    """Compact JSON; non-finite floats tagged; sets as sorted lists; other foreign values as ``str()``."""
    try:
        return json.dumps(value, allow_nan=False, separators=(",", ":"), default=_plain)
    except ValueError:  # a non-finite float somewhere (rare): tag them, then encode again
        return json.dumps(_tag_non_finite(value), allow_nan=False, separators=(",", ":"), default=_plain)


def loads(text: str) -> Any:
    """The value ``dumps`` wrote."""
    return json.loads(text, object_hook=_untag)


def _plain(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    return str(value)  # only JSON reaches the scheduler over HTTP; in-process oddities keep their text


def _tag_non_finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return {_FLOAT_TAG: "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if isinstance(value, Mapping):
        return {key: _tag_non_finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_tag_non_finite(item) for item in value]
    return value


def _untag(obj: dict[str, Any]) -> Any:
    if len(obj) == 1 and _FLOAT_TAG in obj and obj[_FLOAT_TAG] in _NON_FINITE:
        return _NON_FINITE[obj[_FLOAT_TAG]]
    return obj


# -- encoding -----------------------------------------------------------------------------------------


def _encode_json(value: Any) -> str:
    return dumps(value)


def _encode_set(value: Any) -> str:
    return dumps(sorted(value))


def _encode_ordered(value: Any) -> str:
    return dumps(list(value))


def _encode_policy(value: Any) -> str:
    return dumps(list(value))


def _same(value: Any) -> Any:
    return value


_ENCODERS: dict[str, Callable[[Any], Any]] = {
    "set": _encode_set,
    "ordered": _encode_ordered,
    "policy": _encode_policy,
}


def _encoder(kind: str) -> Callable[[Any], Any]:
    base = kind.rstrip("?")
    if base in ("key", "text", "time", "bool", "status"):
        return _same
    encoder = _ENCODERS.get(base, _encode_json)
    if kind.endswith("?"):
        return lambda value: None if value is None else encoder(value)
    return encoder


def _plan(fields: tuple[tuple[str, str], ...]) -> tuple[tuple[str, Callable[[Any], Any]], ...]:
    return tuple((name, _encoder(kind)) for name, kind in fields)


_TASK_PLAN = _plan(TASK_FIELDS)
_WORKER_PLAN = _plan(WORKER_FIELDS)


def task_row(task: TaskRecord) -> dict[str, Any]:
    """The ``tasks`` row holding a task's persisted fields."""
    return {name: encode(getattr(task, name)) for name, encode in _TASK_PLAN}


def worker_row(worker: WorkerRecord) -> dict[str, Any]:
    """The ``workers`` row holding a worker's persisted fields."""
    return {name: encode(getattr(worker, name)) for name, encode in _WORKER_PLAN}


# -- decoding -----------------------------------------------------------------------------------------


def task_from_row(row: Mapping[Any, Any]) -> TaskRecord:
    """A task record from its row, or CorruptStateError naming the task and the bad field."""
    return TaskRecord(**_decode_fields("tasks", row, TASK_FIELDS))


def worker_from_row(row: Mapping[Any, Any]) -> WorkerRecord:
    """A worker record from its row, or CorruptStateError naming the worker and the bad field."""
    return WorkerRecord(**_decode_fields("workers", row, WORKER_FIELDS))


def decode_json(table: str, key: str, column: str, text: Any, kind: str = "json") -> Any:
    """A JSON column's value, checked against ``kind``."""
    return _decode(kind, text, f"{table} row {key!r} column {column}")


def _decode_fields(table: str, row: Mapping[Any, Any], fields: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    key = row.get("id")
    return {name: _decode(kind, row.get(name), f"{table} row {key!r} column {name}") for name, kind in fields}


def _decode(kind: str, raw: Any, where: str) -> Any:
    optional = kind.endswith("?")
    base = kind.rstrip("?")
    if raw is None:
        if optional:
            return None
        raise CorruptStateError(f"{where}: missing value (expected {base})")
    try:
        if base in ("key", "text", "status"):
            return _check_text(base, raw)
        if base == "time":
            return _check_number(raw)
        if base == "bool":
            _check(isinstance(raw, (bool, int)), raw, "a boolean")
            return bool(raw)
        return _shape(base, loads(_check_text("json", raw)))
    except (ValueError, TypeError) as exc:
        raise CorruptStateError(f"{where}: {exc}") from None


def _shape(kind: str, value: Any) -> Any:
    if kind == "dict":
        _check(isinstance(value, dict), value, "a JSON object")
    elif kind == "list":
        _check(isinstance(value, list), value, "a JSON list")
    elif kind in ("set", "ordered"):
        _check(isinstance(value, list) and all(isinstance(v, str) for v in value), value, "a list of strings")
        return set(value) if kind == "set" else dict.fromkeys(value)
    elif kind == "number":
        return _check_number(value)
    elif kind == "texts":
        _check(isinstance(value, list) and all(isinstance(v, str) for v in value), value, "a list of strings")
    elif kind == "times":
        _check(isinstance(value, list), value, "a list of times")
        return [_check_number(v) for v in value]
    elif kind == "policy":
        _check(isinstance(value, list) and len(value) == 3, value, "[retry_count, hard_timeout, window]")
        return RetryPolicy(*(_check_number(v) for v in value))
    return value


def _check_text(kind: str, raw: Any) -> str:
    _check(isinstance(raw, str), raw, "text")
    if kind == "status":
        _check(raw in STATUSES, raw, f"one of {', '.join(STATUSES)}")
    return raw


def _check_number(raw: Any) -> Any:
    _check(isinstance(raw, (int, float)) and not isinstance(raw, bool), raw, "a number")
    return raw


def _check(ok: bool, value: Any, expected: str) -> None:
    if not ok:
        raise ValueError(f"got {value!r:.80}, expected {expected}")
