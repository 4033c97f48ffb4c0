"""The error of a database luigi keeps (state store, task history): ``luigid`` reports it in one line."""

from __future__ import annotations


class StorageError(Exception):
    """A database luigi keeps cannot be opened, read or written; the message names the place and the fix."""
