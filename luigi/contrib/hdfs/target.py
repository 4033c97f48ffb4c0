"""HdfsTarget: a task output on HDFS, written atomically, read and written through a format."""

from __future__ import annotations

import contextlib
import logging
import random
import warnings
from typing import Any
from urllib.parse import urlsplit

import luigi.format
from luigi.contrib.hdfs import abstract_client as hdfs_abstract_client
from luigi.contrib.hdfs import clients as hdfs_clients
from luigi.contrib.hdfs import config as hdfs_config
from luigi.contrib.hdfs import format as hdfs_format
from luigi.target import FileSystemTarget

__all__ = ["HdfsFlagTarget", "HdfsTarget"]

logger = logging.getLogger("luigi-interface")


def _hdfs_format(format: Any) -> hdfs_format.CompatibleHdfsFormat:  # noqa: A002
    """Any format, ending in HDFS: ``Text`` becomes ``Text >> Plain``; pre-Format objects are adapted."""
    if format is None:
        format = luigi.format.get_default_format() >> hdfs_format.Plain
    # Formats from before luigi.format.Format had only hdfs_writer/hdfs_reader: user objects, so duck-typed.
    old_style = (hasattr(format, "hdfs_writer") or hasattr(format, "hdfs_reader")) and not hasattr(
        format, "output"
    )
    if old_style:
        warnings.warn(
            "A format with hdfs_writer/hdfs_reader but no output attribute is deprecated: subclass "
            "luigi.format.Format",
            DeprecationWarning,
            stacklevel=3,
        )
        return hdfs_format.CompatibleHdfsFormat(format.hdfs_writer, format.hdfs_reader, None)
    if format.output != "hdfs":
        format = format >> hdfs_format.Plain
    return hdfs_format.CompatibleHdfsFormat(format.pipe_writer, format.pipe_reader, format.input)


class HdfsTarget(FileSystemTarget):
    """A file (or directory, with `PlainDir`) on HDFS, reached through ``fs`` or the configured client."""

    def __init__(
        self,
        path: str | None = None,
        format: Any = None,  # noqa: A002
        is_tmp: bool = False,
        fs: hdfs_abstract_client.HdfsFileSystem | None = None,
    ) -> None:
        if path is None:
            if not is_tmp:
                raise ValueError("HdfsTarget needs a path, or is_tmp=True for a temporary one")
            path = hdfs_config.tmppath()
        super().__init__(path)
        if ":" in urlsplit(self.path).path:
            raise ValueError("colon is not allowed in hdfs filenames")
        self.format = _hdfs_format(format)
        self.is_tmp = is_tmp
        self._fs = fs or hdfs_clients.get_autoconfig_client()

    @property
    def fs(self) -> hdfs_abstract_client.HdfsFileSystem:
        """The client this target's path is reached through."""
        return self._fs

    def __del__(self) -> None:
        # A temporary target is removed when it is collected (best effort: the interpreter may be exiting).
        if getattr(self, "is_tmp", False) and getattr(self, "_fs", None) is not None:
            with contextlib.suppress(Exception):
                if self.exists():
                    self.remove(skip_trash=True)

    def glob_exists(self, expected_files: int) -> bool:
        """True if the path (a glob) matches exactly ``expected_files`` entries."""
        return len(list(self.fs.listdir(self.path))) == expected_files

    def open(self, mode: str = "r") -> Any:
        """A reader (``"r"``) or an atomic writer (``"w"``) through the target's format."""
        if mode == "r":
            return self.format.pipe_reader(self.path)
        if mode == "w":
            return self.format.pipe_writer(self.path)
        raise ValueError(f"Unsupported open mode {mode!r} for an HdfsTarget: use 'r' or 'w'")

    def remove(self, skip_trash: bool = False) -> None:
        """Delete the path (a directory with its contents), into the trash unless ``skip_trash``."""
        self.fs.remove(self.path, skip_trash=skip_trash)

    def rename(self, path: str | HdfsTarget, raise_if_exists: bool = False) -> None:
        """Move the data to ``path`` (a string or target); this target keeps pointing at the old path."""
        destination = path.path if isinstance(path, HdfsTarget) else path
        if raise_if_exists and self.fs.exists(destination):
            raise RuntimeError(f"Destination exists: {destination}")
        self.fs.rename(self.path, destination)

    def move(self, path: str | HdfsTarget, raise_if_exists: bool = False) -> None:
        """Alias of `rename`."""
        self.rename(path, raise_if_exists=raise_if_exists)

    def move_dir(self, path: str) -> None:
        """Move the directory to ``path``, failing if ``path`` exists rather than moving inside it."""
        self.fs.rename_dont_move(self.path, path)

    def copy(self, dst_dir: str) -> Any:
        """Copy the path to ``dst_dir`` on HDFS."""
        return self.fs.copy(self.path, dst_dir)

    def is_writable(self) -> bool:
        """True if a file can be created in the nearest existing directory on the way to the path."""
        if "/" not in self.path:
            return False
        parts = self.path.split("/")
        directory = "/"
        for keep in range(len(parts), 0, -1):
            directory = "/".join(parts[:keep]) + "/"
            if self.fs.exists(directory):
                break
        return self._is_writable(directory)

    def _is_writable(self, directory: str) -> bool:
        probe = f"{directory}.test_write_access-{random.randrange(10**10):09d}"
        try:
            self.fs.touchz(probe)
            self.fs.remove(probe, recursive=False, skip_trash=True)
        except Exception as err:  # each client refuses in its own error type; any refusal means "no"
            logger.info("%s is not writable: %s", directory, err)
            return False
        return True


class HdfsFlagTarget(HdfsTarget):
    """A directory output that exists once its flag file (default ``_SUCCESS``) does, as Hadoop jobs write."""

    def __init__(
        self,
        path: str,
        format: Any = None,  # noqa: A002
        client: hdfs_abstract_client.HdfsFileSystem | None = None,
        flag: str = "_SUCCESS",
    ) -> None:
        if path[-1] != "/":
            raise ValueError(
                f"HdfsFlagTarget needs a directory path ending with '/', got {path!r}: add the trailing slash"
            )
        super().__init__(path, format, fs=client)
        self.flag = flag

    def exists(self) -> bool:
        """True if the flag file inside the directory exists."""
        return self.fs.exists(self.path + self.flag)
