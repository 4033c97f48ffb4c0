"""Targets: things a task produces, and the file-system abstraction that file-like targets live on."""

from __future__ import annotations

import abc
import contextlib
import io
import os
import random
import warnings
from collections.abc import Iterator
from typing import IO, Any

__all__ = [
    "AtomicLocalFile",
    "FileAlreadyExists",
    "FileSystem",
    "FileSystemException",
    "FileSystemTarget",
    "MissingParentDirectory",
    "NotADirectory",
    "Target",
]

_PATH_SEPARATORS = "/\\"  # a directory target may end in either, whatever the OS


def _has_glob_characters(path: str) -> bool:
    # Four substring searches beat building a set from the path: exists() runs this for every check.
    return "*" in path or "?" in path or "[" in path or "{" in path


class Target(metaclass=abc.ABCMeta):
    """Something a task outputs or depends on; a task is complete when all its output targets exist."""

    @abc.abstractmethod
    def exists(self) -> bool:
        """Return True if the target has been produced."""


class FileSystemException(Exception):
    """Base class for errors raised by `FileSystem` operations."""


class FileAlreadyExists(FileSystemException):
    """A path that had to be free (mkdir with raise_if_exists, a non-overwriting move) already exists."""


class MissingParentDirectory(FileSystemException):
    """A non-recursive operation needed a parent directory that does not exist."""


class NotADirectory(FileSystemException):
    """A path used as a directory exists but is a file."""


class FileSystem(metaclass=abc.ABCMeta):
    """The operations a `FileSystemTarget` needs from the storage it lives on (local disk, HDFS, S3, ...)."""

    @abc.abstractmethod
    def exists(self, path: str) -> bool:
        """Return True if `path` exists (file or directory)."""

    @abc.abstractmethod
    def remove(self, path: str, recursive: bool = True, skip_trash: bool = True) -> None:
        """Remove `path`; directories only when `recursive`."""

    def mkdir(self, path: str, parents: bool = True, raise_if_exists: bool = False) -> None:
        """Create directory `path`; file systems without directories may leave this unimplemented."""
        raise NotImplementedError(f"mkdir() is not implemented on {type(self).__name__}")

    def isdir(self, path: str) -> bool:
        """Return True if `path` is a directory."""
        raise NotImplementedError(f"isdir() is not implemented on {type(self).__name__}")

    def listdir(self, path: str) -> Any:
        """Return (or yield) the file paths under `path`."""
        raise NotImplementedError(f"listdir() is not implemented on {type(self).__name__}")

    def move(self, path: str, dest: str) -> None:
        """Move `path` to `dest`."""
        raise NotImplementedError(f"move() is not implemented on {type(self).__name__}")

    def rename(self, *args: Any, **kwargs: Any) -> None:
        """Alias of `move`."""
        self.move(*args, **kwargs)

    def rename_dont_move(self, path: str, dest: str) -> None:
        """Move `path` to `dest` unless `dest` exists (then raise `FileAlreadyExists`).

        This generic version checks then moves, which is not atomic; file systems that can do better override
        it.
        """
        warnings.warn(
            f"{type(self).__name__} has no atomic rename_dont_move(); checking that {dest!r} is free, then "
            "moving, which another writer could race",
            stacklevel=2,
        )
        if self.exists(dest):
            raise FileAlreadyExists(f"Cannot move {path!r} to {dest!r}: the destination already exists")
        self.move(path, dest)

    def copy(self, path: str, dest: str) -> None:
        """Copy `path` to `dest`."""
        raise NotImplementedError(f"copy() is not implemented on {type(self).__name__}")


def _coerce_path(path: Any) -> str:
    """Turn a str, bytes or os.PathLike into the str path targets store."""
    if type(path) is str:  # the common case, and cheaper than the PathLike check below
        return path
    if path is None:
        raise TypeError("A file system target needs a path, got None")
    if isinstance(path, (os.PathLike, bytes)):
        return os.fsdecode(os.fspath(path))
    return str(path)


class FileSystemTarget(Target):
    """A target that is a path on some `FileSystem`; subclasses supply `fs` and `open`."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path: str = _coerce_path(path)

    @property
    @abc.abstractmethod
    def fs(self) -> FileSystem:
        """The file system this target's path lives on."""

    @abc.abstractmethod
    def open(self, mode: str) -> IO[Any]:
        """Open the target for reading ('r') or writing ('w')."""

    def exists(self) -> bool:
        """Return True if the path exists; warns when the path has glob characters, which are not expanded."""
        if _has_glob_characters(self.path):
            warnings.warn(
                f"The path {self.path!r} contains glob characters (one of * ? [ {{); exists() checks that "
                "literal path. If a wildcard was meant, the dataset may be incomplete; override exists() to "
                "silence this warning",
                stacklevel=2,
            )
        return self.fs.exists(self.path)

    def remove(self) -> None:
        """Remove the path from its file system."""
        self.fs.remove(self.path)

    @contextlib.contextmanager
    def temporary_path(self) -> Iterator[str]:
        """Yield a sibling temporary path to write to; it is moved onto `path` only if the block succeeds.

        The temporary path is `<path>-luigi-tmp-<10 digits>`; a directory target's trailing `/` or `\\` is
        kept at the end (`out/` gives `out-luigi-tmp-0123456789/`). The parent directory is created first.
        """
        bare_path = self.path.rstrip(_PATH_SEPARATORS)
        trailing_separator = self.path[-1] if bare_path != self.path else ""
        tmp_path = f"{bare_path}-luigi-tmp-{random.randrange(10**10):010d}{trailing_separator}"
        parent = os.path.dirname(bare_path)
        if parent:
            self.fs.mkdir(parent, parents=True, raise_if_exists=False)
        yield tmp_path
        self.fs.rename_dont_move(tmp_path, self.path)

    def _touchz(self) -> None:
        """Create the target as an empty file."""
        with self.open("w"):
            pass

    def __str__(self) -> str:
        return self.path

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r})"


class AtomicLocalFile(io.BufferedWriter):
    """A local file written under a temporary name and moved into place on `close()`.

    Leaving a `with` block through an exception discards the temporary file instead of committing it, and so
    does garbage collection of a file that was never closed.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.__tmp_path = self.generate_tmp_path(path)
        super().__init__(io.FileIO(self.__tmp_path, "w"))
        self.__discarded = False
        self._tmp_path_moved = False  # set by a move_to_final_destination that leaves nothing at tmp_path

    def generate_tmp_path(self, path: str) -> str:
        """Return the temporary path to write to before `move_to_final_destination`."""
        raise NotImplementedError(f"{type(self).__name__} must implement generate_tmp_path()")

    def move_to_final_destination(self) -> None:
        """Put the finished temporary file at `path`."""
        raise NotImplementedError(f"{type(self).__name__} must implement move_to_final_destination()")

    @property
    def tmp_path(self) -> str:
        """Where the data is written until it is committed."""
        return self.__tmp_path

    def close(self) -> None:
        """Flush, close the temporary file and commit it (once; later calls do nothing)."""
        if self.closed:
            return
        super().close()
        self.move_to_final_destination()

    def abort(self) -> None:
        """Close without committing and delete the temporary file."""
        if not self.closed:
            self.__discarded = True
            self.raw.close()  # closing the raw file skips flushing the buffer into a file we delete anyway
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.__tmp_path)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            self.abort()
            return
        self.close()

    def __del__(self) -> None:
        # Unclosed means unfinished: never commit from the finalizer.
        if getattr(self, "_AtomicLocalFile__discarded", True):
            return  # discarded already, or __init__ failed before the file existed
        try:
            closed = self.closed
        except ValueError:  # the buffered writer itself was never initialised
            return
        if not closed:
            self.abort()
        elif not self._tmp_path_moved and os.path.exists(self.__tmp_path):  # flushed, not moved away
            with contextlib.suppress(OSError):
                os.remove(self.__tmp_path)

