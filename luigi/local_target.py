"""Files on the local disk: `LocalFileSystem`, and `LocalTarget`, whose writes appear atomically on close."""

from __future__ import annotations

import errno
import io
import os
import random
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from typing import Any

from luigi.format import Format, get_default_format
from luigi.target import (
    AtomicLocalFile,
    FileAlreadyExists,
    FileSystem,
    FileSystemTarget,
    MissingParentDirectory,
    NotADirectory,
)

__all__ = ["LocalFileSystem", "LocalTarget", "atomic_file"]


class atomic_file(AtomicLocalFile):
    """A local file written as `<path>-luigi-tmp-<9 digits>` and `os.replace`d onto `path` when closed."""

    def generate_tmp_path(self, path: str) -> str:
        return f"{path}-luigi-tmp-{random.randrange(10**9):09d}"

    def move_to_final_destination(self) -> None:
        os.replace(self.tmp_path, self.path)
        self._tmp_path_moved = True  # so the finalizer need not look for a leftover temporary file


class LocalFileSystem(FileSystem):
    """The local disk, through `os` and `shutil`."""

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def mkdir(self, path: str, parents: bool = True, raise_if_exists: bool = False) -> None:
        """Create directory `path` (and its parents when `parents`)."""
        if os.path.exists(path):
            if not os.path.isdir(path):
                raise NotADirectory(f"Cannot create directory {path!r}: a file with that name exists")
            if raise_if_exists:
                raise FileAlreadyExists(f"Cannot create directory {path!r}: it already exists")
            return
        if not parents:
            parent = os.path.dirname(os.path.normpath(path))
            if parent and not os.path.isdir(parent):
                raise MissingParentDirectory(
                    f"Cannot create directory {path!r}: its parent {parent!r} does not exist "
                    "(pass parents=True to create it)"
                )
        try:
            if parents:
                os.makedirs(path, exist_ok=not raise_if_exists)
            else:
                os.mkdir(path)
        except NotADirectoryError as err:
            raise NotADirectory(
                f"Cannot create directory {path!r}: part of its parent path is a file"
            ) from err
        except FileExistsError as err:  # another process made it between our check and now
            if raise_if_exists or not os.path.isdir(path):
                raise FileAlreadyExists(f"Cannot create directory {path!r}: it already exists") from err

    def listdir(self, path: str) -> Iterator[str]:
        """Yield the path of every file below `path`, recursively."""
        for directory, _subdirs, files in os.walk(path):
            for name in files:
                yield os.path.join(directory, name)

    def remove(self, path: str, recursive: bool = True, skip_trash: bool = True) -> None:
        """Remove a file, or a directory tree when `recursive`."""
        if recursive and self.isdir(path):
            shutil.rmtree(path)
        else:
            os.remove(path)

    def copy(self, old_path: str, new_path: str, raise_if_exists: bool = False) -> None:
        """Copy file `old_path` to `new_path`, creating the destination's parent directory."""
        if raise_if_exists and os.path.exists(new_path):
            raise FileAlreadyExists(f"Cannot copy {old_path!r} to {new_path!r}: the destination exists")
        self._make_parent(new_path)
        shutil.copy(old_path, new_path)

    def move(self, old_path: str, new_path: str, raise_if_exists: bool = False) -> None:
        """Move a file or directory, creating the destination's parent; copies when crossing devices."""
        if raise_if_exists and os.path.exists(new_path):
            raise FileAlreadyExists(f"Cannot move {old_path!r} to {new_path!r}: the destination exists")
        self._make_parent(new_path)
        try:
            os.replace(old_path, new_path)
        except OSError as err:
            if err.errno != errno.EXDEV:
                raise
            self._move_across_devices(old_path, new_path)

    def rename_dont_move(self, path: str, dest: str) -> None:
        """Move `path` to `dest`, raising `FileAlreadyExists` if `dest` exists."""
        self.move(path, dest, raise_if_exists=True)

    def _make_parent(self, path: str) -> None:
        parent = os.path.dirname(os.path.normpath(path))
        if parent and not os.path.exists(parent):
            self.mkdir(parent)

    @staticmethod
    def _move_across_devices(old_path: str, new_path: str) -> None:
        # Copy next to the destination first, so the destination itself still changes in one os.replace.
        staging = f"{new_path.rstrip('/')}-luigi-tmp-{random.randrange(10**9):09d}"
        if os.path.isdir(old_path):
            shutil.copytree(old_path, staging, symlinks=True)
            os.replace(staging, new_path)
            shutil.rmtree(old_path)
        else:
            shutil.copy2(old_path, staging)
            os.replace(staging, new_path)
            os.remove(old_path)


class LocalTarget(FileSystemTarget):
    """A file on the local disk; `open('w')` writes a temporary sibling that replaces the file on close."""

    fs = LocalFileSystem()

    def __init__(
        self, path: str | os.PathLike[str] | None = None, format: Format | None = None, is_tmp: bool = False
    ) -> None:
        if format is None:
            format = get_default_format()
        if path is None:
            if not is_tmp:
                raise ValueError("LocalTarget needs a path, or is_tmp=True to make a temporary file")
            path = os.path.join(tempfile.gettempdir(), f"luigi-tmp-{random.randrange(10**9):09d}")
        super().__init__(path)
        self.format = format
        self.is_tmp = is_tmp

    def makedirs(self) -> None:
        """Create the directory this file goes in, if missing."""
        parent = os.path.dirname(os.path.normpath(self.path))
        # One stat when the directory is there (the usual case); makedirs would also try mkdir and raise.
        if parent and not os.path.isdir(parent):
            os.makedirs(parent, exist_ok=True)

    def open(self, mode: str = "r") -> Any:
        """Open for reading ('r') or atomic writing ('w'); 'b' and 't' are accepted and ignored.

        What the stream accepts or yields (str or bytes) is decided by the target's format.
        """
        direction = mode.replace("b", "").replace("t", "")
        if direction == "w":
            self.makedirs()
            return self.format.pipe_writer(atomic_file(self.path))
        if direction == "r":
            return self.format.pipe_reader(io.BufferedReader(io.FileIO(self.path, "r")))
        raise ValueError(
            f"Unsupported mode {mode!r} for LocalTarget {self.path!r}: "
            "use 'r' or 'w' (optionally with 'b' or 't')"
        )

    def move(self, new_path: str, raise_if_exists: bool = False) -> None:
        self.fs.move(self.path, new_path, raise_if_exists=raise_if_exists)

    def move_dir(self, new_path: str) -> None:
        self.move(new_path)

    def remove(self) -> None:
        self.fs.remove(self.path)

    def copy(self, new_path: str, raise_if_exists: bool = False) -> None:
        self.fs.copy(self.path, new_path, raise_if_exists)

    @property
    def fn(self) -> str:
        """Deprecated alias of `path`."""
        warnings.warn("LocalTarget.fn is deprecated; use LocalTarget.path", DeprecationWarning, stacklevel=2)
        return self.path

    def __del__(self) -> None:
        if getattr(self, "is_tmp", False) and os.path.exists(self.path):
            try:
                self.remove()
            except OSError:  # a finalizer must not raise; the temp dir is cleaned eventually anyway
                pass
