"""``ClientError``: a request the server refuses, and the JSON of its answer; shared by every transport.

No tornado here: the transport-free ``dispatch`` raises it, and the tornado handlers and the RPC channel
answer it the same way.
"""

from __future__ import annotations

import json

__all__ = ["ClientError", "error_json"]


class ClientError(Exception):
    """A request the server refuses: answered with ``status`` and ``{"error": message}``."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def error_json(message: str) -> str:
    """The JSON text of an error answer: ``{"error": message}`` (``</`` escaped, as a page may embed it)."""
    return json.dumps({"error": message}).replace("</", "<\\/")
