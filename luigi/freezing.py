"""Immutable, hashable stand-ins for dicts and lists, so dict/list parameter values can key task caches."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any


class FrozenOrderedDict(Mapping[Any, Any]):
    """A read-only mapping that keeps insertion order and hashes like the set of its items.

    Equality is the usual mapping equality (order does not matter, a plain dict with the same items is
    equal), so the hash ignores order too. ``get_wrapped()`` gives a plain dict, e.g. for ``json.dumps``.
    """

    __slots__ = ("_items", "_hash")

    def __init__(self, *args: Mapping[Any, Any] | Iterable[tuple[Any, Any]], **kwargs: Any) -> None:
        self._items: dict[Any, Any] = dict(*args, **kwargs)
        self._hash: int | None = None

    def __getitem__(self, key: Any) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._items.items()))
        return self._hash

    def __repr__(self) -> str:
        # The plain dict's text, as Luigi's: a DictParameter value reads naturally in logs and f-strings.
        return repr(self._items)

    def __reduce__(self) -> tuple[type, tuple[list[tuple[Any, Any]]]]:
        return (type(self), (list(self._items.items()),))

    def __setattr__(self, name: str, value: Any) -> None:
        # Only the constructor and the lazy hash cache may write; everything else is frozen.
        if name == "_hash" or not hasattr(self, "_items"):
            object.__setattr__(self, name, value)
            return
        raise AttributeError(f"{type(self).__name__} is immutable")

    def get_wrapped(self) -> dict[Any, Any]:
        """A shallow copy of the contents as a plain dict (nested frozen values stay frozen)."""
        return dict(self._items)


def recursively_freeze(value: Any) -> Any:
    """Turn mappings into FrozenOrderedDicts and lists/tuples into tuples, all the way down."""
    if isinstance(value, Mapping):
        return FrozenOrderedDict((key, recursively_freeze(item)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(recursively_freeze(item) for item in value)
    return value


def recursively_unfreeze(value: Any) -> Any:
    """The inverse of recursively_freeze: mappings become dicts and tuples/lists become lists."""
    if isinstance(value, Mapping):
        return {key: recursively_unfreeze(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [recursively_unfreeze(item) for item in value]
    return value
