"""HDFS over its WebHDFS REST API (``[hdfs] client = webhdfs``), through the ``hdfs`` package (HdfsCLI).

Needs the ``hdfs`` extra (``pip install 'luigi[hdfs]'``), imported when a client first talks to the
NameNode. Where the NameNode is comes from ``[hdfs] namenode_host`` (several hosts separated by ``;`` for
high availability) and ``[webhdfs] port``; ``[webhdfs] user`` and ``client_type`` (``insecure`` or
``kerberos``) say who asks.
"""

from __future__ import annotations

import contextlib
import getpass
import logging
import os
import re
import warnings
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import luigi
from luigi.contrib.hdfs import abstract_client as hdfs_abstract_client
from luigi.contrib.hdfs import config as hdfs_config
from luigi.contrib.optional import require
from luigi.target import FileAlreadyExists

__all__ = ["WebHdfsClient", "webhdfs"]

logger = logging.getLogger("luigi-interface")

_FEATURE = "luigi.contrib.hdfs.webhdfs_client"
_MISSING_PREFIX = "File does not exist: "
_ERRNO_REASON = re.compile(r"\[Errno -?\d+\] ([^'\")]+)")


class webhdfs(luigi.Config):
    """``[webhdfs]``: the NameNode's HTTP port and who the client is."""

    port = luigi.IntParameter(default=50070, description="the NameNode's WebHDFS (HTTP) port")
    user = luigi.Parameter(
        default="",
        config_path=dict(section="hdfs", name="user"),
        description="the HDFS user to act as; default the USER environment variable",
    )
    client_type = luigi.ChoiceParameter(
        default="insecure",
        choices=["insecure", "kerberos"],
        description="insecure (user.name) or kerberos (SPNEGO, needs requests-kerberos)",
    )


def _on_namenode(path: str) -> str:
    """The path part of ``hdfs://host:port/path`` (WebHDFS takes paths; the host is the client's)."""
    parts = urlsplit(path)
    return parts.path if parts.scheme == "hdfs" else path


def _hdfs_library() -> Any:
    return require("hdfs", "hdfs", _FEATURE)


class WebHdfsClient(hdfs_abstract_client.HdfsFileSystem):
    """An `HdfsFileSystem` speaking WebHDFS; each call is one or two HTTP requests to the NameNode."""

    def __init__(
        self,
        host: str | None = None,
        port: int | None = None,
        user: str | None = None,
        client_type: str | None = None,
    ) -> None:
        self.host = host or hdfs_config.hdfs().namenode_host
        self.port = port or webhdfs().port
        self.user = user or webhdfs().user or os.environ.get("USER") or getpass.getuser()
        self.client_type = client_type or webhdfs().client_type

    @property
    def url(self) -> str:
        """``http://<host>:<port>`` for each ``;``-separated NameNode host, joined with ``;``."""
        if not self.host:
            raise ValueError(
                "WebHdfsClient does not know the NameNode: set [hdfs] namenode_host (and [webhdfs] port)"
            )
        return ";".join(f"http://{host}:{self.port}" for host in str(self.host).split(";"))

    @property
    def client(self) -> Any:
        """A new HdfsCLI client for the NameNode (``KerberosClient`` or ``InsecureClient``)."""
        if self.client_type == "kerberos":
            kerberos = require("hdfs.ext.kerberos", "hdfs", _FEATURE, package="hdfs[kerberos]")
            return kerberos.KerberosClient(url=self.url)
        return _hdfs_library().InsecureClient(url=self.url, user=self.user)

    @contextlib.contextmanager
    def _talking(self) -> Iterator[None]:
        """Turn an unreachable NameNode into an error naming it and the settings that point at it."""
        requests = require("requests", "hdfs", _FEATURE)
        try:
            yield
        except requests.exceptions.ConnectionError as err:
            found = _ERRNO_REASON.search(str(err))
            reason = found.group(1).strip() if found else type(err).__name__
            raise requests.exceptions.ConnectionError(
                f"Cannot reach WebHDFS at {self.url} ({reason}): check that the NameNode runs and that "
                "[hdfs] namenode_host and [webhdfs] port point at it",
                request=err.request,
                response=err.response,
            ) from err

    def exists(self, path: str) -> bool:
        """True if HDFS has ``path``; False when the NameNode says it does not exist."""
        with self._talking():
            try:
                self.client.status(_on_namenode(path))
            except _hdfs_library().util.HdfsError as err:
                if str(err).startswith(_MISSING_PREFIX):
                    return False
                raise
        return True

    def upload(self, hdfs_path: str, local_path: str, overwrite: bool = False) -> Any:
        """Copy the local file ``local_path`` to ``hdfs_path``."""
        with self._talking():
            return self.client.upload(_on_namenode(hdfs_path), local_path, overwrite=overwrite)

    def download(self, hdfs_path: str, local_path: str, overwrite: bool = False, n_threads: int = -1) -> Any:
        """Copy ``hdfs_path`` to the local ``local_path``."""
        with self._talking():
            return self.client.download(
                _on_namenode(hdfs_path), local_path, overwrite=overwrite, n_threads=n_threads
            )

    def remove(self, hdfs_path: str, recursive: bool = True, skip_trash: bool = False) -> Any:
        """Delete ``hdfs_path`` for good; WebHDFS has no trash, so ``skip_trash=True`` is required."""
        if not skip_trash:
            # AssertionError, as Luigi raises here, with what to do about it.
            raise AssertionError(
                f"WebHdfsClient cannot move {hdfs_path!r} to the trash: call remove(..., skip_trash=True) "
                "or use [hdfs] client = hadoopcli"
            )
        with self._talking():
            return self.client.delete(_on_namenode(hdfs_path), recursive=recursive)

    def read(
        self,
        hdfs_path: str,
        offset: int = 0,
        length: int | None = None,
        buffer_size: int | None = None,
        chunk_size: int = 1024,
        buffer_char: str | None = None,
    ) -> Iterator[bytes]:
        """Yield ``hdfs_path``'s bytes in chunks of ``chunk_size``, or its lines split on ``buffer_char``."""
        with self._talking():
            with self.client.read(
                _on_namenode(hdfs_path),
                offset=offset,
                length=length,
                buffer_size=buffer_size,
                chunk_size=chunk_size,
            ) as reader:
                if buffer_char is None:
                    yield from reader
                else:
                    yield from _split(reader, buffer_char.encode())

    def move(self, path: str, dest: str) -> None:
        """Rename ``path`` to ``dest``, creating ``dest``'s parent directory first."""
        parent = os.path.dirname(dest.rstrip("/"))
        if parent and not self.exists(parent):
            self.mkdir(parent, parents=True)
        with self._talking():
            self.client.rename(_on_namenode(path), _on_namenode(dest))

    def mkdir(  # type: ignore[override]  # Luigi's order: mode comes before raise_if_exists
        self, path: str, parents: bool = True, mode: int = 0o755, raise_if_exists: bool = False
    ) -> None:
        """Create ``path`` and its missing parents (WebHDFS's MKDIRS always creates parents)."""
        if not parents:
            warnings.warn(
                "WebHdfsClient.mkdir always creates parent directories (parents=False)", stacklevel=2
            )
        if raise_if_exists and self.exists(path):
            raise FileAlreadyExists(f"{path!r} exists already (mkdir with raise_if_exists=True)")
        with self._talking():
            self.client.makedirs(_on_namenode(path), permission=int(oct(mode)[2:]))

    def chmod(self, path: str, permissions: str, recursive: bool = False) -> Any:
        raise NotImplementedError("WebHdfsClient cannot chmod: use [hdfs] client = hadoopcli for it")

    def chown(self, path: str, owner: str | None, group: str | None, recursive: bool = False) -> Any:
        raise NotImplementedError("WebHdfsClient cannot chown: use [hdfs] client = hadoopcli for it")

    def count(self, path: str) -> dict[str, Any]:
        raise NotImplementedError("WebHdfsClient cannot count: use [hdfs] client = hadoopcli for it")

    def copy(self, path: str, destination: str) -> Any:
        raise NotImplementedError("WebHdfsClient cannot copy on HDFS: use [hdfs] client = hadoopcli for it")

    def put(self, local_path: str, destination: str) -> Any:
        """Upload the local file ``local_path`` to ``destination``."""
        return self.upload(destination, local_path)

    def get(self, path: str, local_destination: str) -> Any:
        """Download ``path`` to ``local_destination``."""
        return self.download(path, local_destination)

    def listdir(
        self,
        path: str,
        ignore_directories: bool = False,
        ignore_files: bool = False,
        include_size: bool = False,
        include_type: bool = False,
        include_time: bool = False,
        recursive: bool = False,
    ) -> list[Any]:
        """The names in the directory ``path`` (WebHDFS lists one level; ``recursive`` is refused)."""
        if recursive:
            raise NotImplementedError("WebHdfsClient.listdir lists one directory: walk() goes deeper")
        with self._talking():
            listing = self.client.list(_on_namenode(path), status=True)
        entries: list[Any] = []
        for name, status in listing:
            is_dir = status["type"] == "DIRECTORY"
            if (ignore_directories and is_dir) or (ignore_files and not is_dir):
                continue
            kind = "d" if is_dir else "-"
            entries.append(
                hdfs_abstract_client.listing_entry(
                    name,
                    status["length"],
                    kind,
                    status["modificationTime"],
                    include_size,
                    include_type,
                    include_time,
                )
            )
        return entries

    def touchz(self, path: str) -> None:
        """Create ``path`` as an empty file (an existing file is an error)."""
        with self._talking():
            self.client.write(_on_namenode(path), data="", overwrite=False)

    def walk(self, path: str, depth: int = 1) -> Iterator[tuple[str, list[str], list[str]]]:
        """``(directory, subdirectories, files)`` from ``path`` down ``depth`` levels (0: all)."""
        with self._talking():
            yield from self.client.walk(_on_namenode(path), depth=depth)


def _split(chunks: Any, delimiter: bytes) -> Iterator[bytes]:
    """The pieces of a chunked byte stream between delimiters (the delimiters left out)."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        *complete, pending = pending.split(delimiter)
        yield from complete
    if pending:
        yield pending
