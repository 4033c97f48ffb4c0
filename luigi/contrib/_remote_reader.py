"""A remote file read as a raw byte stream, as `luigi.format` readers wrap it (Azure Blob, Dropbox)."""

from __future__ import annotations

from typing import Any

__all__ = ["RemoteReader"]


class RemoteReader:
    """Read-only, unseekable bytes; a subclass gives ``read(n)`` (all the rest when ``n`` is None)."""

    closed = False

    def read(self, n: int | None = None) -> bytes:
        raise NotImplementedError(f"{type(self).__name__} must implement read()")

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
