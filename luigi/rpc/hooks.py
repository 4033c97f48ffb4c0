"""The names of ``luigi.rpc`` that users' tests replace, looked up there at each use (LUIGI_COMPAT j.3).

``mock.patch("luigi.rpc.logger")``, ``mock.patch("luigi.rpc.HAS_REQUESTS", False)`` and patches of
``luigi.rpc.RequestsFetcher`` or ``URLLibFetcher`` change attributes of the package; the submodules read
them through here, so they see the patch.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, cast

__all__ = ["fetcher_class", "logger", "rpc_logger"]

logger = logging.getLogger("luigi-interface")

_PACKAGE = __name__.rpartition(".")[0]


def _package_attribute(name: str, fallback: Any) -> Any:
    return getattr(sys.modules.get(_PACKAGE), name, fallback)


def rpc_logger() -> logging.Logger:
    """``luigi.rpc.logger`` as it is now (a test may have replaced it)."""
    return cast(logging.Logger, _package_attribute("logger", logger))


def fetcher_class() -> Any:
    """What a client built now makes its fetcher with: ``luigi.rpc.RequestsFetcher`` when
    ``luigi.rpc.HAS_REQUESTS``, else ``luigi.rpc.URLLibFetcher``."""
    from luigi.rpc import fetchers  # here: retry's logger comes through this module, the fetchers need not

    if _package_attribute("HAS_REQUESTS", fetchers.HAS_REQUESTS):
        return _package_attribute("RequestsFetcher", fetchers.RequestsFetcher)
    return _package_attribute("URLLibFetcher", fetchers.URLLibFetcher)
