"""Importing a contrib backend's client library lazily, with one clear error when it is not installed."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["MissingExtraError", "require"]


class MissingExtraError(ImportError):
    """A contrib module was used without the client library its extra installs."""


def require(module: str, extra: str, feature: str, package: str | None = None) -> ModuleType:
    """Import ``module`` for ``feature``, or raise MissingExtraError naming the extra that installs it.

    Args:
        module: the import name of the client library (``"boto3"``).
        extra: the optional extra of this package that brings it (``"s3"``).
        feature: what needs it, for the message (``"luigi.contrib.s3"``).
        package: its name on PyPI when that is not the import name's first part.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtraError(
            f"{feature} needs the {module!r} package, which is not installed: "
            f"pip install 'luigi[{extra}]' (or pip install {package or module.split('.')[0]})"
        ) from exc
