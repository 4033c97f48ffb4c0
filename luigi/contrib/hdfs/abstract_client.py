"""HdfsFileSystem: the operations every HDFS client offers, whichever way it reaches the cluster."""

from __future__ import annotations

import abc
from collections.abc import Iterable
from typing import Any

import luigi.target

__all__ = ["HdfsFileSystem", "listing_entry"]


class HdfsFileSystem(luigi.target.FileSystem, metaclass=abc.ABCMeta):
    """A `FileSystem` on HDFS; `rename` is `move`, as HDFS renames are moves."""

    def rename(self, path: Any, dest: str) -> Any:
        """Alias of `move`."""
        return self.move(path, dest)

    @abc.abstractmethod
    def remove(self, path: str, recursive: bool = True, skip_trash: bool = False) -> Any:
        """Delete ``path`` (a directory only when ``recursive``), into the trash unless ``skip_trash``."""

    @abc.abstractmethod
    def chmod(self, path: str, permissions: str, recursive: bool = False) -> Any:
        """Set the permissions of ``path``."""

    @abc.abstractmethod
    def chown(self, path: str, owner: str | None, group: str | None, recursive: bool = False) -> Any:
        """Set the owner and group of ``path``."""

    @abc.abstractmethod
    def count(self, path: str) -> dict[str, Any]:
        """``{"content_size", "dir_count", "file_count"}`` of ``path``."""

    @abc.abstractmethod
    def copy(self, path: str, destination: str) -> Any:
        """Copy ``path`` to ``destination`` on HDFS."""

    @abc.abstractmethod
    def put(self, local_path: str, destination: str) -> Any:
        """Upload a local file to ``destination``."""

    @abc.abstractmethod
    def get(self, path: str, local_destination: str) -> Any:
        """Download ``path`` to a local file."""

    @abc.abstractmethod
    def mkdir(self, path: str, parents: bool = True, raise_if_exists: bool = False) -> None:
        """Create the directory ``path``."""

    @abc.abstractmethod
    def listdir(
        self,
        path: str,
        ignore_directories: bool = False,
        ignore_files: bool = False,
        include_size: bool = False,
        include_type: bool = False,
        include_time: bool = False,
        recursive: bool = False,
    ) -> Iterable[Any]:
        """The paths under ``path`` (or tuples with the size, type and time asked for)."""

    @abc.abstractmethod
    def touchz(self, path: str) -> None:
        """Create ``path`` as an empty file."""


def listing_entry(
    path: str,
    size: int,
    kind: str,
    modified: Any,
    include_size: bool,
    include_type: bool,
    include_time: bool,
) -> Any:
    """What ``listdir`` gives for one entry: the path alone, or a tuple of it and the fields asked for."""
    fields = ((size, include_size), (kind, include_type), (modified, include_time))
    extra = [value for value, wanted in fields if wanted]
    return (path, *extra) if extra else path
