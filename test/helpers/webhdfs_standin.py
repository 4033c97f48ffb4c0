"""A STAND-IN for a NameNode's WebHDFS REST API (no Hadoop cluster can run here), over a private directory.

It answers ``/webhdfs/v1/<path>?op=...`` as Hadoop documents: ``GETFILESTATUS`` (``{"FileStatus": ...}``),
``LISTSTATUS`` (``{"FileStatuses": {"FileStatus": [...]}}``), ``GETHOMEDIRECTORY``, ``MKDIRS``, ``RENAME``
and ``DELETE`` (``{"boolean": ...}``), ``CREATE`` and ``APPEND`` in two steps (the NameNode answers 307 with
a ``Location`` on a "datanode" URL, the data goes there: 201 or 200), ``OPEN`` (307, then the bytes, with
``offset`` and ``length``). Errors are ``{"RemoteException": {"exception", "javaClassName", "message"}}``
with the documented status codes (404 FileNotFoundException, 403 FileAlreadyExistsException and
PathIsNotEmptyDirectoryException, 400 IllegalArgumentException). Paths map into the directory given; the
"datanode" is the same server on the same loopback port.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

import pytest

from helpers.json_http import MethodRouter, serving

__all__ = ["WebHdfsStandIn", "serving_webhdfs", "webhdfs_standin"]

_PREFIX = "/webhdfs/v1"
_JAVA_CLASSES = {
    "FileNotFoundException": "java.io.FileNotFoundException",
    "FileAlreadyExistsException": "org.apache.hadoop.fs.FileAlreadyExistsException",
    "PathIsNotEmptyDirectoryException": "org.apache.hadoop.fs.PathIsNotEmptyDirectoryException",
    "ParentNotDirectoryException": "org.apache.hadoop.fs.ParentNotDirectoryException",
    "IllegalArgumentException": "java.lang.IllegalArgumentException",
}
_STATUS_CODES = {"FileNotFoundException": 404, "IllegalArgumentException": 400}


class RemoteError(Exception):
    """A Java exception the NameNode reports as a RemoteException body."""

    def __init__(self, exception: str, message: str) -> None:
        super().__init__(message)
        self.exception = exception
        self.message = message


@dataclass
class WebHdfsStandIn:
    """The running stand-in: its base URL (``http://127.0.0.1:<port>``) and the directory it serves."""

    url: str
    root: str

    @property
    def host(self) -> str:
        return str(urlsplit(self.url).hostname)

    @property
    def port(self) -> int:
        return int(urlsplit(self.url).port or 0)


class _WebHdfsHandler(MethodRouter):
    root = ""  # set on the subclass each server gets

    # --- plumbing -------------------------------------------------------------------------------------------

    def _local(self, path: str) -> str:
        normal = os.path.normpath("/" + path.lstrip("/"))
        return os.path.join(self.root, normal.lstrip("/"))

    def _request(self) -> tuple[str, dict[str, str]]:
        parts = urlsplit(self.path)
        if not parts.path.startswith(_PREFIX):
            raise RemoteError("IllegalArgumentException", f"Not a WebHDFS path: {parts.path}")
        query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        return os.path.normpath("/" + unquote(parts.path[len(_PREFIX) :]).lstrip("/")), query

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = bytearray()
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                data += self.rfile.read(size)
                self.rfile.readline()
            while self.rfile.readline().strip():  # trailers, up to the blank line
                pass
            return bytes(data)
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))

    def _redirect(self, query: dict[str, str]) -> None:
        """The NameNode's answer to CREATE, APPEND and OPEN: go to a datanode (here: the same server)."""
        target = urlsplit(self.path)
        location = f"http://{self.headers['Host']}{target.path}?{target.query}&datanode=true"
        self.send_response(307)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _empty(self, status: int, location: str | None = None) -> None:
        self.send_response(status)
        if location:
            self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _fail(self, err: RemoteError) -> None:
        body = {
            "RemoteException": {
                "exception": err.exception,
                "javaClassName": _JAVA_CLASSES[err.exception],
                "message": err.message,
            }
        }
        self.reply(_STATUS_CODES.get(err.exception, 403), body)

    def route(self, method: str) -> None:
        try:
            path, query = self._request()
            operation = f"{method} {query.get('op', '').upper()}"
            handler = _OPERATIONS.get(operation)
            if handler is None:
                raise RemoteError(
                    "IllegalArgumentException", f'Invalid value for webhdfs parameter "op": {operation}'
                )
            handler(self, path, query)
        except RemoteError as err:
            self._fail(err)

    # --- the operations ---------------------------------------------------------------------------------

    def _status(self, path: str, suffix: str) -> dict[str, Any]:
        local = self._local(path)
        info = os.stat(local)
        is_dir = os.path.isdir(local)
        return {
            "accessTime": 0 if is_dir else int(info.st_atime * 1000),
            "blockSize": 0 if is_dir else 134217728,
            "childrenNum": len(os.listdir(local)) if is_dir else 0,
            "fileId": info.st_ino,
            "group": "supergroup",
            "length": 0 if is_dir else info.st_size,
            "modificationTime": int(info.st_mtime * 1000),
            "owner": os.environ.get("USER", "hdfs"),
            "pathSuffix": suffix,
            "permission": format(info.st_mode & 0o777, "o"),
            "replication": 0 if is_dir else 3,
            "storagePolicy": 0,
            "type": "DIRECTORY" if is_dir else "FILE",
        }

    def _must_exist(self, path: str) -> str:
        local = self._local(path)
        if not os.path.exists(local):
            raise RemoteError("FileNotFoundException", f"File does not exist: {path}")
        return local

    def get_file_status(self, path: str, query: dict[str, str]) -> None:
        self._must_exist(path)
        self.reply(200, {"FileStatus": self._status(path, "")})

    def list_status(self, path: str, query: dict[str, str]) -> None:
        local = self._must_exist(path)
        if os.path.isdir(local):
            entries = [self._status(f"{path.rstrip('/')}/{name}", name) for name in sorted(os.listdir(local))]
        else:
            entries = [self._status(path, "")]
        self.reply(200, {"FileStatuses": {"FileStatus": entries}})

    def home_directory(self, path: str, query: dict[str, str]) -> None:
        self.reply(200, {"Path": f"/user/{query.get('user.name', 'dr.who')}"})

    def mkdirs(self, path: str, query: dict[str, str]) -> None:
        local = self._local(path)
        if os.path.exists(local) and not os.path.isdir(local):
            raise RemoteError("FileAlreadyExistsException", f"Path is not a directory: {path}")
        try:
            os.makedirs(local, exist_ok=True)
        except (NotADirectoryError, FileExistsError) as err:
            raise RemoteError(
                "ParentNotDirectoryException", f"Parent path is not a directory: {path}"
            ) from err
        if "permission" in query:
            os.chmod(local, int(query["permission"], 8))
        self.reply(200, {"boolean": True})

    def create(self, path: str, query: dict[str, str]) -> None:
        if "datanode" not in query:
            return self._redirect(query)
        local = self._local(path)
        overwrite = query.get("overwrite", "false").lower() == "true"
        if os.path.isdir(local) or (os.path.exists(local) and not overwrite):
            raise RemoteError("FileAlreadyExistsException", f"{path} for client 127.0.0.1 already exists")
        data = self._body()
        os.makedirs(os.path.dirname(local), exist_ok=True)
        with open(local, "wb") as stream:
            stream.write(data)
        self._empty(201, location=f"hdfs://{self.headers['Host']}{quote(path)}")

    def append(self, path: str, query: dict[str, str]) -> None:
        local = self._must_exist(path)
        if "datanode" not in query:
            return self._redirect(query)
        with open(local, "ab") as stream:
            stream.write(self._body())
        self._empty(200)

    def open(self, path: str, query: dict[str, str]) -> None:
        local = self._must_exist(path)
        if os.path.isdir(local):
            raise RemoteError("FileNotFoundException", f"Path is not a file: {path}")
        if "datanode" not in query:
            return self._redirect(query)
        with open(local, "rb") as stream:
            stream.seek(int(query.get("offset", 0)))
            length = query.get("length")
            data = stream.read(int(length) if length not in (None, "", "None") else -1)
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def rename(self, path: str, query: dict[str, str]) -> None:
        source = self._local(path)
        destination_path = os.path.normpath(query.get("destination", ""))
        destination = self._local(destination_path)
        if os.path.isdir(destination):  # HDFS moves into an existing directory
            destination = os.path.join(destination, os.path.basename(source))
        moved = (
            os.path.exists(source)
            and not os.path.exists(destination)
            and os.path.isdir(os.path.dirname(destination))
            and not (destination + "/").startswith(source.rstrip("/") + "/")
        )
        if moved:
            os.rename(source, destination)
        self.reply(200, {"boolean": moved})

    def delete(self, path: str, query: dict[str, str]) -> None:
        local = self._local(path)
        if not os.path.exists(local):
            return self.reply(200, {"boolean": False})
        if os.path.isdir(local):
            if os.listdir(local) and query.get("recursive", "false").lower() != "true":
                raise RemoteError(
                    "PathIsNotEmptyDirectoryException", f"`{path} is non empty': Directory is not empty"
                )
            shutil.rmtree(local)
        else:
            os.remove(local)
        self.reply(200, {"boolean": True})


_OPERATIONS = {
    "GET GETFILESTATUS": _WebHdfsHandler.get_file_status,
    "GET LISTSTATUS": _WebHdfsHandler.list_status,
    "GET GETHOMEDIRECTORY": _WebHdfsHandler.home_directory,
    "GET OPEN": _WebHdfsHandler.open,
    "PUT MKDIRS": _WebHdfsHandler.mkdirs,
    "PUT CREATE": _WebHdfsHandler.create,
    "PUT RENAME": _WebHdfsHandler.rename,
    "POST APPEND": _WebHdfsHandler.append,
    "DELETE DELETE": _WebHdfsHandler.delete,
}


@contextmanager
def serving_webhdfs(root: str) -> Iterator[WebHdfsStandIn]:
    """Serve WebHDFS over ``root`` on a free loopback port for the block."""
    handler = type("WebHdfsHandler", (_WebHdfsHandler,), {"root": root})
    with serving(handler, "webhdfs-standin") as url:
        yield WebHdfsStandIn(url=url, root=root)


@pytest.fixture
def webhdfs_standin(tmp_path: Any) -> Iterator[WebHdfsStandIn]:
    """A WebHDFS stand-in over a fresh directory, stopped after the test."""
    root = tmp_path / "hdfs-root"
    root.mkdir()
    with serving_webhdfs(str(root)) as standin:
        yield standin
