"""S3Client: the `FileSystem` of s3:// paths, on boto3."""

from __future__ import annotations

import datetime
import logging
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from luigi.contrib.optional import require
from luigi.contrib.s3.connection import (
    ConnectionOptions,
    check_deprecated_arguments,
    read_s3_config,
    shared_resource,
)
from luigi.contrib.s3.errors import FileNotFoundException, InvalidDeleteException, explained_errors
from luigi.contrib.s3.files import ObjectHandle
from luigi.contrib.s3.paths import (
    S3_DIRECTORY_MARKER_SUFFIX_0,
    add_path_delimiter,
    is_directory_marker,
    is_root,
    split_path,
)
from luigi.target import FileAlreadyExists, FileSystem, MissingParentDirectory

__all__ = ["S3Client"]

logger = logging.getLogger("luigi-interface")

_DELETE_BATCH = 1000  # the most keys one DeleteObjects request takes


def _delete_failure(bucket: str, errors: list[dict[str, Any]]) -> Exception:
    """botocore's ClientError for objects a DeleteObjects request left (it answers 200 even then)."""
    from botocore.exceptions import ClientError

    failed = errors[0]
    message = (
        f"{len(errors)} object(s) were not deleted, e.g. s3://{bucket}/{failed.get('Key')}: "
        f"{failed.get('Message')}"
    )
    return ClientError({"Error": {"Code": str(failed.get("Code")), "Message": message}}, "DeleteObjects")


def _status(exc: Exception) -> int | None:
    """The HTTP status of a botocore ClientError, None for other errors."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return None
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return int(status) if status is not None else None


def _as_utc(moment: datetime.datetime | None) -> datetime.datetime | None:
    """Naive datetimes are taken as UTC, the zone S3 reports modification times in."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=datetime.timezone.utc)


def _in_window(item: dict[str, Any], window: tuple[datetime.datetime | None, ...]) -> bool:
    """True if the listed object was modified strictly inside the (start, end) window (None: open)."""
    start, end = window
    modified = item["LastModified"]
    return (start is None or start < modified) and (end is None or modified < end)


class S3Client(FileSystem):
    """Reads, writes, lists and deletes objects under s3:// paths.

    Options come from the ``[s3]`` config section; constructor arguments override them. Credentials left
    unset fall back to boto3's own chain (environment, ``~/.aws``, instance roles).
    """

    DEFAULT_PART_SIZE = 8388608
    DEFAULT_THREADS = 100

    def __init__(
        self,
        aws_access_key_id: str | None = None,
        aws_secret_access_key: str | None = None,
        aws_session_token: str | None = None,
        **kwargs: Any,
    ) -> None:
        overrides = {
            "aws_access_key_id": aws_access_key_id,
            "aws_secret_access_key": aws_secret_access_key,
            "aws_session_token": aws_session_token,
            **kwargs,
        }
        self._connection = ConnectionOptions.merge(read_s3_config(), overrides)
        self._resource: Any = None

    def __repr__(self) -> str:
        endpoint = self._connection.endpoint_url or "AWS"
        return f"S3Client(endpoint={endpoint}, credentials={self._connection.credentials_source()})"

    # -- the boto3 objects -------------------------------------------------------------------------------

    @property
    def _client(self) -> Any:
        """The low-level boto3 client: the resource's own, as in Luigi (thread-safe, unlike the resource)."""
        return self.s3.meta.client

    @property
    def s3(self) -> Any:
        """The boto3 S3 *resource*, made by ``boto3.resource("s3", ...)`` with this client's options.

        Shared by the clients of this process with the same options (see `shared_resource`); one assigned
        here is used instead.
        """
        if self._resource is not None:
            return self._resource
        return shared_resource(self._connection)

    @s3.setter
    def s3(self, resource: Any) -> None:
        self._resource = resource

    # -- queries ---------------------------------------------------------------------------------------

    def exists(self, path: str) -> bool:
        """True if ``path`` is an object or a directory (the root of an existing bucket counts)."""
        bucket, key = split_path(path)
        with explained_errors("check", path):
            if is_root(key):
                return self._bucket_exists(bucket)
            if not key.endswith("/") and self._object_exists(bucket, key):
                return True
            if self._is_prefix(bucket, key):
                return True
        logger.debug("Path %s does not exist", path)
        return False

    def isdir(self, path: str) -> bool:
        """True if objects live below ``path`` or a directory marker says it is a directory."""
        bucket, key = split_path(path)
        with explained_errors("check", path):
            if is_root(key):
                return self._bucket_exists(bucket)
            return self._is_prefix(bucket, key)

    is_dir = isdir

    def get_key(self, path: str) -> Any:
        """The boto3 ``ObjectSummary`` of the object at ``path``, or None when there is none."""
        bucket, key = split_path(path)
        with explained_errors("check", path):
            if is_root(key) or not self._object_exists(bucket, key):
                return None
        return self.s3.ObjectSummary(bucket, key)

    def listdir(
        self,
        path: str,
        start_time: datetime.datetime | None = None,
        end_time: datetime.datetime | None = None,
        return_key: bool = False,
    ) -> Iterator[Any]:
        """Yield the full s3:// path of every object below directory ``path``, recursively.

        Only objects modified strictly between ``start_time`` and ``end_time`` (when given) are listed;
        directory markers are not files and are skipped. ``return_key`` yields ``ObjectSummary`` objects.
        """
        directory = add_path_delimiter(path)
        for relative, item in self._listing(path, start_time, end_time):
            yield self.s3.ObjectSummary(item["Bucket"], item["Key"]) if return_key else directory + relative

    def list(
        self,
        path: str,
        start_time: datetime.datetime | None = None,
        end_time: datetime.datetime | None = None,
        return_key: bool = False,
    ) -> Iterator[Any]:
        """Like `listdir`, but yield paths relative to ``path``."""
        for relative, item in self._listing(path, start_time, end_time):
            yield self.s3.ObjectSummary(item["Bucket"], item["Key"]) if return_key else relative

    # -- reading -------------------------------------------------------------------------------------------

    def get(self, s3_path: str, destination_local_path: str) -> None:
        """Download the object at ``s3_path`` to a local file (written under a temporary name first)."""
        bucket, key = split_path(s3_path)
        with explained_errors("download", s3_path):
            self._client.download_file(bucket, key, destination_local_path)

    def get_as_bytes(self, s3_path: str) -> bytes:
        """The content of the object at ``s3_path``."""
        bucket, key = split_path(s3_path)
        with explained_errors("read", s3_path):
            body = self._client.get_object(Bucket=bucket, Key=key)["Body"]
            try:
                return bytes(body.read())
            finally:
                body.close()

    def get_as_string(self, s3_path: str, encoding: str = "utf-8") -> str:
        """The content of the object at ``s3_path``, decoded."""
        return self.get_as_bytes(s3_path).decode(encoding)

    # -- writing -------------------------------------------------------------------------------------------

    def put(self, local_path: str, destination_s3_path: str, **kwargs: Any) -> None:
        """Upload a local file; ``kwargs`` are boto3 upload ``ExtraArgs`` (ContentType, ...)."""
        check_deprecated_arguments(kwargs)
        self.put_multipart(local_path, destination_s3_path, **kwargs)

    def put_string(self, content: str | bytes, destination_s3_path: str, **kwargs: Any) -> None:
        """Store ``content`` (str is stored UTF-8 encoded) as the object at ``destination_s3_path``."""
        check_deprecated_arguments(kwargs)
        bucket, key = split_path(destination_s3_path)
        body = content.encode("utf-8") if isinstance(content, str) else content
        with explained_errors("write", destination_s3_path):
            self._client.put_object(Bucket=bucket, Key=key, Body=body, **kwargs)

    def put_multipart(
        self, local_path: str, destination_s3_path: str, part_size: int = DEFAULT_PART_SIZE, **kwargs: Any
    ) -> None:
        """Upload a local file in ``part_size`` parts when it is bigger than one part.

        S3 shows a multipart object only once every part has arrived, so readers never see half a file,
        and a failed upload is aborted rather than left to be billed.
        """
        check_deprecated_arguments(kwargs)
        bucket, key = split_path(destination_s3_path)
        config = self._transfer_config(part_size)
        with explained_errors("write", destination_s3_path), open(local_path, "rb") as source:
            self._client.upload_fileobj(source, bucket, key, ExtraArgs=kwargs or None, Config=config)

    def mkdir(self, path: str, parents: bool = True, raise_if_exists: bool = False) -> None:
        """Make ``path`` a directory by storing an empty ``<path>/`` marker (unless it already is one)."""
        bucket, key = split_path(path)
        if is_root(key):
            return
        if self.isdir(path):
            if raise_if_exists:
                raise FileAlreadyExists(f"Cannot create directory {path}: it already exists")
            return
        parent = path.rstrip("/").rsplit("/", 1)[0]
        if not parents and not self.isdir(parent):
            raise MissingParentDirectory(
                f"Cannot create directory {path}: its parent {parent} does not exist (pass parents=True)"
            )
        self.put_string(b"", add_path_delimiter(path))

    # -- copying, moving, removing -----------------------------------------------------------------------

    def copy(  # type: ignore[override]  # Luigi's argument names and (count, bytes) result
        self,
        source_path: str,
        destination_path: str,
        threads: int = DEFAULT_THREADS,
        start_time: datetime.datetime | None = None,
        end_time: datetime.datetime | None = None,
        part_size: int = DEFAULT_PART_SIZE,
        **kwargs: Any,
    ) -> tuple[int, int]:
        """Copy an object, or every object below a directory, server side; return (count, total bytes).

        For a directory, ``start_time``/``end_time`` select objects by modification time and ``threads``
        copies run at once. ``kwargs`` are boto3 copy ``ExtraArgs``.
        """
        check_deprecated_arguments(kwargs)
        src_bucket, src_key = split_path(source_path)
        split_path(destination_path)  # reject a malformed destination before any request
        what = f"{source_path} to {destination_path}"
        with explained_errors("copy", what):
            is_directory = is_root(src_key) or src_key.endswith("/")
            size = None if is_directory else self._object_size(src_bucket, src_key)
            if size is not None:
                self._copy_object(source_path, destination_path, part_size, kwargs)
                return 1, size
            if not self.isdir(source_path):
                raise FileNotFoundException(f"Cannot copy {what}: no such object or directory")
            window = (_as_utc(start_time), _as_utc(end_time))
            return self._copy_directory(source_path, destination_path, threads, window, part_size, kwargs)

    def move(  # type: ignore[override]  # Luigi's argument names
        self, source_path: str, destination_path: str, **kwargs: Any
    ) -> None:
        """Copy an object or directory to ``destination_path``, then remove the source."""
        self.copy(source_path, destination_path, **kwargs)
        self.remove(source_path)

    def remove(  # type: ignore[override]  # Luigi's S3Client tells whether anything was deleted
        self, path: str, recursive: bool = True, skip_trash: bool = True
    ) -> bool:
        """Delete an object, or a directory with everything below it; False when nothing was there.

        Refuses (InvalidDeleteException) to delete a bucket's root, or a directory without ``recursive``.
        """
        bucket, key = split_path(path)
        if is_root(key):
            raise InvalidDeleteException(f"Cannot delete root of bucket at path {path}")
        with explained_errors("remove", path):
            if not key.endswith("/") and self._object_exists(bucket, key):
                self._client.delete_object(Bucket=bucket, Key=key)
                return True
            if not self._is_prefix(bucket, key):
                logger.debug("Could not delete %s; path does not exist", path)
                return False
            if not recursive:
                raise InvalidDeleteException(f"Path {path} is a directory. Must use recursive delete")
            prefix = add_path_delimiter(key)
            keys = [item["Key"] for item in self._objects(bucket, prefix)]
            keys.append(key.rstrip("/") + S3_DIRECTORY_MARKER_SUFFIX_0)
            self._delete_keys(bucket, keys, path)
        return True

    # -- compatibility helpers (Luigi's private names, used by code built on S3Client) ------------------

    @staticmethod
    def _path_to_bucket_and_key(path: str) -> tuple[str, str]:
        return split_path(path)

    @staticmethod
    def _is_root(key: str) -> bool:
        return is_root(key)

    @staticmethod
    def _add_path_delimiter(key: str) -> str:
        return add_path_delimiter(key)

    @staticmethod
    def _check_deprecated_argument(**kwargs: Any) -> None:
        check_deprecated_arguments(kwargs)

    def _object_handle(self, path: str) -> ObjectHandle:
        """A handle on the object at ``path`` for `ReadableS3File` (no request is made yet)."""
        bucket, key = split_path(path)
        with explained_errors("read", path):
            return ObjectHandle(self._client, bucket, key)

    # -- requests ------------------------------------------------------------------------------------------

    def _bucket_exists(self, bucket: str) -> bool:
        try:
            self._client.head_bucket(Bucket=bucket)
        except Exception as exc:  # only a botocore 404 means "no bucket"; the rest propagate
            if _status(exc) == 404:
                return False
            if _status(exc) == 403:
                self._diagnose(bucket, "")
            raise
        return True

    def _object_size(self, bucket: str, key: str) -> int | None:
        """The size of object ``key``, or None when there is no such object."""
        try:
            head = self._client.head_object(Bucket=bucket, Key=key)
        except Exception as exc:  # as in _bucket_exists
            if _status(exc) == 404:
                return None
            if _status(exc) == 403:
                self._diagnose(bucket, key)
            raise
        return int(head.get("ContentLength", 0))

    def _object_exists(self, bucket: str, key: str) -> bool:
        return self._object_size(bucket, key) is not None

    def _diagnose(self, bucket: str, key: str) -> None:
        """Turn an unexplained 403 (HEAD answers have no body) into the specific error a listing reports."""
        self._client.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1)

    def _is_prefix(self, bucket: str, key: str) -> bool:
        """True if objects live below ``key/`` or a ``key_$folder$`` marker exists."""
        listing = self._client.list_objects_v2(Bucket=bucket, Prefix=add_path_delimiter(key), MaxKeys=1)
        if listing.get("KeyCount", 0) > 0:
            return True
        return self._object_exists(bucket, key.rstrip("/") + S3_DIRECTORY_MARKER_SUFFIX_0)

    def _objects(self, bucket: str, prefix: str) -> Iterator[dict[str, Any]]:
        """Every object whose key starts with ``prefix``, in key order, each with its ``Bucket`` added."""
        paginator = self._client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                yield {**item, "Bucket": bucket}

    def _listing(
        self, path: str, start_time: datetime.datetime | None, end_time: datetime.datetime | None
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """(path relative to the directory, object) for the files below directory ``path`` in the window."""
        bucket, key = split_path(path)
        prefix = add_path_delimiter(key)
        start, end = _as_utc(start_time), _as_utc(end_time)
        with explained_errors("list", path):
            for item in self._objects(bucket, prefix):
                if is_directory_marker(item["Key"]):
                    continue
                if _in_window(item, (start, end)):
                    yield item["Key"][len(prefix) :], item

    def _delete_keys(self, bucket: str, keys: Sequence[str], path: str) -> None:
        for first in range(0, len(keys), _DELETE_BATCH):
            batch = [{"Key": key} for key in keys[first : first + _DELETE_BATCH]]
            answer = self._client.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
            errors = answer.get("Errors") or []
            if errors:
                raise _delete_failure(bucket, errors)

    def _transfer_config(self, part_size: int) -> Any:
        transfer = require("boto3.s3.transfer", "s3", "luigi.contrib.s3")
        return transfer.TransferConfig(multipart_threshold=part_size, multipart_chunksize=part_size)

    def _copy_object(
        self, source_path: str, destination_path: str, part_size: int, extra: dict[str, Any]
    ) -> None:
        src_bucket, src_key = split_path(source_path)
        dst_bucket, dst_key = split_path(destination_path)
        self._client.copy(
            {"Bucket": src_bucket, "Key": src_key},
            dst_bucket,
            dst_key,
            ExtraArgs=extra or None,
            Config=self._transfer_config(part_size),
        )

    def _copy_directory(
        self,
        source_path: str,
        destination_path: str,
        threads: int,
        window: tuple[datetime.datetime | None, datetime.datetime | None],
        part_size: int,
        extra: dict[str, Any],
    ) -> tuple[int, int]:
        src_bucket, src_key = split_path(source_path)
        src_prefix = add_path_delimiter(src_key)
        destination = add_path_delimiter(destination_path)
        items = [
            item
            for item in self._objects(src_bucket, src_prefix)
            if item["Key"][len(src_prefix) :] not in ("", "/") and _in_window(item, window)
        ]  # the directory's own marker (``dir/``) is not one of its files: Luigi neither copies nor counts it
        if not items:
            return 0, 0
        with ThreadPoolExecutor(max_workers=max(1, min(threads, len(items)))) as pool:
            copies = [
                pool.submit(
                    self._copy_object,
                    f"s3://{src_bucket}/{item['Key']}",
                    destination + item["Key"][len(src_prefix) :],
                    part_size,
                    extra,
                )
                for item in items
            ]
            for done in copies:
                done.result()
        return len(items), sum(int(item.get("Size", 0)) for item in items)
