"""Reading and writing HDFS files as byte streams through ``hadoop fs -cat`` and ``hadoop fs -put -``.

Writes are atomic: the data goes to a temporary path (`tmppath`) and is renamed onto the target only when
the writer closes cleanly; an exception, ``abort()`` or garbage collection before ``close()`` removes it.
The renames and removals go through the configured client (``[hdfs] client``).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator
from typing import Any

from luigi.contrib.hdfs import clients as hdfs_clients
from luigi.contrib.hdfs import config as hdfs_config
from luigi.contrib.hdfs import error as hdfs_error
from luigi.format import Format, InputPipeProcessWrapper, OutputPipeProcessWrapper

__all__ = [
    "CompatibleHdfsFormat",
    "HdfsAtomicWriteDirPipe",
    "HdfsAtomicWriteError",
    "HdfsAtomicWritePipe",
    "HdfsReadPipe",
    "Plain",
    "PlainDir",
    "PlainDirFormat",
    "PlainFormat",
]

logger = logging.getLogger("luigi-interface")

# What ``hadoop fs -put`` writes before renaming the finished file into place.
_COPYING_SUFFIX = "._COPYING_"


class HdfsAtomicWriteError(IOError):
    """The finished temporary file could not be put in place of the target."""


@contextlib.contextmanager
def _starting_hadoop() -> Iterator[None]:
    """Name the setting and the alternative when the ``hadoop`` command a pipe runs is missing."""
    try:
        yield
    except FileNotFoundError as err:
        raise FileNotFoundError(
            err.errno,
            f"Cannot run {hdfs_config.load_hadoop_cmd()[0]!r}: HdfsTarget streams data through the hadoop "
            "command whichever [hdfs] client is set; install the Hadoop client or set [hadoop] command "
            "(luigi.contrib.webhdfs.WebHdfsTarget needs only WebHDFS)",
        ) from err


class HdfsReadPipe(InputPipeProcessWrapper):
    """The bytes of an HDFS path (globs allowed), read from ``hadoop fs -cat``."""

    def __init__(self, path: str) -> None:
        with _starting_hadoop():
            super().__init__([*hdfs_config.load_hadoop_cmd(), "fs", "-cat", path])


def _remove_quietly(paths: list[str], recursive: bool = True) -> None:
    """Remove what a failed write left behind, without hiding the failure that got us here."""
    for path in paths:
        try:
            if hdfs_clients.exists(path):
                hdfs_clients.remove(path, recursive=recursive, skip_trash=True)
        except Exception:  # cleaning up after a failure: log it and let the first error be the one raised
            logger.warning("Could not remove the temporary HDFS path %s", path, exc_info=True)


def _check_renamed(result: Any, path: str) -> None:
    if isinstance(result, list) and not all(item["result"] for item in result):
        raise HdfsAtomicWriteError(f"Atomic write to {path} failed")


class HdfsAtomicWritePipe(OutputPipeProcessWrapper):
    """Write to ``hadoop fs -put - <tmppath>``; on a clean close, replace ``path`` with the temporary file."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.tmppath = hdfs_config.tmppath(self.path)
        hdfs_clients.mkdir(os.path.dirname(self.tmppath), parents=True, raise_if_exists=False)
        with _starting_hadoop():
            super().__init__([*hdfs_config.load_hadoop_cmd(), "fs", "-put", "-", self.tmppath])

    def abort(self) -> None:
        """Stop the upload and remove the temporary file (and ``-put``'s unfinished copy of it)."""
        already_done = self.closed
        super().abort()
        if not already_done:
            _remove_quietly([self.tmppath, self.tmppath + _COPYING_SUFFIX], recursive=False)

    def close(self) -> None:
        """Finish the upload, then rename the temporary file onto ``path`` (replacing what was there)."""
        if self.closed:
            return
        super().close()
        try:
            if hdfs_clients.exists(self.path):
                hdfs_clients.remove(self.path, skip_trash=True)
        except hdfs_error.HDFSCliError as err:  # gone already (a concurrent writer): nothing to replace
            logger.debug("Replacing %s: %s", self.path, err)
        try:
            _check_renamed(hdfs_clients.rename(self.tmppath, self.path), self.path)
        except BaseException:
            _remove_quietly([self.tmppath], recursive=False)
            raise


class HdfsAtomicWriteDirPipe(OutputPipeProcessWrapper):
    """Write one file, ``data<data_extension>``, into a temporary directory renamed onto ``path`` on close."""

    def __init__(self, path: str, data_extension: str = "") -> None:
        self.path = path
        self.tmppath = hdfs_config.tmppath(self.path)
        self.datapath = f"{self.tmppath}/data{data_extension}"
        hdfs_clients.mkdir(self.tmppath, parents=True, raise_if_exists=False)
        with _starting_hadoop():
            super().__init__([*hdfs_config.load_hadoop_cmd(), "fs", "-put", "-", self.datapath])

    def abort(self) -> None:
        """Stop the upload and remove the temporary directory."""
        already_done = self.closed
        super().abort()
        if not already_done:
            _remove_quietly([self.tmppath])

    def close(self) -> None:
        """Finish the upload and rename the directory onto ``path``; an existing ``path`` is an error."""
        if self.closed:
            return
        super().close()
        _check_renamed(hdfs_clients.rename(self.tmppath, self.path), self.path)
        # Renaming onto an existing directory moves the temporary one inside it instead.
        nested = os.path.basename(self.tmppath)
        if any(nested in str(entry) for entry in hdfs_clients.listdir(self.path)):
            hdfs_clients.remove(self.path, skip_trash=True)
            raise HdfsAtomicWriteError(
                f"Atomic write to {self.path} failed: it existed already, so the new directory went inside "
                "it (both are removed); remove it before writing"
            )


class _HdfsPathFormat(Format):
    """A bottom layer: bytes above, an HDFS path below; ``hdfs_*`` are the pre-Format names of ``pipe_*``."""

    input = "bytes"
    output = "hdfs"

    def hdfs_writer(self, path: str) -> Any:
        return self.pipe_writer(path)

    def hdfs_reader(self, path: str) -> Any:
        return self.pipe_reader(path)


class PlainFormat(_HdfsPathFormat):
    """The bytes of an HDFS file as they are (the bottom layer of every `HdfsTarget` format)."""

    def pipe_reader(self, path: str) -> HdfsReadPipe:
        return HdfsReadPipe(path)

    def pipe_writer(self, output_pipe: str) -> HdfsAtomicWritePipe:
        return HdfsAtomicWritePipe(output_pipe)


class PlainDirFormat(_HdfsPathFormat):
    """An HDFS directory of part files: reads every file not starting with ``_``; writes ``<dir>/data``."""

    def pipe_reader(self, path: str) -> HdfsReadPipe:
        # Hadoop's glob: every entry whose name does not start with "_" (so not _SUCCESS or _logs).
        return HdfsReadPipe(f"{path}/[^_]*")

    def pipe_writer(self, path: str) -> HdfsAtomicWriteDirPipe:
        return HdfsAtomicWriteDirPipe(path)


Plain = PlainFormat()
PlainDir = PlainDirFormat()


class CompatibleHdfsFormat(Format):
    """A format made of a writer and a reader callable taking an HDFS path; what `HdfsTarget` opens with."""

    output = "hdfs"

    def __init__(
        self,
        writer: Callable[[str], Any],
        reader: Callable[[str], Any],
        input: str | None = None,  # noqa: A002
    ) -> None:
        if input is not None:
            self.input = input
        self.reader = reader
        self.writer = writer

    def pipe_reader(self, input_pipe: str) -> Any:
        return self.reader(input_pipe)

    def pipe_writer(self, output_pipe: str) -> Any:
        return self.writer(output_pipe)

    def hdfs_writer(self, output: str) -> Any:
        return self.writer(output)

    def hdfs_reader(self, input: str) -> Any:  # noqa: A002
        return self.reader(input)

    def __getstate__(self) -> dict[str, Any]:
        # A bound method is stored as (instance, name) so the format pickles wherever its instance does.
        state = dict(self.__dict__)
        for name in ("reader", "writer"):
            method = state[name]
            if hasattr(method, "__self__") and hasattr(method, "__func__"):
                state[name] = (method.__self__, method.__func__.__name__)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name in ("reader", "writer"):
            if isinstance(state[name], tuple):
                instance, method_name = state[name]
                state[name] = getattr(instance, method_name)
        self.__dict__.update(state)
