"""A stand-in Dropbox API v2 for luigi.contrib.dropbox's tests (Dropbox cannot be reached from here).

It answers, through ``responses`` (which serves requests' calls in process, so the SDK's fixed
``api.dropboxapi.com``/``content.dropboxapi.com`` addresses need no network), the documented file
endpoints the module calls: ``files/get_metadata``, ``delete_v2``, ``create_folder_v2``, ``list_folder``
(recursive listings include the folder itself, paged with a cursor) and ``list_folder/continue``,
``move_v2``, ``copy_v2``, ``download`` (content in the body, metadata in ``Dropbox-API-Result``) and the
upload session (``start``, ``append_v2``, ``finish``, which checks every chunk's offset). Errors are
Dropbox's 409 route errors (``error_summary`` and the tagged ``error``) and 401 for a wrong token.
Paths are case-insensitive, as in Dropbox. Not shipped in the package.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import responses

__all__ = ["TOKEN", "DropboxStandIn", "dropbox_standin"]

TOKEN = "sl.standin-token"
_STAMP = "2024-01-01T00:00:00Z"
_Reply = tuple[int, dict[str, str], str | bytes]


@dataclass
class DropboxStandIn:
    """An account's files ({lower path: bytes}) and folders ({lower path}), with their display paths."""

    files: dict[str, bytes] = field(default_factory=dict)
    folders: set[str] = field(default_factory=set)
    display: dict[str, str] = field(default_factory=dict)
    page_size: int = 100
    calls: list[str] = field(default_factory=list)
    sessions: dict[str, bytearray] = field(default_factory=dict)
    _listings: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    # -- the tree ------------------------------------------------------------------------------------------
    def put(self, path: str, data: bytes) -> dict[str, Any]:
        self._make_parents(path)
        self.files[path.lower()] = data
        self.display[path.lower()] = path
        return self._meta(path.lower())

    def _make_parents(self, path: str) -> None:
        parts = path.split("/")[1:-1]
        for depth in range(1, len(parts) + 1):
            folder = "/" + "/".join(parts[:depth])
            self.folders.add(folder.lower())
            self.display.setdefault(folder.lower(), folder)

    def _meta(self, key: str) -> dict[str, Any]:
        shown = self.display[key]
        name = shown.rsplit("/", 1)[1]
        common = {"name": name, "path_lower": key, "path_display": shown, "id": f"id:{key}"}
        if key in self.folders:
            return {".tag": "folder", **common}
        data = self.files[key]
        rev = hashlib.sha1(data).hexdigest()[:12]
        return {".tag": "file", **common, "client_modified": _STAMP, "server_modified": _STAMP,
                "rev": rev, "size": len(data)}

    def _under(self, key: str) -> list[str]:
        return sorted(k for k in [*self.folders, *self.files] if k.startswith(key + "/"))

    # -- the endpoints -------------------------------------------------------------------------------------
    def rpc(self, request: Any) -> _Reply:
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return _invalid_token()
        route = request.url.split("/2/files/", 1)[1]
        self.calls.append(route)
        args = json.loads(request.body or b"null")
        handler = {
            "get_metadata": self._get_metadata, "delete_v2": self._delete, "create_folder_v2": self._mkdir,
            "list_folder": self._list, "list_folder/continue": self._continue, "move_v2": self._move,
            "copy_v2": self._copy,
        }[route]
        return handler(args)

    def _get_metadata(self, args: dict[str, Any]) -> _Reply:
        key = args["path"].lower()
        if key not in self.files and key not in self.folders:
            return _route_error("path", "not_found")
        return _ok(self._meta(key))

    def _delete(self, args: dict[str, Any]) -> _Reply:
        key = args["path"].lower()
        if key not in self.files and key not in self.folders:
            return _route_error("path_lookup", "not_found")
        meta = self._meta(key)
        for gone in [key, *self._under(key)]:
            self.files.pop(gone, None)
            self.folders.discard(gone)
        return _ok({"metadata": meta})

    def _mkdir(self, args: dict[str, Any]) -> _Reply:
        path = args["path"]
        if "//" in path or path.endswith("/") or not path.startswith("/"):
            return _route_error("path", "malformed_path")
        key = path.lower()
        if key in self.files or key in self.folders:
            return _route_error("path", "conflict", {"conflict": {".tag": "folder"}})
        self._make_parents(path)
        self.folders.add(key)
        self.display[key] = path
        return _ok({"metadata": self._meta(key)})

    def _list(self, args: dict[str, Any]) -> _Reply:
        key = args["path"].lower()
        if key and key not in self.folders:
            return _route_error("path", "not_found")
        keys = self._under(key) if args.get("recursive") else [
            k for k in self._under(key) if "/" not in k[len(key) + 1 :]
        ]
        entries = [self._meta(k) for k in ([key] if key and args.get("recursive") else []) + keys]
        cursor = f"cursor-{next(self._ids)}"
        self._listings[cursor] = entries
        return self._page(cursor)

    def _continue(self, args: dict[str, Any]) -> _Reply:
        if args["cursor"] not in self._listings:
            return _route_error("reset", None)
        return self._page(args["cursor"])

    def _page(self, cursor: str) -> _Reply:
        entries = self._listings[cursor]
        page, rest = entries[: self.page_size], entries[self.page_size :]
        self._listings[cursor] = rest
        return _ok({"entries": page, "cursor": cursor, "has_more": bool(rest)})

    def _relocate(self, args: dict[str, Any], keep_source: bool) -> _Reply:
        source, dest = args["from_path"].lower(), args["to_path"]
        if source not in self.files and source not in self.folders:
            return _route_error("from_lookup", "not_found")
        if dest.lower() in self.files or dest.lower() in self.folders:
            return _route_error("to", "conflict", {"conflict": {".tag": "file"}})
        for old in [source, *self._under(source)]:
            new = dest + self.display[old][len(source) :]
            if old in self.folders:
                self.folders.add(new.lower())
                self.display[new.lower()] = new
            else:
                self.put(new, self.files[old])
        self._make_parents(dest)
        if not keep_source:
            self._delete({"path": source})
        return _ok({"metadata": self._meta(dest.lower())})

    def _move(self, args: dict[str, Any]) -> _Reply:
        return self._relocate(args, keep_source=False)

    def _copy(self, args: dict[str, Any]) -> _Reply:
        return self._relocate(args, keep_source=True)

    def content(self, request: Any) -> _Reply:
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return _invalid_token()
        route = request.url.split("/2/files/", 1)[1]
        self.calls.append(route)
        args = json.loads(request.headers["Dropbox-API-Arg"])
        body = request.body or b""
        if route == "download":
            key = args["path"].lower()
            if key not in self.files:
                return _route_error("path", "not_found")
            return 200, {"Dropbox-API-Result": json.dumps(self._meta(key))}, self.files[key]
        if route == "upload_session/start":
            session = f"session-{next(self._ids)}"
            self.sessions[session] = bytearray(body)
            return _ok({"session_id": session})
        cursor = args["cursor"]
        received = self.sessions[cursor["session_id"]]
        if cursor["offset"] != len(received):
            return _route_error("incorrect_offset", None, {"correct_offset": len(received)})
        received.extend(body)
        if route == "upload_session/append_v2":
            return _ok(None)
        commit = args["commit"]
        return _ok({k: v for k, v in self.put(commit["path"], bytes(received)).items() if k != ".tag"})


def _ok(answer: Any) -> _Reply:
    return 200, {"Content-Type": "application/json"}, json.dumps(answer)


def _route_error(tag: str, inner: str | None, extra: dict[str, Any] | None = None) -> _Reply:
    error: dict[str, Any] = {".tag": tag}
    if inner is not None:
        error[tag] = {".tag": inner, **(extra or {})}
    else:
        error.update(extra or {})
    summary = f"{tag}/{inner + '/' if inner else ''}.."
    return 409, {"Content-Type": "application/json"}, json.dumps({"error_summary": summary, "error": error})


def _invalid_token() -> _Reply:
    body = {"error_summary": "invalid_access_token/..", "error": {".tag": "invalid_access_token"}}
    return 401, {"Content-Type": "application/json"}, json.dumps(body)


@contextmanager
def dropbox_standin(**settings: Any) -> Iterator[DropboxStandIn]:
    """The stand-in account, answering every request to Dropbox's API addresses while the block runs."""
    account = DropboxStandIn(**settings)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add_callback(responses.POST, re.compile(r"https://api\.dropboxapi\.com/2/files/.*"), account.rpc)
        mock.add_callback(
            responses.POST, re.compile(r"https://content\.dropboxapi\.com/2/files/.*"), account.content
        )
        yield account
