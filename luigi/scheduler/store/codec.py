"""Converting task and worker records to table rows and back, checking the shape of what is read.

Each persisted field has a kind that fixes its column type and its encoding: scalars get their own
column, collections and free-form values are JSON text. JSON has no infinity, so non-finite floats
(``max_batch_size=inf``) are written as ``{"$float": "inf"}`` and read back as floats.
"""

from __future__ import annotations

import dataclasses
import json
import math
import operator
import sys
from collections.abc import Callable, Mapping, Sequence
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any, NoReturn, cast

from luigi.scheduler.model.records import TaskRecord, WorkerRecord
from luigi.scheduler.model.shared import (
    EMPTY_LIST,
    NO_IDS,
    FrozenDict,
    FrozenList,
    interned,
    shared_dict,
    shared_ids,
    shared_keys,
)
from luigi.scheduler.model.state import STATUSES
from luigi.scheduler.settings import TaskRetryPolicy
from luigi.scheduler.store.base import CorruptStateError

# Field kinds: "key" (text primary key), "text", "name" (text many records repeat: interned), "time" (a
# float), "bool", "status", and JSON kinds: "json" (any value), "dict", "params" (a dict whose keys are
# interned), "shared" (a read-only dict shared between equal ones), "list", "set" (a frozenset of text),
# "ids" (one shared between equal ones), "ordered" (text keys of a read-only ordered dict, shared),
# "times" (list of floats), "names" (list of text), "policy" (a TaskRetryPolicy), "number", "texts"
# (list of text). A trailing "?" allows None. ``model.shared`` says why task records share containers.
TASK_FIELDS: tuple[tuple[str, str], ...] = (
    ("id", "key"),
    ("status", "status"),
    ("created", "time"),
    ("updated", "time"),
    ("retry_policy", "policy"),
    ("deps", "set"),
    ("priority", "json"),
    ("family", "name"),
    ("module", "name?"),
    ("params", "params"),
    ("param_visibilities", "shared"),
    ("resources", "shared"),
    ("stakeholders", "ids"),
    ("workers", "ordered"),
    ("retry", "time?"),
    ("remove", "time?"),
    ("worker_running", "name?"),
    ("time_running", "time?"),
    ("resources_running", "dict?"),
    ("expl", "json"),
    ("accepts_messages", "bool"),
    ("tracking_url", "json"),
    ("status_message", "json"),
    ("progress_percentage", "json"),
    ("scheduler_message_responses", "shared"),
    ("scheduler_disable_time", "time?"),
    ("failure_times", "times"),
    ("first_failure_time", "time?"),
    ("runnable", "bool"),
    ("batchable", "bool"),
    ("batch_id", "text?"),
    ("owners", "names"),
    ("lost_lease", "dict?"),  # since schema version 2
    ("cancel_requested", "time?"),  # since schema version 3
    ("granted_ahead", "bool?"),  # since schema version 4 (None in rows written before it: not ahead)
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
# (A worker's ``ahead`` is rebuilt from its tasks' ``granted_ahead``: ``SchedulerState.rebuild_indexes``.)
DERIVED_TASK_FIELDS = frozenset({"unfinished_deps", "resource_key", "pretty_cache"})
DERIVED_WORKER_FIELDS = frozenset({"tasks", "stake", "pending_counts", "ahead"})

_FLOAT_TAG = "$float"
_EMPTY_JSON: dict[type, str] = {type(None): "null", dict: "{}", list: "[]", set: "[]", str: '""'}
_EMPTY_VALUES: dict[str, Callable[[], Any]] = {"null": lambda: None, "{}": dict, "[]": list, '""': str}
_NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


# -- JSON with explicit non-finite floats ---------------------------------------------------------------


def dumps(value: Any) -> str:
    """Compact JSON; non-finite floats tagged; sets as sorted lists; other foreign values as ``str()``."""
    if not value:  # most JSON columns hold None or an empty collection: skip the encoder
        empty = _EMPTY_JSON.get(type(value))
        if empty is not None:
            return empty
    try:
        return _encode(value)
    except ValueError:  # a non-finite float somewhere (rare): tag them, then encode again
        try:
            tagged = _tag_non_finite(value)
        except RecursionError:
            raise ValueError(f"cannot store a {type(value).__name__} that contains itself") from None
        return _ENCODER.encode(tagged)


def loads(text: str) -> Any:
    """The value ``dumps`` wrote."""
    make_empty = _EMPTY_VALUES.get(text)
    if make_empty is not None:  # most columns: skip the parser (and hand out a fresh container)
        return make_empty()
    tagged = _FLOAT_TAG in text
    # json.loads's Python layers cost more than parsing a row's small text: call its C scanner, and
    # leave to json.loads what the scanner does not take whole (spaces around it, damage: it names it)
    try:
        value, end = (_SCAN_TAGGED if tagged else _SCAN)(text, 0)
        if end == len(text):
            return value
    except (ValueError, StopIteration):
        pass
    if tagged:
        return json.loads(text, object_hook=_untag)
    return json.loads(text)


def _plain(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    return str(value)  # only JSON reaches the scheduler over HTTP; in-process oddities keep their text


_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"), default=_plain)
# JSONEncoder.encode builds its C encoder anew on every call, which costs more than encoding the small
# values of a row; this one is built once (without the circular-reference check: a value that loops
# ends in RecursionError, and is then encoded the ordinary way, which names the problem).
_C_ENCODER = (
    c_make_encoder(None, _plain, encode_basestring_ascii, None, ":", ",", False, False, False)
    if c_make_encoder is not None
    else None
)


def _encode(value: Any) -> str:
    if _C_ENCODER is None:
        return _ENCODER.encode(value)
    try:
        return "".join(_C_ENCODER(value, 0))
    except RecursionError:
        return _ENCODER.encode(value)


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


_intern = sys.intern


def _scanner(**options: Any) -> Callable[[str, int], tuple[Any, int]]:
    """The parser under json.loads (its C scanner): the value at an index, and where it ends."""
    decoder: Any = json.JSONDecoder(**options)  # typeshed does not declare scan_once
    return cast(Callable[[str, int], tuple[Any, int]], decoder.scan_once)


_SCAN = _scanner()
_SCAN_TAGGED = _scanner(object_hook=_untag)


# -- encoding -----------------------------------------------------------------------------------------


def _encode_json(value: Any) -> str:
    return dumps(value)


def _encode_set(value: Any) -> str:
    return dumps(sorted(value))


def _encode_ordered(value: Any) -> str:
    return dumps(list(value))


# A policy with these backoff fields is stored in the old three-number form.
_DEFAULT_BACKOFF = tuple(TaskRetryPolicy._field_defaults[name] for name in TaskRetryPolicy._fields[3:])


def _encode_policy(value: Any) -> str:
    if tuple(value[3:]) == _DEFAULT_BACKOFF:
        return dumps(list(value[:3]))
    return dumps(list(value))


def _same(value: Any) -> Any:
    return value


_ENCODERS: dict[str, Callable[[Any], Any]] = {
    "set": _encode_set,
    "ids": _encode_set,
    "ordered": _encode_ordered,
    "policy": _encode_policy,
}


def _encoder(kind: str) -> Callable[[Any], Any]:
    base = kind.rstrip("?")
    if base in ("key", "text", "name", "time", "bool", "status"):
        return _same
    encoder: Callable[[Any], Any] = _ENCODERS.get(base, _encode_json)
    if not kind.endswith("?"):
        return encoder

    def nullable(value: Any) -> Any:
        return None if value is None else encoder(value)

    return nullable


def _plan(fields: tuple[tuple[str, str], ...]) -> tuple[tuple[str, Callable[[Any], Any]], ...]:
    return tuple((name, _encoder(kind)) for name, kind in fields)


_TASK_PLAN = _plan(TASK_FIELDS)
_WORKER_PLAN = _plan(WORKER_FIELDS)


# A record's persisted field values, in field order (a tuple). The journal keeps these, encoded as one
# JSON line, and the columns are encoded from them when the journal is folded into the tables.
task_values: Callable[[TaskRecord], tuple[Any, ...]] = operator.attrgetter(*(name for name, _ in TASK_FIELDS))
worker_values: Callable[[WorkerRecord], tuple[Any, ...]] = operator.attrgetter(
    *(name for name, _ in WORKER_FIELDS)
)


def task_row(task: TaskRecord) -> dict[str, Any]:
    """The ``tasks`` row holding a task's persisted fields."""
    return task_row_of(task_values(task))


def worker_row(worker: WorkerRecord) -> dict[str, Any]:
    """The ``workers`` row holding a worker's persisted fields."""
    return worker_row_of(worker_values(worker))


def task_row_of(values: Sequence[Any]) -> dict[str, Any]:
    """The ``tasks`` row of a task's field values (``task_values``, or those read back from JSON, in
    which sets and tuples are lists: they encode the same); values past the fields are ignored."""
    return {name: encode(value) for (name, encode), value in zip(_TASK_PLAN, values, strict=False)}


def worker_row_of(values: Sequence[Any]) -> dict[str, Any]:
    """The ``workers`` row of a worker's field values (as for ``task_row_of``)."""
    return {name: encode(value) for (name, encode), value in zip(_WORKER_PLAN, values, strict=False)}


_LINE_ENCODER = (
    c_make_encoder(None, _plain, encode_basestring_ascii, None, ":", ",", False, False, True)
    if c_make_encoder is not None
    else None
)


def journal_dumps(value: Any) -> str:
    """One line of JSON for the journal: sets as sorted lists, non-finite floats as JSON's NaN/Infinity
    extension (Python's json reads them back), no whitespace; ValueError for a value that contains itself."""
    if _LINE_ENCODER is None:
        return json.dumps(value, default=_plain, separators=(",", ":"))
    try:
        return "".join(_LINE_ENCODER(value, 0))
    except RecursionError:
        return json.dumps(value, default=_plain, separators=(",", ":"))


# -- what a database can hold ----------------------------------------------------------------------------


def unstorable(row: Mapping[str, Any], text_columns: Sequence[str]) -> str | None:
    """Why some database could not hold ``row``'s plain ``text_columns`` (text that is not UTF-8, or a
    NUL, which PostgreSQL refuses), or None. JSON columns cannot be at fault: their text is escaped ASCII.
    """
    for column in text_columns:
        value = row[column]
        if type(value) is not str:
            continue
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                return f"column {column} holds a lone surrogate at position {exc.start}, not UTF-8 text"
        if "\x00" in value:
            return f"column {column} holds a NUL character"
    return None


# -- decoding -----------------------------------------------------------------------------------------

Decoder = Callable[[Any], Any]


def task_from_row(row: Mapping[Any, Any]) -> TaskRecord:
    """A task record from its row, or CorruptStateError naming the task and the bad field."""
    return TaskRecord(**_decode_fields("tasks", row, _TASK_DECODERS))


def worker_from_row(row: Mapping[Any, Any]) -> WorkerRecord:
    """A worker record from its row, or CorruptStateError naming the worker and the bad field."""
    return WorkerRecord(**_decode_fields("workers", row, _WORKER_DECODERS))


# Kinds whose values repeat from row to row and decode to immutable or shared values: a load decodes each
# distinct text once. Other kinds only remember their NULL and short texts ("null", "[]", "0"), and only
# when those decode to an immutable value (an empty params dict must stay a dict of its own).
_REMEMBERED_KINDS = frozenset({"status", "name", "bool", "policy", "shared", "ids", "ordered"})
_IMMUTABLE = (type(None), bool, int, float, str, frozenset, TaskRetryPolicy, FrozenDict, FrozenList)


class _Remembered(dict[Any, Any]):
    """One column's decoder during one load: a dict lookup (no Python call) for a text seen before."""

    def __init__(self, decode: Decoder, every_text: bool) -> None:
        super().__init__()
        self._decode = decode
        self._every_text = every_text

    def __missing__(self, raw: Any) -> Any:
        value = self._decode(raw)
        short = raw is None or (type(raw) is str and len(raw) <= 4)
        if (self._every_text or short) and type(value) in _IMMUTABLE:
            self[raw] = value
        return value


class RowReader:
    """Decodes the rows of one table during one load, each a sequence of values in field order (a
    driver's tuple): a slice of rows at once (``records``), or one row (calling it); a text that repeats
    from row to row (a status, a family, a retry policy, the workers of a task, an empty list) is
    decoded once. A row that does not decode raises CorruptStateError naming the record and the column,
    as ``task_from_row`` does."""

    def __init__(self, table: str) -> None:
        fields, plan, self._make = _TABLES[table]
        self._table = table
        self.names = tuple(name for name, _ in fields)
        self._steps: tuple[Decoder, ...] = tuple(
            decode
            if kind == "key"
            else _Remembered(decode, kind.rstrip("?") in _REMEMBERED_KINDS).__getitem__
            for (_, kind), (_, decode) in zip(fields, plan, strict=True)
        )
        self._columns = tuple(
            _column_decoder(kind, step) for (_, kind), step in zip(fields, self._steps, strict=True)
        )
        self._plan = plan

    def __call__(self, row: Sequence[Any]) -> Any:
        try:
            values = [decode(raw) for decode, raw in zip(self._steps, row, strict=True)]
        except (ValueError, TypeError):
            _decode_fields(self._table, dict(zip(self.names, row, strict=False)), self._plan)  # names it
            raise
        return self._make(*values)  # the fields come first in the record, in this order

    def records(self, rows: Sequence[Sequence[Any]]) -> list[Any]:
        """The records of a slice of rows, decoded a column at a time (a Python call per distinct
        value at most, none for a column of plain texts or numbers); columns past the fields (a
        table's ``seq``) are left alone. ValueError or TypeError when some row does not decode
        (``__call__`` then names it)."""
        columns = zip(*rows, strict=True)
        values = [decode(column) for decode, column in zip(self._columns, columns, strict=False)]
        return list(map(self._make, *values))


ColumnDecoder = Callable[[Sequence[Any]], Sequence[Any]]
_TEXT_TYPES: frozenset[type] = frozenset({str})
_TEXT_OR_NULL: frozenset[type] = frozenset({str, type(None)})
_NUMBER_TYPES: frozenset[type] = frozenset({int, float})
_NUMBER_OR_NONE_TYPES: frozenset[type] = frozenset({int, float, type(None)})


def _column_decoder(kind: str, step: Decoder) -> ColumnDecoder:
    """How ``RowReader.records`` decodes one column of a slice of rows: keys and times as the driver
    gave them once their types are checked (no call per value), the others through ``step``."""
    base = kind.rstrip("?")
    if base == "key":
        return lambda column: _of_types(column, _TEXT_TYPES, "text")
    if base == "time":
        allowed = _NUMBER_OR_NONE_TYPES if kind.endswith("?") else _NUMBER_TYPES
        return lambda column: _of_types(column, allowed, "a number")
    if kind == "params":
        return _params_column
    return lambda column: _through(step, column)


def _of_types(column: Sequence[Any], allowed: frozenset[type], expected: str) -> Sequence[Any]:
    """``column`` itself when each value's exact type is allowed (``bool`` is no number here)."""
    if not allowed.issuperset(map(type, column)):
        raise ValueError(f"a value is not {expected}")
    return column


def _through(step: Decoder, column: Sequence[Any]) -> list[Any]:
    """Each value of ``column`` decoded by ``step``; a column of one text or NULL (most are: a status, a
    family, a policy) whose value cannot be changed in place is decoded once, without a lookup per row
    (texts only: a number equals numbers of other types, which may not decode alike)."""
    raw = column[0]
    if type(raw) in _TEXT_OR_NULL and column.count(raw) == len(column):
        first = step(raw)
        if type(first) in _IMMUTABLE:
            return [first] * len(column)
    return list(map(step, column))


def _params_column(column: Sequence[Any]) -> list[dict[str, Any]]:
    """Each task's own parameters dict: a column whose texts differ from row to row, so none is
    remembered (TypeError for a NULL)."""
    return [_params(loads(text)) for text in column]


def decode_json(table: str, key: str, column: str, text: Any, kind: str = "json") -> Any:
    """A JSON column's value, checked against ``kind``."""
    try:
        return _decoder(kind)(text)
    except (ValueError, TypeError) as exc:
        raise CorruptStateError(f"{table} row {key!r} column {column}: {exc}") from None


def _decode_fields(
    table: str, row: Mapping[Any, Any], plan: tuple[tuple[str, Decoder], ...]
) -> dict[str, Any]:
    values = {}
    for name, decode in plan:
        try:
            values[name] = decode(row[name])
        except (ValueError, TypeError, KeyError) as exc:
            raise CorruptStateError(f"{table} row {row.get('id')!r} column {name}: {exc}") from None
    return values


def _fail(value: Any, expected: str) -> NoReturn:
    raise ValueError(f"got {value!r:.80}, expected {expected}")


def _text(raw: Any) -> str:
    return raw if isinstance(raw, str) else _fail(raw, "text")


def _status(raw: Any) -> str:
    return str(raw) if raw in STATUSES else _fail(raw, f"one of {', '.join(STATUSES)}")


def _number(raw: Any) -> Any:
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return raw
    return _fail(raw, "a number")


def _boolean(raw: Any) -> bool:
    return bool(raw) if isinstance(raw, (bool, int)) else _fail(raw, "a boolean")


def _texts(value: Any) -> list[str]:
    if isinstance(value, list) and (not value or all(type(item) is str for item in value)):
        return cast(list[str], value)
    return _fail(value, "a list of strings")


def _a_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else _fail(value, "a JSON object")


def _params(value: Any) -> dict[str, Any]:
    """A task's parameters: a dict of its own, the names interned (they repeat across tasks)."""
    return {_intern(key): item for key, item in _a_dict(value).items()}


def _a_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else _fail(value, "a JSON list")


def _times(value: Any) -> list[Any]:
    if not isinstance(value, list):
        return _fail(value, "a list of times")
    return [_number(item) for item in value] if value else EMPTY_LIST


def _policy(value: Any) -> TaskRetryPolicy:
    if isinstance(value, list) and len(value) == 3:
        return TaskRetryPolicy(*(_number(item) for item in value))
    if isinstance(value, list) and len(value) == 7 and isinstance(value[3], str):
        delay = None if value[4] is None else _number(value[4])
        count, hard_timeout, window = (_number(item) for item in value[:3])
        return TaskRetryPolicy(
            count, hard_timeout, window, value[3], delay, _number(value[5]), _number(value[6])
        )
    return _fail(value, "[retry_count, disable_hard_timeout, disable_window] (+ the four backoff fields)")


def _any(value: Any) -> Any:
    return value


# How the value decoded from a JSON column is checked (and turned into the record's type).
_SHAPES: dict[str, Decoder] = {
    "json": _any,
    "dict": _a_dict,
    "list": _a_list,
    "params": _params,
    "shared": lambda value: shared_dict(_a_dict(value)),
    "set": lambda value: frozenset(_texts(value)) or NO_IDS,
    "ids": lambda value: shared_ids(_texts(value)),
    "ordered": lambda value: shared_keys(_texts(value)),
    "texts": _texts,
    "names": lambda value: _texts(value) or EMPTY_LIST,
    "number": _number,
    "times": _times,
    "policy": _policy,
}
_SCALARS: dict[str, Decoder] = {
    "key": _text,
    "text": _text,
    "name": lambda raw: interned(_text(raw)),
    "status": _status,
    "time": _number,
    "bool": _boolean,
}


def _decoder(kind: str) -> Decoder:
    base = kind.rstrip("?")
    decode = _SCALARS.get(base)
    if decode is None:
        shape = _SHAPES[base]

        def decode(raw: Any) -> Any:
            return shape(loads(raw if isinstance(raw, str) else _fail(raw, "JSON text")))

    if kind.endswith("?"):
        return lambda raw: None if raw is None else decode(raw)
    return lambda raw: _fail(raw, base) if raw is None else decode(raw)


_TASK_DECODERS = tuple((name, _decoder(kind)) for name, kind in TASK_FIELDS)
_WORKER_DECODERS = tuple((name, _decoder(kind)) for name, kind in WORKER_FIELDS)
# The persisted fields are the records' first fields, in the same order (``RowReader`` relies on it).
assert tuple(f.name for f in dataclasses.fields(TaskRecord))[: len(TASK_FIELDS)] == tuple(
    n for n, _ in TASK_FIELDS
)
assert tuple(f.name for f in dataclasses.fields(WorkerRecord))[: len(WORKER_FIELDS)] == tuple(
    n for n, _ in WORKER_FIELDS
)
_Table = tuple[tuple[tuple[str, str], ...], tuple[tuple[str, Decoder], ...], Callable[..., Any]]
_TABLES: dict[str, _Table] = {
    "tasks": (TASK_FIELDS, _TASK_DECODERS, TaskRecord),
    "workers": (WORKER_FIELDS, _WORKER_DECODERS, WorkerRecord),
}
