"""Containers that many task records share: the empty ones, and equal small ones made once.

A million tasks mostly hold the same few things: no dependencies, one worker, one stakeholder, the same
parameter visibilities, no resources. One dict or set each costs 64-216 bytes a task, so records hold
these read-only shared containers instead, and ``SchedulerState`` (the only writer) replaces a field with
a new one rather than changing it in place. A write in place raises ``TypeError`` instead of silently
changing every task that shares the container.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import weakref
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NoReturn, TypeVar

K = TypeVar("K")
V = TypeVar("V")


def _refuse(*_args: Any, **_kwargs: Any) -> NoReturn:
    raise TypeError(
        "this container is shared between scheduler records and read-only: replace the field through "
        "SchedulerState instead of changing it in place"
    )


class FrozenDict(dict[K, V]):
    """A dict that refuses writes (JSON and ``==`` treat it as the dict it is)."""

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (dict(self),))


class FrozenList(list[V]):
    """A list that refuses writes (only ever empty here: the default of rarely filled fields)."""

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (list(self),))


EMPTY_DICT: FrozenDict[Any, Any] = FrozenDict()
EMPTY_LIST: FrozenList[Any] = FrozenList()
NO_IDS: frozenset[str] = frozenset()

_dicts: weakref.WeakValueDictionary[Any, FrozenDict[Any, Any]] = weakref.WeakValueDictionary()
_sets: weakref.WeakValueDictionary[frozenset[str], frozenset[str]] = weakref.WeakValueDictionary()


def shared_dict(items: Mapping[K, V] | None) -> dict[K, V]:
    """A read-only dict equal to ``items`` (in its order), the same object for equal small dicts."""
    if not items:
        return EMPTY_DICT
    try:
        key = tuple(items.items())
        made = _dicts.get(key)
    except TypeError:  # a value that cannot be hashed: this one is not shared
        return FrozenDict(items)
    if made is None:
        made = _dicts[key] = FrozenDict(items)
    return made


def shared_keys(keys: Iterable[str]) -> dict[str, None]:
    """A read-only ordered set (a dict of None values) of ``keys``, shared between equal ones."""
    return shared_dict(dict.fromkeys(keys))


def shared_ids(ids: Iterable[str]) -> frozenset[str]:
    """A frozenset of ``ids``, the same object for equal ones that are in use."""
    made = frozenset(ids)
    if not made:
        return NO_IDS
    found = _sets.get(made)
    if found is None:
        _sets[made] = found = made
    return found


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Hold the cyclic garbage collector off while a million records are made at once: each collection
    it would start meanwhile walks every record made so far, which cost half of making them (it runs
    again afterwards; a collector already off stays off)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def interned(text: str) -> str:
    """``text`` interned: families, modules, parameter names and worker ids repeat across many tasks."""
    return sys.intern(text) if type(text) is str else text
