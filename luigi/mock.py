"""An in-memory file system for tests, shared with forked worker processes.

The files live in a `multiprocessing.Manager().dict()` created on first use, so a parent that touches the
file system (for example `MockFileSystem().clear()` in a test's setup) before forking sees what the children
write. Importing this module starts no process.
"""

from __future__ import annotations

import codecs
import io
import multiprocessing
import sys
import threading
from collections.abc import MutableMapping
from typing import Any

from luigi.format import Format, get_default_format
from luigi.target import FileAlreadyExists, FileSystem, FileSystemTarget

__all__ = ["MockFileSystem", "MockTarget"]


class MockFileSystem(FileSystem):
    """A dict of path -> bytes; every instance shares the same data."""

    _data: MutableMapping[str, bytes] | None = None
    _manager: Any = None
    _lock = threading.Lock()

    def get_all_data(self) -> MutableMapping[str, bytes]:
        """The shared path -> bytes mapping (starting the Manager process the first time)."""
        cls = MockFileSystem
        if cls._data is None:
            with cls._lock:
                if cls._data is None:
                    cls._manager = multiprocessing.Manager()
                    cls._data = cls._manager.dict()
        assert cls._data is not None
        return cls._data

    def get_data(self, fn: str) -> bytes:
        """The bytes stored at `fn`."""
        try:
            return self.get_all_data()[fn]
        except KeyError:
            raise FileNotFoundError(f"No mock file {fn!r}") from None

    def exists(self, path: str) -> bool:
        return path in self.get_all_data()

    def isdir(self, path: str) -> bool:
        """True if some file lives below `path` (directories exist only through their files)."""
        prefix = path.rstrip("/") + "/"
        return any(key.startswith(prefix) for key in self.get_all_data().keys())

    def listdir(self, path: str) -> list[str]:
        """Every stored path that starts with `path`, sorted."""
        return sorted(key for key in self.get_all_data().keys() if key.startswith(path))

    def mkdir(self, path: str, parents: bool = True, raise_if_exists: bool = False) -> None:
        """Nothing to do: directories are implied by the files in them."""

    def copy(self, path: str, dest: str, raise_if_exists: bool = False) -> None:
        if raise_if_exists and dest in self.get_all_data():
            raise FileAlreadyExists(f"Cannot copy {path!r} to {dest!r}: the destination exists")
        self.get_all_data()[dest] = self.get_data(path)

    def move(self, path: str, dest: str, raise_if_exists: bool = False) -> None:
        """Move a file, or every file below a directory path."""
        data = self.get_all_data()
        if raise_if_exists and dest in data:
            raise FileAlreadyExists(f"Cannot move {path!r} to {dest!r}: the destination exists")
        if path in data:
            data[dest] = data.pop(path)
            return
        if not self.isdir(path):
            raise FileNotFoundError(f"Cannot move {path!r}: no such mock file or directory")
        source_dir, dest_dir = path.rstrip("/") + "/", dest.rstrip("/") + "/"
        for key in self.listdir(source_dir):
            data[dest_dir + key[len(source_dir) :]] = data.pop(key)

    def remove(self, path: str, recursive: bool = True, skip_trash: bool = True) -> None:
        """Remove `path`; when `recursive`, every stored path starting with `path`."""
        data = self.get_all_data()
        if recursive:
            for key in self.listdir(path):
                data.pop(key, None)
        elif data.pop(path, None) is None:
            raise FileNotFoundError(f"Cannot remove {path!r}: no such mock file")

    def clear(self) -> None:
        """Forget every file."""
        self.get_all_data().clear()


class _MockWriteBuffer(io.BytesIO):
    """Collects written bytes and stores them under the target's path on a successful close.

    With ``mirror_on_stderr`` each chunk is echoed to ``sys.stderr`` as it arrives, after a single
    ``"<path>: "`` prefix for the whole handle.
    """

    def __init__(self, target: MockTarget) -> None:
        super().__init__()
        self._target = target
        self._mirror_decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._mirror_started = False

    def write(self, data: Any) -> int:
        written = super().write(data)
        if self._target._mirror_on_stderr and written:
            self._mirror(bytes(data))
        return written

    def _mirror(self, chunk: bytes) -> None:
        if not self._mirror_started:
            self._mirror_started = True
            sys.stderr.write(f"{self._target.path}: ")
        sys.stderr.write(self._mirror_decoder.decode(chunk))  # incremental: a character may span chunks

    def close(self) -> None:
        if not self.closed:
            self._target.fs.get_all_data()[self._target.path] = self.getvalue()
        super().close()

    def discard(self) -> None:
        """Close without storing anything."""
        super().close()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.discard()

    def __del__(self) -> None:
        # Collected while open means unfinished, as for LocalTarget: store nothing.
        self.discard()


class MockTarget(FileSystemTarget):
    """A file in the shared `MockFileSystem`; writes become visible when the stream closes successfully."""

    fs = MockFileSystem()

    def __init__(
        self,
        fn: str,
        is_tmp: bool | None = None,
        mirror_on_stderr: bool = False,
        format: Format | None = None,
    ) -> None:
        super().__init__(fn)
        self.is_tmp = is_tmp
        self._mirror_on_stderr = mirror_on_stderr
        self.format = format if format is not None else get_default_format()

    def move(self, path: str, raise_if_exists: bool = False) -> None:
        self.fs.move(self.path, path, raise_if_exists)

    def rename(self, *args: Any, **kwargs: Any) -> None:
        """Alias of `move`."""
        self.move(*args, **kwargs)

    def open(self, mode: str = "r") -> Any:
        """Open for reading ('r') or writing ('w'); 'b' and 't' are accepted and ignored."""
        if not isinstance(mode, str):
            raise TypeError(f"MockTarget.open() mode must be a str such as 'r' or 'w', got {mode!r}")
        direction = mode.replace("b", "").replace("t", "")
        if direction == "w":
            return self.format.pipe_writer(_MockWriteBuffer(self))
        if direction == "r":
            return self.format.pipe_reader(io.BytesIO(self.fs.get_data(self.path)))
        raise ValueError(
            f"Unsupported mode {mode!r} for MockTarget {self.path!r}: "
            "use 'r' or 'w' (optionally with 'b' or 't')"
        )
