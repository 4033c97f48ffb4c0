"""WebHdfsTarget: an HDFS file reached only over WebHDFS (deprecated in Luigi; `HdfsTarget` with
``[hdfs] client = webhdfs`` is its successor). Needs the ``hdfs`` extra (``pip install 'luigi[hdfs]'``).

Reads stream the file from the NameNode; writes fill a local temporary file that ``close()`` uploads to a
temporary HDFS path and renames onto the target, so a failed task leaves nothing at the path.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import tempfile
from collections.abc import Iterator
from typing import Any

from luigi.contrib.hdfs import config as hdfs_config
from luigi.contrib.hdfs.webhdfs_client import WebHdfsClient
from luigi.format import Format, get_default_format
from luigi.target import AtomicLocalFile, FileAlreadyExists, FileSystemTarget

__all__ = ["AtomicWebHdfsFile", "ReadableWebHdfsFile", "WebHdfsClient", "WebHdfsTarget"]

_CHUNK = 64 * 1024


class WebHdfsTarget(FileSystemTarget):
    """A file on HDFS read and written over WebHDFS with ``client`` (default: `WebHdfsClient()`)."""

    def __init__(self, path: str, client: WebHdfsClient | None = None, format: Format | None = None) -> None:  # noqa: A002
        super().__init__(path)
        self._fs = client or WebHdfsClient()
        self.format = format if format is not None else get_default_format()

    @property
    def fs(self) -> WebHdfsClient:
        return self._fs

    def open(self, mode: str = "r") -> Any:
        """A streaming reader (``"r"``) or an atomic writer (``"w"``) through the target's format."""
        if mode == "r":
            return self.format.pipe_reader(ReadableWebHdfsFile(path=self.path, client=self.fs))
        if mode == "w":
            return self.format.pipe_writer(AtomicWebHdfsFile(path=self.path, client=self.fs))
        raise ValueError(f"Unsupported open mode {mode!r} for a WebHdfsTarget: use 'r' or 'w'")


class ReadableWebHdfsFile(io.BufferedIOBase):
    """The bytes of an HDFS file, streamed over WebHDFS as they are read."""

    def __init__(self, path: str, client: WebHdfsClient) -> None:
        self.path = path
        self.client = client
        self.generator: Iterator[bytes] | None = None
        self._pending = b""

    def readable(self) -> bool:
        return True

    def _chunks(self) -> Iterator[bytes]:
        if self.generator is None:
            self.generator = self.client.read(self.path, chunk_size=_CHUNK)
        return self.generator

    def read(self, size: int | None = -1) -> bytes:
        """Up to ``size`` bytes (all the rest when ``size`` is negative or None)."""
        want = None if size is None or size < 0 else size
        chunks = self._chunks()
        while want is None or len(self._pending) < want:
            chunk = next(chunks, b"")
            if not chunk:
                break
            self._pending += chunk
        if want is None:
            data, self._pending = self._pending, b""
        else:
            data, self._pending = self._pending[:want], self._pending[want:]
        return data

    def read1(self, size: int = -1) -> bytes:
        return self.read(size if size >= 0 else _CHUNK)

    def readlines(self, char: Any = "\n") -> Any:  # Luigi's (char), not IOBase's (hint)
        """The file's lines, split on ``char`` and without it."""
        return self.client.read(self.path, buffer_char=char)

    def __iter__(self) -> Iterator[bytes]:
        yield from self.readlines()

    def close(self) -> None:
        if self.generator is not None and hasattr(self.generator, "close"):
            self.generator.close()
        super().close()

    def __enter__(self) -> ReadableWebHdfsFile:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class AtomicWebHdfsFile(AtomicLocalFile):
    """A local temporary file that ``close()`` uploads beside the target and renames onto it."""

    def __init__(self, path: str, client: WebHdfsClient) -> None:
        self.client = client
        super().__init__(path)

    def generate_tmp_path(self, path: str) -> str:
        return os.path.join(tempfile.gettempdir(), f"luigi-webhdfs-{random.randrange(10**10):010d}")

    def move_to_final_destination(self) -> None:
        if self.client.exists(self.path):
            raise FileAlreadyExists(
                f"{self.path!r} exists on HDFS already: remove it before writing it again"
            )
        remote_tmp = hdfs_config.tmppath(self.path)
        try:
            self.client.upload(remote_tmp, self.tmp_path)
            self.client.move(remote_tmp, self.path)
        except BaseException:
            with contextlib.suppress(Exception):  # the upload's own failure is the one to report
                if self.client.exists(remote_tmp):
                    self.client.remove(remote_tmp, skip_trash=True)
            raise
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.tmp_path)
        self._tmp_path_moved = True
