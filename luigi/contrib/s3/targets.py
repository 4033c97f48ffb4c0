"""Targets and external tasks for s3:// paths."""

from __future__ import annotations

import os
import warnings
from typing import Any

from luigi.contrib.s3.client import S3Client
from luigi.contrib.s3.errors import FileNotFoundException, is_missing_object
from luigi.contrib.s3.files import AtomicS3File, ReadableS3File
from luigi.contrib.s3.paths import split_path
from luigi.format import Format, get_default_format
from luigi.parameter import OptionalParameter, Parameter
from luigi.target import FileSystemTarget
from luigi.task import ExternalTask

__all__ = ["S3EmrTarget", "S3EmrTask", "S3FlagTarget", "S3FlagTask", "S3PathTask", "S3Target"]

DEFAULT_FLAG = "_SUCCESS"


class S3Target(FileSystemTarget):
    """An object at an s3:// path; ``open('w')`` uploads it when the stream closes, never half-written.

    ``client`` defaults to an `S3Client` built from the ``[s3]`` config; other keyword arguments are boto3
    upload ``ExtraArgs`` used when writing (ContentType, ServerSideEncryption, ...).
    """

    fs: S3Client = None  # type: ignore[assignment]  # each target gets its client in __init__

    def __init__(
        self,
        path: str | os.PathLike[str],
        format: Format | None = None,
        client: S3Client | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(path)
        split_path(self.path)  # a malformed path fails here, naming itself, not at the first request
        self.format = format if format is not None else get_default_format()
        self.fs = client or S3Client()
        self.s3_options = kwargs

    def open(self, mode: str = "r") -> Any:
        """Open for reading ('r') or atomic writing ('w'); 'b' and 't' are accepted and ignored.

        What the stream takes or yields (str or bytes) is decided by the target's format.
        """
        direction = mode.replace("b", "").replace("t", "")
        if direction == "r":
            return self.format.pipe_reader(self._readable())
        if direction == "w":
            return self.format.pipe_writer(AtomicS3File(self.path, self.fs, **self.s3_options))
        raise ValueError(f"Unsupported open mode {mode!r} for S3Target {self.path}: use 'r' or 'w'")

    def _readable(self) -> ReadableS3File:
        """The object's content as it downloads; Luigi's FileNotFoundException when there is none."""
        try:
            return ReadableS3File(self.fs._object_handle(self.path))
        except Exception as exc:  # only botocore's "no such object" is replaced; the rest propagate
            if not is_missing_object(exc):
                raise
        raise FileNotFoundException(f"Could not find file at {self.path}")


class S3FlagTarget(S3Target):
    """A directory of objects that counts as existing once its flag object (``_SUCCESS``) is there.

    For datasets written in parts, as Hadoop and Spark jobs do: the flag is written last.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        format: Format | None = None,
        client: S3Client | None = None,
        flag: str = DEFAULT_FLAG,
    ) -> None:
        if not os.fspath(path).endswith("/"):
            raise ValueError(
                f"S3FlagTarget requires the path to be to a directory. It must end with a slash ( / ): {path}"
            )
        super().__init__(path, format, client)
        self.flag = flag

    def exists(self) -> bool:
        """True once the flag object exists."""
        return self.fs.exists(self.path + self.flag)


class S3EmrTarget(S3FlagTarget):
    """Deprecated name of `S3FlagTarget`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        warnings.warn("S3EmrTarget is deprecated. Please use S3FlagTarget", DeprecationWarning, stacklevel=2)
        super().__init__(*args, **kwargs)


class S3PathTask(ExternalTask):
    """An object at ``path`` that something outside this pipeline produces."""

    path = Parameter()

    def output(self) -> S3Target:
        return S3Target(self.path)


class S3EmrTask(ExternalTask):
    """Deprecated: a directory that an EMR job flags as done; use `S3FlagTask`."""

    path = Parameter()

    def output(self) -> S3EmrTarget:
        return S3EmrTarget(self.path)


class S3FlagTask(ExternalTask):
    """A flagged directory (see `S3FlagTarget`) that something outside this pipeline produces.

    ``flag`` defaults to ``_SUCCESS``.
    """

    path = Parameter()
    flag = OptionalParameter(default=None)

    def output(self) -> S3FlagTarget:
        return S3FlagTarget(self.path, flag=self.flag or DEFAULT_FLAG)
