"""Google Cloud Storage for Luigi: `GCSClient`, `GCSTarget` and `GCSFlagTarget` over the storage JSON API.

Needs the ``gcs`` extra (google-api-python-client, google-auth), imported when a client is built, not at
import. Paths are ``gs://<bucket>/<object>``; a "directory" is a prefix ending in ``/`` (and the empty
marker object `GCSClient.mkdir` writes). The client talks to ``https://storage.googleapis.com/`` unless a
``descriptor`` (a storage v1 discovery document) names another root URL, such as an emulator's: every
request, uploads and batches included, goes to that document's ``rootUrl``.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import logging
import mimetypes
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar
from urllib.parse import urlsplit

from luigi.contrib import gcp
from luigi.contrib.optional import require
from luigi.contrib.staged_upload import StagedUpload
from luigi.format import FileWrapper, Format, get_default_format
from luigi.target import FileAlreadyExists, FileSystem, FileSystemException, FileSystemTarget, NotADirectory

__all__ = [
    "CHUNKSIZE",
    "DEFAULT_MIMETYPE",
    "EVENTUAL_CONSISTENCY_MAX_SLEEPS",
    "EVENTUAL_CONSISTENCY_SLEEP_INTERVAL",
    "GCS_BATCH_URI",
    "AtomicGCSFile",
    "GCSClient",
    "GCSFlagTarget",
    "GCSTarget",
    "InvalidDeleteException",
    "gcs_retry",
    "is_error_5xx",
]

logger = logging.getLogger("luigi-interface")

CHUNKSIZE = 10 * 1024 * 1024
DEFAULT_MIMETYPE = "application/octet-stream"
EVENTUAL_CONSISTENCY_SLEEP_INTERVAL = 0.1
EVENTUAL_CONSISTENCY_MAX_SLEEPS = 300
# Where the real service takes batches; a client sends its batches to its discovery document's batch path,
# which for the real service is this URI.
GCS_BATCH_URI = "https://storage.googleapis.com/batch/storage/v1"

_FEATURE = "luigi.contrib.gcs"
_DEFAULT_ROOT_URL = "https://storage.googleapis.com/"
_RETRY_ATTEMPTS = 5
_RETRY_WAIT_MIN = 1.0
_RETRY_WAIT_MAX = 10.0
_BATCH_LIMIT = 100  # calls per batch request, the JSON API's documented limit
_HTTP_NOT_FOUND = 404
_HTTP_SERVER_ERROR = 500
_HTTP_RESUME_INCOMPLETE = 308  # a resumable upload's "send the next chunk", not a redirect

_sleep = time.sleep  # the one place this module waits; tests replace it to see the waits
_F = TypeVar("_F", bound=Callable[..., Any])


def _google(module: str, package: str = "google-api-python-client") -> Any:
    return require(module, "gcs", _FEATURE, package)


def __getattr__(name: str) -> Any:
    # RETRYABLE_ERRORS names httplib2's error class, so it is built on first use, not at import.
    if name == "RETRYABLE_ERRORS":
        return _retryable_errors()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _retryable_errors() -> tuple[type[BaseException], ...]:
    return (_google("httplib2", "httplib2").HttpLib2Error, IOError)


def _http_error() -> type[Exception]:
    error: type[Exception] = _google("googleapiclient.errors").HttpError
    return error


def _status(err: BaseException) -> int | None:
    """The HTTP status of a ``googleapiclient`` HttpError, None for any other error."""
    if "googleapiclient.errors" not in sys.modules or not isinstance(err, _http_error()):
        return None
    return int(err.resp.status)  # type: ignore[attr-defined]


def is_error_5xx(err: BaseException) -> bool:
    """True for an ``HttpError`` whose status is 500 or above: the server failed, a retry may work."""
    status = _status(err)
    return status is not None and status >= _HTTP_SERVER_ERROR


def _is_retryable(err: BaseException) -> bool:
    return is_error_5xx(err) or isinstance(err, _retryable_errors())


def _retry_wait(attempt: int) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1, 2, 4, 8, ... at most 10)."""
    return min(max(2.0 ** (attempt - 1), _RETRY_WAIT_MIN), _RETRY_WAIT_MAX)


def gcs_retry(func: _F) -> _F:
    """Retry ``func`` on a 5xx answer or a network error, up to 5 attempts with exponential waits; the last
    error is raised as itself. Each failure that is retried logs a warning."""

    @functools.wraps(func)
    def retried(*args: Any, **kwargs: Any) -> Any:
        for attempt in range(1, _RETRY_ATTEMPTS + 1):
            try:
                return func(*args, **kwargs)
            except Exception as exc:  # re-raised at once unless it is one of the retryable errors
                if attempt == _RETRY_ATTEMPTS or not _is_retryable(exc):
                    raise
                wait = _retry_wait(attempt)
                logger.warning(
                    "GCS call %s failed (attempt %d of %d), retrying in %.0f s: %r",
                    func.__qualname__,
                    attempt,
                    _RETRY_ATTEMPTS,
                    wait,
                    exc,
                )
                _sleep(wait)
        raise AssertionError("unreachable: the last attempt returns or raises")

    return retried  # type: ignore[return-value]


def _wait_for_consistency(checker: Callable[[], bool]) -> None:
    """Poll ``checker`` until it is true (at most 300 times, 0.1 s apart), then warn and go on."""
    for _ in range(EVENTUAL_CONSISTENCY_MAX_SLEEPS):
        if checker():
            return
        _sleep(EVENTUAL_CONSISTENCY_SLEEP_INTERVAL)
    logger.warning(
        "GCS did not show a change after %d checks; going on without it", EVENTUAL_CONSISTENCY_MAX_SLEEPS
    )


class InvalidDeleteException(FileSystemException):
    """A remove that GCSClient refuses: a bucket's root, or a directory without ``recursive``."""


class _BadGCSPath(ValueError, AssertionError):
    """A path or wildcard GCSClient cannot use (an AssertionError too: Luigi asserted these)."""


def _explain(action: str, path: str, root_url: str, exc: BaseException) -> str | None:
    """``Cannot <action> <path>: <cause>`` for a refused connection or an HTTP error; built from the status
    and the root URL only, never from the request, so no credential can appear in it."""
    status = _status(exc)
    if status == _HTTP_NOT_FOUND:
        return f"Cannot {action} {path}: no such object or bucket"
    if status in (401, 403):
        return f"Cannot {action} {path}: access denied (check the credentials given to GCSClient)"
    if isinstance(exc, ConnectionError | TimeoutError):
        return f"Cannot {action} {path}: cannot connect to {root_url} ({exc.__class__.__name__})"
    return None


@contextlib.contextmanager
def _explained(action: str, path: str, root_url: str) -> Iterator[None]:
    """Errors leave as themselves (``except HttpError`` still catches them), with a note naming ``path``."""
    try:
        yield
    except Exception as exc:  # every error re-raises unchanged; some get a note (Python 3.11+)
        note = _explain(action, path, root_url, exc)
        if note is not None and sys.version_info >= (3, 11):
            exc.add_note(note)
        raise


def _root_url(descriptor: str | dict[str, Any]) -> str:
    """The root URL a discovery document points the client at (the real service's without one)."""
    if not descriptor:
        return _DEFAULT_ROOT_URL
    document = json.loads(descriptor) if isinstance(descriptor, str | bytes) else descriptor
    return str(document.get("rootUrl", _DEFAULT_ROOT_URL))


class GCSClient(FileSystem):
    """The objects of Google Cloud Storage as a Luigi file system, through ``googleapiclient``.

    Credentials are ``oauth_credentials``, else the ``http_`` given (an ``httplib2.Http``, authorised or
    not), else Google's default credentials. ``descriptor`` is a storage v1 discovery document (a JSON
    string or a dict) to build the client from, which is how another endpoint is reached; other keyword
    arguments go to ``discovery.build`` (or ``build_from_document``).
    """

    def __init__(
        self,
        oauth_credentials: Any = None,
        descriptor: str | dict[str, Any] = "",
        http_: Any = None,
        chunksize: int = CHUNKSIZE,
        **discovery_build_kwargs: Any,
    ) -> None:
        self.chunksize = chunksize
        discovery = _google("googleapiclient.discovery")
        if isinstance(http_, _google("httplib2", "httplib2").Http):
            # httplib2 follows 308 as a redirect, which breaks resumable uploads (googleapiclient does this
            # to the Http objects it builds itself)
            http_.redirect_codes = http_.redirect_codes - {_HTTP_RESUME_INCOMPLETE}
        build_kwargs = {**gcp.get_authenticate_kwargs(oauth_credentials, http_), **discovery_build_kwargs}
        if descriptor:
            self.client = discovery.build_from_document(descriptor, **build_kwargs)
        else:
            build_kwargs.setdefault("cache_discovery", False)
            self.client = discovery.build("storage", "v1", **build_kwargs)
        self.root_url = _root_url(descriptor)

    def __repr__(self) -> str:  # the credentials stay out of logs
        return f"GCSClient(root_url={self.root_url!r})"

    def _path_to_bucket_and_key(self, path: str) -> tuple[str, str]:
        scheme, netloc, key, _, _ = urlsplit(path)
        if scheme != "gs":
            raise _BadGCSPath(f"{path!r} is not a GCS path: use gs://<bucket>/<object>")
        return netloc, key[1:]

    @staticmethod
    def _is_root(key: str) -> bool:
        return key in ("", "/")

    @staticmethod
    def _add_path_delimiter(key: str) -> str:
        return key if key == "" or key.endswith("/") else key + "/"

    @gcs_retry
    def _obj_exists(self, bucket: str, obj: str) -> bool:
        try:
            self.client.objects().get(bucket=bucket, object=obj).execute()
        except _http_error() as exc:
            if _status(exc) == _HTTP_NOT_FOUND:
                return False
            raise
        return True

    def _list_iter(self, bucket: str, prefix: str) -> Iterator[dict[str, Any]]:
        """Every object whose name starts with ``prefix``, page after page."""
        objects = self.client.objects()
        request = objects.list(bucket=bucket, prefix=prefix)
        while request is not None:
            response = request.execute()
            yield from response.get("items", [])
            request = objects.list_next(request, response)

    @gcs_retry
    def _do_put(self, media: Any, dest_path: str) -> Any:
        """Upload ``media``: in one request, or chunk by chunk when it is resumable."""
        bucket, obj = self._path_to_bucket_and_key(dest_path)
        request = self.client.objects().insert(bucket=bucket, name=obj, media_body=media)
        if not media.resumable():
            return request.execute()
        response = None
        while response is None:
            status, response = request.next_chunk()
            if status:
                logger.debug("Upload to %s: %.1f%% done", dest_path, 100 * status.progress())
        _wait_for_consistency(lambda: self._obj_exists(bucket, obj))
        return response

    def exists(self, path: str) -> bool:
        bucket, obj = self._path_to_bucket_and_key(path)
        with _explained("check", path, self.root_url):
            if not self._is_root(obj) and self._obj_exists(bucket, obj):
                return True
            return self.isdir(path)

    def isdir(self, path: str) -> bool:
        """True for an existing bucket's root, a directory marker ``key/``, or a prefix with objects."""
        bucket, obj = self._path_to_bucket_and_key(path)
        if self._is_root(obj):
            try:
                self.client.buckets().get(bucket=bucket).execute()
            except _http_error() as exc:
                if _status(exc) == _HTTP_NOT_FOUND:
                    return False
                raise
            return True
        prefix = self._add_path_delimiter(obj)
        if self._obj_exists(bucket, prefix):
            return True
        response = self.client.objects().list(bucket=bucket, prefix=prefix, maxResults=20).execute()
        return bool(response.get("items"))

    def remove(self, path: str, recursive: bool = True) -> bool:  # type: ignore[override]
        """Delete the object, or the directory's objects (``recursive``); False when there was nothing."""
        bucket, obj = self._path_to_bucket_and_key(path)
        if self._is_root(obj):
            raise InvalidDeleteException(f"Cannot delete the root of bucket {bucket!r} ({path})")
        with _explained("remove", path, self.root_url):
            if self._obj_exists(bucket, obj):
                self.client.objects().delete(bucket=bucket, object=obj).execute()
                _wait_for_consistency(lambda: not self._obj_exists(bucket, obj))
                return True
            if not self.isdir(path):
                return False
            if not recursive:
                raise InvalidDeleteException(f"{path} is a directory: remove it with recursive=True")
            names = [item["name"] for item in self._list_iter(bucket, self._add_path_delimiter(obj))]
            self._delete_in_batches(bucket, names)
            _wait_for_consistency(lambda: not self.isdir(path))
            return True

    def _delete_in_batches(self, bucket: str, names: list[str]) -> None:
        """Delete the objects in batch requests; a deletion that failed (other than a 404) is raised."""
        failures: list[Exception] = []

        def collect(_request_id: str, _response: Any, exc: Exception | None) -> None:
            if exc is not None and _status(exc) != _HTTP_NOT_FOUND:  # gone already is what we want
                failures.append(exc)

        for start in range(0, len(names), _BATCH_LIMIT):
            batch = self.client.new_batch_http_request(callback=collect)
            for name in names[start : start + _BATCH_LIMIT]:
                batch.add(self.client.objects().delete(bucket=bucket, object=name))
            batch.execute()
        if failures:
            raise failures[0]

    def put(
        self, filename: str, dest_path: str, mimetype: str | None = None, chunksize: int | None = None
    ) -> None:
        """Upload the local file; a non-empty one goes up resumably, ``chunksize`` bytes per request."""
        resumable = os.path.getsize(filename) > 0
        with open(filename, "rb") as stream:
            self._put_stream(stream, dest_path, mimetype, chunksize or self.chunksize, resumable)

    def put_multiple(
        self,
        filepaths: list[str],
        remote_directory: str,
        mimetype: str | None = None,
        chunksize: int | None = None,
        num_process: int = 1,
    ) -> None:
        """Upload each local file into ``remote_directory`` under its base name, ``num_process`` at a time."""
        if isinstance(filepaths, str):
            raise ValueError("put_multiple takes a list of file paths; use put() to upload a single file")
        jobs = [
            (p, os.path.join(remote_directory, os.path.basename(p)), mimetype, chunksize) for p in filepaths
        ]
        if num_process <= 1:
            for job in jobs:
                self.put(*job)
            return
        # fork: the children inherit this client as it is (credentials included), nothing is pickled
        with multiprocessing.get_context("fork").Pool(num_process, _adopt_client, (self,)) as pool:
            pool.starmap(_put_in_child, jobs)

    def put_string(self, contents: str | bytes, dest_path: str, mimetype: str | None = None) -> None:
        """Upload ``contents`` (a str is encoded as UTF-8) as the object."""
        data = contents.encode("utf-8") if isinstance(contents, str) else contents
        self._put_stream(io.BytesIO(data), dest_path, mimetype, None, bool(data))

    def _put_stream(
        self, stream: Any, dest_path: str, mimetype: str | None, chunksize: int | None, resumable: bool
    ) -> None:
        mimetype = mimetype or mimetypes.guess_type(dest_path)[0] or DEFAULT_MIMETYPE
        sizing = {"chunksize": chunksize} if chunksize else {}
        media = _google("googleapiclient.http").MediaIoBaseUpload(
            stream, mimetype, resumable=resumable, **sizing
        )
        with _explained("upload to", dest_path, self.root_url):
            self._do_put(media, dest_path)

    def mkdir(self, path: str, parents: bool = True, raise_if_exists: bool = False) -> None:
        """Write the directory marker ``path/`` (an empty object) unless the directory exists."""
        if self.exists(path):
            if raise_if_exists:
                raise FileAlreadyExists(f"{path} exists already")
            if not self.isdir(path):
                raise NotADirectory(f"{path} is an object, not a directory")
            return
        self.put_string(b"", self._add_path_delimiter(path), mimetype="text/plain")

    def copy(self, source_path: str, destination_path: str) -> None:
        """Copy an object, or every object of a directory, on the server's side."""
        src_bucket, src_obj = self._path_to_bucket_and_key(source_path)
        dest_bucket, dest_obj = self._path_to_bucket_and_key(destination_path)
        with _explained("copy", source_path, self.root_url):
            if self.isdir(source_path):
                src_prefix, dest_prefix = (
                    self._add_path_delimiter(src_obj),
                    self._add_path_delimiter(dest_obj),
                )
                pairs = [
                    (item["name"], dest_prefix + item["name"][len(src_prefix) :])
                    for item in self._list_iter(src_bucket, src_prefix)
                ]
            else:
                pairs = [(src_obj, dest_obj)]
            for source, destination in pairs:
                self.client.objects().copy(
                    sourceBucket=src_bucket,
                    sourceObject=source,
                    destinationBucket=dest_bucket,
                    destinationObject=destination,
                    body={},
                ).execute()
            _wait_for_consistency(lambda: all(self._obj_exists(dest_bucket, d) for _s, d in pairs))

    def rename(self, *args: Any, **kwargs: Any) -> None:
        """Alias of `move`."""
        self.move(*args, **kwargs)

    def move(self, source_path: str, destination_path: str) -> None:
        """Copy, then remove the source (GCS has no rename)."""
        self.copy(source_path, destination_path)
        self.remove(source_path)

    def listdir(self, path: str) -> Iterator[str]:
        """The ``gs://`` path of every object under ``path`` (at any depth, the directory marker included)."""
        bucket, obj = self._path_to_bucket_and_key(path)
        prefix = "" if self._is_root(obj) else self._add_path_delimiter(obj)
        base = self._add_path_delimiter(path)
        with _explained("list", path, self.root_url):
            for item in self._list_iter(bucket, prefix):
                yield base + item["name"][len(prefix) :]

    def list_wildcard(self, wildcard_path: str) -> Iterator[str]:
        """The paths ``listdir`` gives that match ``wildcard_path`` (one ``*``, after its last ``/``)."""
        path, pattern = wildcard_path.rsplit("/", 1)
        parts = pattern.split("*")
        if "*" in path or len(parts) != 2:
            raise _BadGCSPath(f"{wildcard_path!r}: use one '*', after the last '/' (gs://bucket/dir/*.csv)")
        head, tail = f"{path}/{parts[0]}", parts[1]
        for candidate in self.listdir(path):
            if (
                candidate.startswith(head)
                and candidate.endswith(tail)
                and len(candidate) >= len(head) + len(tail)
            ):
                yield candidate

    @gcs_retry
    def download(
        self, path: str, chunksize: int | None = None, chunk_callback: Callable[[Any], bool] = lambda _: False
    ) -> _DeleteOnCloseFile:
        """The object's content in a local temporary file, deleted when closed; ``chunk_callback(fp)``
        returning True after a chunk stops the download there."""
        bucket, obj = self._path_to_bucket_and_key(path)
        with _explained("read", path, self.root_url):
            size = int(self.client.objects().get(bucket=bucket, object=obj).execute()["size"])
            with tempfile.NamedTemporaryFile(prefix="luigi-gcs-download-", delete=False) as fp:
                try:
                    if size:
                        self._fetch(bucket, obj, fp, chunksize or self.chunksize, chunk_callback)
                except BaseException:
                    fp.close()
                    os.remove(fp.name)  # a failed download leaves no half-written copy behind
                    raise
        return _DeleteOnCloseFile(fp.name, "r")

    def _fetch(
        self, bucket: str, obj: str, fp: Any, chunksize: int, chunk_callback: Callable[[Any], bool]
    ) -> None:
        request = self.client.objects().get_media(bucket=bucket, object=obj)
        downloader = _google("googleapiclient.http").MediaIoBaseDownload(fp, request, chunksize=chunksize)
        done = False
        while not done:
            _status_, done = downloader.next_chunk()
            done = done or chunk_callback(fp)


_child_client: GCSClient | None = None


def _adopt_client(client: GCSClient) -> None:
    """In a `put_multiple` child: use the parent's client on connections of its own."""
    global _child_client
    client.client.close()  # drops the parent's sockets from this copy only; new ones open on first use
    _child_client = client


def _put_in_child(filename: str, dest_path: str, mimetype: str | None, chunksize: int | None) -> None:
    assert _child_client is not None, "set by the pool's initializer"
    _child_client.put(filename, dest_path, mimetype, chunksize)


class _DeleteOnCloseFile(io.FileIO):
    """A downloaded copy that deletes itself when closed (closing twice is fine)."""

    def close(self) -> None:
        super().close()
        with contextlib.suppress(FileNotFoundError):
            os.remove(str(self.name))


class AtomicGCSFile(StagedUpload):
    """A local file uploaded to ``path`` (``gcs_client.put``) when it closes: the object appears whole or
    not at all, and the local file is deleted either way."""

    local_prefix = "luigi-gcs"

    def __init__(self, path: str, gcs_client: GCSClient) -> None:
        self.gcs_client = gcs_client
        super().__init__(gcs_client, path)


class GCSTarget(FileSystemTarget):
    """The object at ``gs://<bucket>/<object>``; ``open('w')`` uploads it when the stream closes."""

    fs: GCSClient = None  # type: ignore[assignment]  # each target gets its client in __init__

    def __init__(self, path: str, format: Format | None = None, client: GCSClient | None = None) -> None:
        super().__init__(path)
        self.format = format if format is not None else get_default_format()
        self.fs = client or GCSClient()

    def open(self, mode: str = "r") -> Any:
        """Open for reading ('r', a downloaded copy) or atomic writing ('w')."""
        if mode == "r":
            return self.format.pipe_reader(FileWrapper(io.BufferedReader(self.fs.download(self.path))))
        if mode == "w":
            return self.format.pipe_writer(AtomicGCSFile(self.path, self.fs))
        raise ValueError(f"Unsupported open mode {mode!r} for GCSTarget {self.path}: use 'r' or 'w'")


class GCSFlagTarget(GCSTarget):
    """A directory of objects that exists once its flag object (``_SUCCESS`` by default) does, as Hadoop
    and Spark jobs mark a finished output folder."""

    def __init__(
        self,
        path: str,
        format: Format | None = None,
        client: GCSClient | None = None,
        flag: str = "_SUCCESS",
    ) -> None:
        if not path.endswith("/"):
            raise ValueError(f"GCSFlagTarget's path must be a directory ending in '/': {path!r}")
        super().__init__(path, format=format, client=client)
        self.flag = flag

    def exists(self) -> bool:
        return self.fs.exists(self.path + self.flag)
