"""What a value arriving over RPC may be: the JSON kinds of the registry's arguments, with their limits.

Whatever a call carries may be stored (the state file, task history) or shown (the visualiser), so
every value is checked in full before the scheduler sees it: text must be valid Unicode that encodes
as UTF-8 (JSON's ``"\\ud800"`` escape makes a lone surrogate, which no database can store) and no
longer than its limit; numbers must be finite (a ``limit`` may also be ``Infinity``: none), and integers must
fit a 64-bit database column;
free-form values may nest at most ``MAX_DEPTH`` deep; names (ids) hold no NUL, which PostgreSQL cannot
store. ``checker(kind)`` gives the check of one kind.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

__all__ = [
    "KINDS",
    "MAX_DEPTH",
    "MAX_NAME_CHARS",
    "MAX_TEXT_CHARS",
    "checker",
    "free_problem",
    "kind_check",
    "or_null",
    "text_problem",
]

MAX_NAME_CHARS = 4096  # a task id, family, module, worker id, resource or batcher name
MAX_TEXT_CHARS = 1 << 20  # any other text, nested text included; the body cap bounds a request as a whole
MAX_DEPTH = 32  # lists and objects inside a free-form value (an explanation, worker info, params)
INT_LIMIT = 1 << 63  # SQLite's INTEGER and PostgreSQL's BIGINT hold -2**63 .. 2**63 - 1

Check = Callable[[Any], "str | None"]


def text_problem(value: str, limit: int = MAX_TEXT_CHARS) -> str | None:
    """What makes ``value`` unfit to store: too long, or not encodable as UTF-8 (a lone surrogate)."""
    if len(value) > limit:
        return f"is {len(value)} characters long, more than the limit of {limit}"
    if value.isascii():
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = value[exc.start]
        return (
            f"is not valid Unicode text: it holds a lone surrogate {bad!r} at position {exc.start} "
            "(send UTF-8 text; a JSON \\uD800-\\uDFFF escape must be half of a pair)"
        )
    return None


def _int_problem(value: int) -> str | None:
    if -INT_LIMIT <= value < INT_LIMIT:
        return None
    return f"is an integer of {value.bit_length()} bits, outside the 64-bit range (-2**63 to 2**63 - 1)"


def _float_problem(value: float) -> str | None:
    return None if math.isfinite(value) else f"is {value}, which is not a finite number"


def _number_problem(value: Any) -> str | None:
    return _int_problem(value) if type(value) is int else _float_problem(value)


def free_problem(value: Any, depth: int = 0) -> str | None:
    """What makes a free-form JSON value unfit to store, looking inside lists and objects."""
    kind = type(value)
    if kind is str:
        return text_problem(value)
    if value is None or kind is bool:
        return None
    if kind is int:
        return _int_problem(value)
    if kind is float:
        return _float_problem(value)
    if kind is list or kind is dict:
        if depth >= MAX_DEPTH:
            return f"is nested more than {MAX_DEPTH} levels deep"
        return _inside_problem(value, depth + 1)
    return f"holds a {kind.__name__}, which is not a JSON value"


def _inside_problem(value: list[Any] | dict[Any, Any], depth: int) -> str | None:
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = free_problem(item, depth)
            if found is not None:
                return f"item {index} {found}" if depth == 1 else found
        return None
    for key, item in value.items():
        if type(key) is str and key.isascii() and len(key) <= MAX_NAME_CHARS and _plain_scalar(item):
            continue  # the usual entry (a parameter, a flag), decided without a further call
        found = _key_problem(key) or free_problem(item, depth)
        if found is not None:
            return f"entry {_shown_key(key)} {found}"
    return None


def _plain_scalar(item: Any) -> bool:
    """Whether ``item`` is null, a boolean, short ASCII text or a 64-bit integer: fit, no more to check."""
    kind = type(item)
    if kind is str:
        return item.isascii() and len(item) <= MAX_TEXT_CHARS
    return item is None or kind is bool or (kind is int and -INT_LIMIT <= item < INT_LIMIT)


def _key_problem(key: Any) -> str | None:
    if type(key) is not str:
        return f"has a key of type {type(key).__name__}, not a string"
    return text_problem(key, MAX_NAME_CHARS)


def _shown_key(key: Any) -> str:
    return f"{key!r:.60}"


def _name_problem(value: Any) -> str | None:
    found = text_problem(value, MAX_NAME_CHARS)
    if found is None and "\x00" in value:
        return f"holds a NUL character at position {value.index(chr(0))}, which no name may hold"
    return found


def _names_problem(value: list[Any]) -> str | None:
    for index, item in enumerate(value):
        if item.isascii() and len(item) <= MAX_NAME_CHARS and "\x00" not in item:
            continue  # the usual name (a task id), decided without a further call
        found = _name_problem(item)
        if found is not None:
            return f"item {index} {found}"
    return None


def _number_dict_problem(value: dict[str, Any]) -> str | None:
    for key, amount in value.items():
        found = _key_problem(key) or _number_problem(amount)
        if found is not None:
            return f"entry {_shown_key(key)} {found}"
    return None


def _shown(value: Any) -> str:
    return f"{value!r:.80} ({type(value).__name__})"


def _text_check(value: Any) -> str | None:
    if type(value) is str and value.isascii() and len(value) <= MAX_TEXT_CHARS:
        return None  # the common case, decided without a further call
    return text_problem(value) if isinstance(value, str) else f"must be a string, got {_shown(value)}"


def _name_check(value: Any) -> str | None:
    if type(value) is str and value.isascii() and len(value) <= MAX_NAME_CHARS and "\x00" not in value:
        return None
    return _name_problem(value) if isinstance(value, str) else f"must be a string, got {_shown(value)}"


def _bool_check(value: Any) -> str | None:
    return None if value is True or value is False else f"must be a boolean, got {_shown(value)}"


def _int_check(value: Any) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return _int_problem(value)
    return f"must be an integer, got {_shown(value)}"


def _number_check(value: Any) -> str | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _number_problem(value)
    return f"must be a number, got {_shown(value)}"


def _limit_check(value: Any) -> str | None:
    """A number, or infinity for no limit: Luigi's ``max_batch_size`` defaults to ``float('inf')``,
    which its client sends as ``Infinity``."""
    return None if value == math.inf else _number_check(value)


def _dict_check(value: Any) -> str | None:
    if type(value) is dict:
        return _inside_problem(value, 1)  # as free_problem would, one call sooner
    return free_problem(value) if isinstance(value, dict) else f"must be an object, got {_shown(value)}"


def _names_list_check(value: Any) -> str | None:
    if type(value) is list and not value:
        return None  # the usual report: no (new) dependencies
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return _names_problem(value)
    return f"must be a list of strings, got {_shown(value)}"


def _number_dict_check(value: Any) -> str | None:
    if type(value) is dict and not value:
        return None  # the usual report: no resources
    numbers = isinstance(value, dict) and all(
        isinstance(amount, (int, float)) and not isinstance(amount, bool) for amount in value.values()
    )
    return (
        _number_dict_problem(value)
        if numbers
        else f"must be an object mapping names to numbers, got {_shown(value)}"
    )


def _owners_check(value: Any) -> str | None:
    if type(value) is list and not value:
        return None  # the usual report: no owners
    if isinstance(value, str):
        return _name_problem(value)
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return _names_problem(value)
    return f"must be a string or a list of strings, got {_shown(value)}"


def _log_tail_check(value: Any) -> str | None:
    """A run's last log chunk riding on its final ``add_task``: ``{"run", "offset", "chunk"}``."""
    if not (isinstance(value, dict) and len(value) == 3 and "run" in value and "offset" in value
            and "chunk" in value):  # fmt: skip
        return f"must be an object with run, offset and chunk, got {_shown(value)}"
    for key, check in (("run", _name_check), ("offset", _int_check), ("chunk", _text_check)):
        found = check(value[key])
        if found is not None:
            return f"{key} {found}"
    return None if value["offset"] >= 0 else f"offset must not be negative, got {value['offset']}"


# Each kind's check: None when a value is of the kind's JSON type and fit to store, else what is wrong.
_CHECKS: dict[str, Check] = {
    "any": free_problem,
    "str": _text_check,
    "name": _name_check,
    "bool": _bool_check,
    "int": _int_check,
    "number": _number_check,
    "limit": _limit_check,  # a number or Infinity (no limit)
    "dict": _dict_check,
    "list[name]": _names_list_check,
    "dict[number]": _number_dict_check,
    "names": _owners_check,  # one name, or a list of them (owners: "a@x, b@y" or ["a@x", "b@y"])
    "log_tail": _log_tail_check,
}
KINDS = frozenset(_CHECKS)


def kind_check(kind: str) -> tuple[Check, bool]:
    """The check of ``kind`` without its trailing ``?``, and whether the ``?`` admits null: what a caller
    that tests for None itself runs (``RpcMethod.check``), saving a call per nullable argument."""
    return _CHECKS[kind.rstrip("?")], kind.endswith("?")


def or_null(found: str) -> str:
    """A nullable kind's problem: "must be a string, got 5 (int)" becomes "must be a string or null, ..."."""
    return found.replace(", got ", " or null, got ", 1) if found.startswith("must be ") else found


def checker(kind: str) -> Check:
    """The check of ``kind`` (a name of ``KINDS``; a trailing ``?`` admits null as well): it returns None
    for a fit value, else the problem as a phrase ("must be a string, got 5 (int)")."""
    check, admits_null = kind_check(kind)
    if not admits_null:
        return check

    def nullable(value: Any) -> str | None:
        if value is None:
            return None
        found = check(value)
        return None if found is None else or_null(found)

    return nullable
