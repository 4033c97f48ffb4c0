"""A read-only, hashable mapping for dict values read from TOML, so config values can't change in place."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


class FrozenMapping(Mapping[Any, Any]):
    """An immutable, insertion-ordered mapping; equal to any mapping with the same items."""

    __slots__ = ("_data", "_hash")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._data: dict[Any, Any] = dict(*args, **kwargs)
        self._hash: int | None = None

    def __getitem__(self, key: Any) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._data.items()))
        return self._hash

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._data!r})"


def freeze(value: Any) -> Any:
    """A deep read-only copy: mappings become FrozenMapping and lists inside them tuples."""
    if isinstance(value, Mapping):
        return FrozenMapping((key, freeze(item)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(freeze(item) for item in value)
    return value
