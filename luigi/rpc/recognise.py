"""Whether a scheduler is our RPC client, answered without importing the client."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, TypeGuard

if TYPE_CHECKING:
    from luigi.rpc.client import RemoteScheduler

_CLIENT_MODULE = "luigi.rpc.client"


def is_our_client(scheduler: Any) -> TypeGuard[RemoteScheduler]:
    """True when ``scheduler`` is a ``RemoteScheduler`` (or a subclass). None can exist before the client's
    module is imported, so a worker with a local scheduler asks without loading the HTTP machinery."""
    client = sys.modules.get(_CLIENT_MODULE)
    return client is not None and isinstance(scheduler, client.RemoteScheduler)
