"""Names a package exports but imports only on first use (PEP 562), so that ``import luigi`` stays cheap."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(
    package: str,
    names: Mapping[str, str],
    namespace: dict[str, Any],
    modules: Mapping[str, str] | None = None,
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: each name in ``names`` is imported from its module, and each
    name in ``modules`` is that module itself, the first time it is asked for; then it is kept in
    ``namespace`` (the package's globals) like any other name."""
    modules = modules or {}

    def __getattr__(name: str) -> Any:
        if name in modules:
            value = importlib.import_module(modules[name])
        elif name in names:
            value = getattr(importlib.import_module(names[name]), name)
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    return __getattr__
