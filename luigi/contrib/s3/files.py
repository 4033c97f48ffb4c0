"""The streams behind `S3Target.open`: reading an object as it downloads, writing one atomically."""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from luigi.contrib.s3.errors import explained_errors
from luigi.contrib.staged_upload import StagedUpload

if TYPE_CHECKING:
    from luigi.contrib.s3.client import S3Client

__all__ = ["AtomicS3File", "ObjectHandle", "ReadableS3File"]


class _StreamingBodyAdaptor(io.RawIOBase):
    """A botocore ``StreamingBody`` as a raw stream, so `io.BufferedReader` can buffer and split lines."""

    def __init__(self, streaming_body: Any) -> None:
        self.body = streaming_body

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.body.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self.body.close()
        super().close()


@dataclass(frozen=True)
class ObjectHandle:
    """The little of a boto3 ``Object`` that `ReadableS3File` needs, on the resource's low-level client.

    Cheaper than an ``Object``, which loads its part of the resource model.
    """

    client: Any = field(repr=False)
    bucket_name: str
    key: str

    def get(self, **kwargs: Any) -> dict[str, Any]:
        """The GetObject answer (its ``Body`` streams the content)."""
        return dict(self.client.get_object(Bucket=self.bucket_name, Key=self.key, **kwargs))


class ReadableS3File(io.BufferedReader):
    """The content of an S3 object, read as it downloads; ``s3_key`` is a boto3 Object or ObjectSummary.

    The download starts here (one GET); iterating yields lines.
    """

    def __init__(self, s3_key: Any) -> None:
        self.s3_key = s3_key
        path = f"s3://{s3_key.bucket_name}/{s3_key.key}"
        with explained_errors("read", path):
            body = s3_key.get()["Body"]
        super().__init__(_StreamingBodyAdaptor(body))


class AtomicS3File(StagedUpload):
    """A file written locally and uploaded to ``path`` when closed: the object appears whole or not at all.

    Leaving a ``with`` block through an exception uploads nothing. ``kwargs`` are boto3 upload ``ExtraArgs``
    (ContentType, ServerSideEncryption, ...).
    """

    local_prefix = "luigi-s3"

    def __init__(self, path: str, s3_client: S3Client, **kwargs: Any) -> None:
        self.s3_client = s3_client
        self.s3_options = kwargs
        super().__init__(s3_client, path)

    def _upload(self, staged_path: str) -> None:
        self.s3_client.put_multipart(staged_path, self.path, **self.s3_options)
