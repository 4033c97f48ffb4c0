"""Writing a remote file atomically: the data fills a local temporary file, uploaded on ``close()``.

What the remote targets of ``luigi.contrib.ssh`` and ``luigi.contrib.ftp`` share: the file system's
``put`` uploads to a temporary remote name and renames it into place, so a failed write leaves nothing.
"""

from __future__ import annotations

import contextlib
import os
import random
import tempfile
from typing import Any

from luigi.local_target import AtomicLocalFile

__all__ = ["StagedUpload", "tmp_suffix"]


def tmp_suffix() -> str:
    """A suffix for a temporary name beside the real one (``-luigi-tmp-0123456789``)."""
    return f"-luigi-tmp-{random.randrange(10**10):010d}"


class StagedUpload(AtomicLocalFile):
    """A remote file being written to ``fs`` (anything with ``put(local_path, remote_path)``)."""

    local_prefix = "luigi-upload"  # names the local temporary file, per backend

    def __init__(self, fs: Any, path: str) -> None:
        self._fs = fs
        super().__init__(path)

    def generate_tmp_path(self, path: str) -> str:
        self._staged_path = os.path.join(tempfile.gettempdir(), f"{self.local_prefix}{tmp_suffix()}")
        return self._staged_path

    def move_to_final_destination(self) -> None:
        try:
            self._upload(self._staged_path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(self._staged_path)
            self._tmp_path_moved = True

    def _upload(self, staged_path: str) -> None:
        """Send the finished local file to ``path`` on ``fs``."""
        self._fs.put(staged_path, self.path)

    @property
    def fs(self) -> Any:
        """The file system the file is written to."""
        return self._fs
