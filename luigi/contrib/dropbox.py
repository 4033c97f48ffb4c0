"""Dropbox: files in a Dropbox account (or a team space) as targets, uploaded whole when written.

Paths are Dropbox paths (``/reports/2024-01-01.csv``). ``DropboxClient`` talks to the Dropbox API v2
through the official SDK with an OAuth2 access token: ``pip install 'luigi[dropbox]'``.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import tempfile
import warnings
from collections.abc import Iterator
from typing import Any

from luigi.contrib._remote_reader import RemoteReader
from luigi.contrib.optional import require
from luigi.contrib.staged_upload import StagedUpload
from luigi.format import Format, get_default_format
from luigi.target import FileAlreadyExists, FileSystem, FileSystemTarget, NotADirectory

__all__ = ["AtomicWritableDropboxFile", "DropboxClient", "DropboxTarget", "ReadableDropboxFile"]

CHUNK_SIZE = 4_000_000  # bytes per upload-session request, as Luigi sends them


def _sdk() -> Any:
    return require("dropbox", "dropbox", "luigi.contrib.dropbox")


def _missing(error: BaseException) -> bool:
    """Whether a Dropbox ``ApiError`` says the path does not exist (a lookup error)."""
    reason = getattr(error, "error", None)
    return bool(reason is not None and reason.is_path() and reason.get_path().is_not_found())


def _strip_slash(path: str) -> str:
    return path[:-1] if path.endswith("/") and path != "/" else path


class DropboxClient(FileSystem):
    """The files of one Dropbox account (or, with ``root_namespace_id``, a team space)."""

    def __init__(self, token: str, user_agent: str = "Luigi", root_namespace_id: str | None = None) -> None:
        if not token:
            raise ValueError("The token parameter must contain a valid Dropbox OAuth2 access token")
        dropbox = _sdk()
        try:
            conn = dropbox.dropbox_client.Dropbox(oauth2_access_token=token, user_agent=user_agent)
        except Exception as error:
            reason = f"{type(error).__name__}: {error}"
            raise Exception(f"Cannot connect to Dropbox: check the token ({reason})") from error
        if root_namespace_id:
            conn = conn.with_path_root(dropbox.common.PathRoot.root(root_namespace_id))
        self.conn = conn
        self.token = token

    def __repr__(self) -> str:  # the token stays out of logs
        return "DropboxClient()"

    def _without_slash_if_dir(self, path: str) -> str:
        """``path`` without its trailing ``/`` when it names an existing folder (with a warning)."""
        stripped = _strip_slash(path)
        if stripped != path and self.isdir(stripped):
            warnings.warn(f"Dropbox paths take no trailing slash: using {stripped!r}", stacklevel=3)
            return stripped
        return path

    def exists(self, path: str) -> bool:
        if path == "/":
            return True
        if path.endswith("/"):
            return self.isdir(_strip_slash(path))
        return self._metadata(path) is not None

    def _metadata(self, path: str) -> Any:
        """The path's metadata, or None when there is nothing there."""
        try:
            return self.conn.files_get_metadata(path)
        except _sdk().exceptions.ApiError as error:
            if _missing(error):
                return None
            raise

    def remove(self, path: str, recursive: bool = True, skip_trash: bool = True) -> bool:  # type: ignore[override]
        """Delete the file or folder (a folder with everything in it); False when there was nothing."""
        path = self._without_slash_if_dir(path)
        if not self.exists(path):
            return False
        self.conn.files_delete_v2(path)
        return True

    def mkdir(self, path: str, parents: bool = True, raise_if_exists: bool = False) -> None:
        """Create the folder (and its parents: Dropbox always does)."""
        path = _strip_slash(path)
        if self.exists(path):
            if not self.isdir(path):
                raise NotADirectory(f"{path} is a file, not a folder")
            if raise_if_exists:
                raise FileAlreadyExists(f"{path} exists already")
            return
        self.conn.files_create_folder_v2(path)

    def isdir(self, path: str) -> bool:
        path = _strip_slash(path)
        if path == "/":
            return True
        metadata = self._metadata(path)
        return isinstance(metadata, _sdk().files.FolderMetadata)

    def listdir(self, path: str, **kwargs: Any) -> list[str]:
        """Every path under the folder, recursively, the folder itself included (as Dropbox lists it)."""
        path = _strip_slash(path)
        page = self.conn.files_list_folder("" if path == "/" else path, recursive=True, **kwargs)
        paths = [entry.path_display for entry in page.entries]
        while page.has_more:
            page = self.conn.files_list_folder_continue(page.cursor)
            paths.extend(entry.path_display for entry in page.entries)
        return paths

    def move(self, path: str, dest: str) -> None:
        self.conn.files_move_v2(from_path=_strip_slash(path), to_path=_strip_slash(dest))

    def copy(self, path: str, dest: str) -> None:
        self.conn.files_copy_v2(from_path=_strip_slash(path), to_path=_strip_slash(dest))

    def download_as_bytes(self, path: str) -> bytes:
        """The file's whole content."""
        return bytes(self.conn.files_download(path)[1].content)

    def upload(self, tmp_path: str, dest_path: str) -> None:
        """Upload the local file as ``dest_path`` (replacing it) through an upload session, in chunks."""
        files = _sdk().files
        with open(tmp_path, "rb") as source:
            session = self.conn.files_upload_session_start(source.read(CHUNK_SIZE))
            cursor = files.UploadSessionCursor(session_id=session.session_id, offset=source.tell())
            commit = files.CommitInfo(path=dest_path, mode=files.WriteMode.overwrite)
            chunk = source.read(CHUNK_SIZE)
            while True:
                following = source.read(CHUNK_SIZE)
                if not following:
                    self.conn.files_upload_session_finish(chunk, cursor, commit)
                    return
                self.conn.files_upload_session_append_v2(chunk, cursor)
                cursor.offset += len(chunk)
                chunk = following


class ReadableDropboxFile(RemoteReader):
    """A Dropbox file opened for reading: downloaded at the first read."""

    def __init__(self, path: str, client: DropboxClient) -> None:
        self.path = path
        self.client = client
        self._content: io.BytesIO | None = None

    def read(self, n: int | None = None) -> bytes:
        if self._content is None:
            self._content = io.BytesIO(self.client.download_as_bytes(self.path))
        return self._content.read(-1 if n is None else n)


class AtomicWritableDropboxFile(StagedUpload):
    """A local file uploaded to ``path`` when it closes: the Dropbox file appears whole or not at all."""

    local_prefix = "luigi-dropbox"

    def __init__(self, path: str, client: DropboxClient) -> None:
        self.client = client
        super().__init__(client, path)

    def _upload(self, staged_path: str) -> None:
        self.client.upload(staged_path, self.path)


class DropboxTarget(FileSystemTarget):
    """The Dropbox file at ``path``, reached with ``token``."""

    def __init__(
        self,
        path: str,
        token: str,
        format: Format | None = None,
        user_agent: str = "Luigi",
        root_namespace_id: str | None = None,
    ) -> None:
        super().__init__(path)
        if not token:
            raise ValueError("The token parameter must contain a valid Dropbox OAuth2 access token")
        self.path = path
        self.token = token
        self.client = DropboxClient(token, user_agent, root_namespace_id)
        self.format = format if format is not None else get_default_format()

    @property
    def fs(self) -> DropboxClient:
        return self.client

    def __str__(self) -> str:
        return self.path

    @contextlib.contextmanager
    def temporary_path(self) -> Iterator[str]:
        """A local path to write to; uploaded to the target's path if the block succeeds."""
        folder = tempfile.mkdtemp()
        name = f"luigi-tmp-{random.randrange(10**10):010d}{os.path.basename(self.path)}"
        local = os.path.join(folder, name)
        try:
            yield local
            self.client.upload(local, self.path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(local)
            os.rmdir(folder)

    def open(self, mode: str = "r") -> Any:
        """Open for reading ('r') or atomic writing ('w')."""
        if mode == "r":
            return self.format.pipe_reader(ReadableDropboxFile(self.path, self.client))
        if mode == "w":
            return self.format.pipe_writer(AtomicWritableDropboxFile(self.path, self.client))
        raise ValueError(f"Unsupported open mode {mode!r} for DropboxTarget {self.path}: use 'r' or 'w'")
