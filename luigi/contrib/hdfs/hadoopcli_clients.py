"""HDFS through the ``hadoop fs`` command line (``[hdfs] client = hadoopcli``, the default).

Each operation is one ``hadoop fs`` command (``[hadoop] command``, default ``hadoop``); a command that fails
raises `HDFSCliError` with its exit code and output. ``[hadoop] version`` picks the dialect: ``cdh4``
(Hadoop 2 and later), ``cdh3`` or ``apache1``.
"""

from __future__ import annotations

import datetime
import logging
import os
import re
import subprocess
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from luigi.contrib.hdfs import abstract_client as hdfs_abstract_client
from luigi.contrib.hdfs import config as hdfs_config
from luigi.contrib.hdfs import error as hdfs_error
from luigi.target import FileAlreadyExists

__all__ = ["HdfsClient", "HdfsClientApache1", "HdfsClientCdh3", "create_hadoopcli_client"]

logger = logging.getLogger("luigi-interface")

_MISSING = re.compile(r"^.*No such file or directory$", re.MULTILINE)
# The JVM prints these before a command's own output on some clusters; they are not part of it.
_JVM_NOISE = ("OpenJDK 64-Bit Server VM warning", "It's highly recommended", "Java HotSpot(TM)")
# One entry of ``hadoop fs -ls``: permissions, replication (- for a directory), owner, group, size, date,
# time, path. The path is the rest of the line, so paths with spaces survive.
_LS_ENTRY = re.compile(
    r"^(?P<perm>[-dl]\S*)\s+\S+\s+\S+\s+\S+\s+(?P<size>\d+)\s+"
    r"(?P<date>\d{4}-\d{2}-\d{2})\s+(?P<time>\d{2}:\d{2})\s+(?P<path>.+)$"
)


def create_hadoopcli_client() -> HdfsClient:
    """The command-line client for the configured ``[hadoop] version``."""
    version = hdfs_config.get_configured_hadoop_version()
    clients: dict[str, type[HdfsClient]] = {
        "cdh4": HdfsClient,
        "cdh3": HdfsClientCdh3,
        "apache1": HdfsClientApache1,
    }
    if version not in clients:
        raise ValueError(
            f"[hadoop] version = {version!r} is not known: set it to cdh4 (Hadoop 2 and later), cdh3 "
            "or apache1"
        )
    return clients[version]()


def _run(command: Sequence[str]) -> subprocess.Popen[str]:
    """Start ``command``; a missing executable is an error naming the setting that chose it."""
    try:
        return subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            close_fds=True,
            universal_newlines=True,
        )
    except FileNotFoundError as err:
        raise FileNotFoundError(
            err.errno,
            f"Cannot run {command[0]!r} for HDFS: it is not on PATH; install the Hadoop client or set "
            "[hadoop] command to its path",
        ) from err


def _is_output(line: str) -> bool:
    return bool(line) and not line.startswith(_JVM_NOISE)


class HdfsClient(hdfs_abstract_client.HdfsFileSystem):
    """The ``hadoop fs`` client of Hadoop 2 and later (``[hadoop] version = cdh4``)."""

    recursive_listdir_cmd = ["-ls", "-R"]

    @staticmethod
    def call_check(command: Sequence[str]) -> str:
        """Run ``command``; return its standard output, or raise `HDFSCliError` if it exits non-zero."""
        process = _run(command)
        stdout, stderr = process.communicate()
        if process.returncode != 0:
            raise hdfs_error.HDFSCliError(command, process.returncode, stdout, stderr)
        return stdout

    def exists(self, path: str) -> bool:
        """True if ``path`` exists; False if HDFS says there is no such file; anything else raises."""
        command = [*hdfs_config.load_hadoop_cmd(), "fs", "-stat", path]
        process = _run(command)
        stdout, stderr = process.communicate()
        if process.returncode == 0:
            return True
        if _MISSING.search(stderr):
            return False
        raise hdfs_error.HDFSCliError(command, process.returncode, stdout, stderr)

    def move(self, path: str | list[str], dest: str) -> None:
        """Move ``path`` (or a list of paths, one at a time: not atomic) to ``dest``, creating its parent."""
        parent = os.path.dirname(dest.rstrip("/"))
        if parent and not self.exists(parent):
            self.mkdir(parent)
        if isinstance(path, (list, tuple)):
            warnings.warn("Renaming multiple files at once is not atomic.", stacklevel=2)
            sources = list(path)
        else:
            sources = [path]
        self.call_check([*hdfs_config.load_hadoop_cmd(), "fs", "-mv", *sources, dest])

    def remove(self, path: str, recursive: bool = True, skip_trash: bool = False) -> None:
        """``hadoop fs -rm [-r] [-skipTrash] path``."""
        command = [*hdfs_config.load_hadoop_cmd(), "fs", "-rm"]
        if recursive:
            command.append("-r")
        if skip_trash:
            command.append("-skipTrash")
        self.call_check([*command, path])

    def chmod(self, path: str, permissions: str, recursive: bool = False) -> str:
        """``hadoop fs -chmod [-R] permissions path``."""
        recurse = ["-R"] if recursive else []
        return self.call_check([*hdfs_config.load_hadoop_cmd(), "fs", "-chmod", *recurse, permissions, path])

    def chown(self, path: str, owner: str | None, group: str | None, recursive: bool = False) -> str:
        """``hadoop fs -chown [-R] owner:group path`` (either side may be empty)."""
        recurse = ["-R"] if recursive else []
        ownership = f"{owner or ''}:{group or ''}"
        return self.call_check([*hdfs_config.load_hadoop_cmd(), "fs", "-chown", *recurse, ownership, path])

    def count(self, path: str) -> dict[str, str]:
        """``hadoop fs -count``: ``{"content_size", "dir_count", "file_count"}``, as printed (strings)."""
        command = [*hdfs_config.load_hadoop_cmd(), "fs", "-count", path]
        stdout = self.call_check(command)
        for line in stdout.split("\n"):
            if _is_output(line.strip()):
                dir_count, file_count, content_size = line.split()[:3]
                return {"content_size": content_size, "dir_count": dir_count, "file_count": file_count}
        raise hdfs_error.HDFSCliError(command, 0, stdout, "the command printed no count")

    def copy(self, path: str, destination: str) -> None:
        """``hadoop fs -cp path destination``."""
        self.call_check([*hdfs_config.load_hadoop_cmd(), "fs", "-cp", path, destination])

    def put(self, local_path: str, destination: str) -> str:
        """``hadoop fs -put local_path destination``."""
        return self.call_check([*hdfs_config.load_hadoop_cmd(), "fs", "-put", local_path, destination])

    def get(self, path: str, local_destination: str) -> str:
        """``hadoop fs -get path local_destination``."""
        return self.call_check([*hdfs_config.load_hadoop_cmd(), "fs", "-get", path, local_destination])

    def getmerge(self, path: str, local_destination: str, new_line: bool = False) -> str:
        """``hadoop fs -getmerge [-nl] path local_destination``: the files under ``path`` in one file."""
        new_line_flag = ["-nl"] if new_line else []
        command = [*hdfs_config.load_hadoop_cmd(), "fs", "-getmerge", *new_line_flag, path, local_destination]
        return self.call_check(command)

    def mkdir(self, path: str, parents: bool = True, raise_if_exists: bool = False) -> None:
        """``hadoop fs -mkdir [-p] path``; an existing directory is an error only with ``raise_if_exists``."""
        if parents and raise_if_exists:
            raise NotImplementedError(
                "HdfsClient.mkdir cannot both create parents and fail on an existing directory "
                "(hadoop fs -mkdir -p accepts one): pass parents=False or raise_if_exists=False"
            )
        self._mkdir(
            [*hdfs_config.load_hadoop_cmd(), "fs", "-mkdir", *(["-p"] if parents else []), path],
            raise_if_exists,
        )

    def _mkdir(self, command: list[str], raise_if_exists: bool) -> None:
        try:
            self.call_check(command)
        except hdfs_error.HDFSCliError as err:
            if "File exists" not in err.stderr:
                raise
            if raise_if_exists:
                raise FileAlreadyExists(err.stderr) from err

    def listdir(
        self,
        path: str,
        ignore_directories: bool = False,
        ignore_files: bool = False,
        include_size: bool = False,
        include_type: bool = False,
        include_time: bool = False,
        recursive: bool = False,
    ) -> Iterator[Any]:
        """The entries ``hadoop fs -ls`` (``-R`` when ``recursive``) prints, as paths or tuples.

        With any ``include_*`` each entry is a tuple: the path, then the size (int), the type (``d`` or
        ``-``) and the modification time (a naive datetime, to the minute), those asked for, in that order.
        """
        listing = self.recursive_listdir_cmd if recursive else ["-ls"]
        stdout = self.call_check([*hdfs_config.load_hadoop_cmd(), "fs", *listing, path or "."])
        for line in stdout.split("\n"):
            entry = _LS_ENTRY.match(line.rstrip("\r"))
            if entry is None or not _is_output(line) or line.startswith("Found"):
                continue
            kind = entry["perm"][0]
            if (ignore_directories and kind == "d") or (ignore_files and kind == "-"):
                continue
            modified = datetime.datetime.strptime(f"{entry['date']}T{entry['time']}", "%Y-%m-%dT%H:%M")
            yield hdfs_abstract_client.listing_entry(
                entry["path"], int(entry["size"]), kind, modified, include_size, include_type, include_time
            )

    def touchz(self, path: str) -> None:
        """``hadoop fs -touchz path``: an empty file."""
        self.call_check([*hdfs_config.load_hadoop_cmd(), "fs", "-touchz", path])


class HdfsClientCdh3(HdfsClient):
    """The ``hadoop fs`` of CDH3: ``-mkdir`` makes parents without ``-p``; recursive removal is ``-rmr``."""

    def mkdir(self, path: str, parents: bool = True, raise_if_exists: bool = False) -> None:
        """``hadoop fs -mkdir path`` (which creates missing parents on this version)."""
        self._mkdir([*hdfs_config.load_hadoop_cmd(), "fs", "-mkdir", path], raise_if_exists)

    def remove(self, path: str, recursive: bool = True, skip_trash: bool = False) -> None:
        """``hadoop fs -rmr`` (recursive) or ``-rm``, with ``-skipTrash`` when asked."""
        command = [*hdfs_config.load_hadoop_cmd(), "fs", "-rmr" if recursive else "-rm"]
        if skip_trash:
            command.append("-skipTrash")
        self.call_check([*command, path])


class HdfsClientApache1(HdfsClientCdh3):
    """The ``hadoop fs`` of Apache Hadoop 1: ``-lsr`` lists recursively, ``-test -e`` checks existence."""

    recursive_listdir_cmd = ["-lsr"]

    def exists(self, path: str) -> bool:
        """``hadoop fs -test -e path``: exit 0 is True, 1 is False, anything else raises."""
        command = [*hdfs_config.load_hadoop_cmd(), "fs", "-test", "-e", path]
        process = _run(command)
        stdout, stderr = process.communicate()
        if process.returncode in (0, 1):
            return process.returncode == 0
        raise hdfs_error.HDFSCliError(command, process.returncode, stdout, stderr)
