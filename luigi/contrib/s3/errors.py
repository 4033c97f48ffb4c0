"""The errors S3 operations raise: Luigi's own few, and botocore's, explained.

A failed request raises botocore's exception itself, as Luigi does (a missing bucket is a ``ClientError``
with code ``NoSuchBucket``, or the client's modelled ``NoSuchBucket``), so code written for Luigi catches
it. `explained_errors` adds a note naming the s3:// path, the cause and the fix; the note never carries a
credential: it is built here from the error code, never from the request.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from luigi.target import FileSystemException

__all__ = [
    "DeprecatedBotoClientException",
    "FileNotFoundException",
    "InvalidDeleteException",
    "explained_errors",
    "is_missing_object",
]


class InvalidDeleteException(FileSystemException):
    """A remove that S3Client refuses: the root of a bucket, or a directory without ``recursive``."""


class FileNotFoundException(FileSystemException, FileNotFoundError):
    """No object at the s3:// path that was read or copied."""


class DeprecatedBotoClientException(Exception):
    """An argument of the old boto (v2) client that boto3 replaced; the message says what to use."""


_BUCKET_CODES = {"NoSuchBucket"}
_AUTH_CAUSES = {
    "InvalidAccessKeyId": "the server does not know the access key id (check [s3] aws_access_key_id)",
    "SignatureDoesNotMatch": "the secret access key is wrong (check [s3] aws_secret_access_key)",
    "InvalidToken": "the session token is invalid (check [s3] aws_session_token)",
    "InvalidClientTokenId": "the server does not know the access key id (check [s3] aws_access_key_id)",
    "ExpiredToken": "the session token has expired (renew [s3] aws_session_token)",
    "TokenRefreshRequired": "the session token has expired (renew [s3] aws_session_token)",
}


def bucket_of(path: str) -> str:
    """The bucket name of an s3:// path, for messages (the text between the scheme and the next slash)."""
    rest = path.split("://", 1)[-1]
    return rest.split("/", 1)[0]


def _client_error_cause(response: dict[str, Any], path: str) -> str:
    """What a ClientError's parsed response means; HEAD answers carry only the HTTP status as code."""
    error = response.get("Error", {})
    code = str(error.get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if code in _BUCKET_CODES:
        return f"bucket {error.get('BucketName') or bucket_of(path)!r} does not exist"
    if code in _AUTH_CAUSES:
        return _AUTH_CAUSES[code]
    if code in ("NoSuchKey", "404") or status == 404:
        return "no such object"
    if code in ("AccessDenied", "403", "AllAccessDisabled") or status == 403:
        return "access denied (the credentials lack permission, or are wrong)"
    message = str(error.get("Message", "")).strip()
    return f"the server answered {code}: {message}" if message else f"the server answered {code or status}"


def explain(action: str, path: str, exc: BaseException) -> str | None:
    """``Cannot <action> <path>: <cause and fix>`` for a botocore error, None for any other error."""
    try:
        from botocore import exceptions as boto_errors
    except ImportError:  # no botocore, so `exc` cannot be one of its errors (it may say boto3 is missing)
        return None

    prefix = f"Cannot {action} {path}"
    if isinstance(exc, boto_errors.ClientError):
        return f"{prefix}: {_client_error_cause(exc.response, path)}"
    if isinstance(exc, boto_errors.NoCredentialsError):
        return (
            f"{prefix}: no AWS credentials were found (set [s3] aws_access_key_id and "
            "aws_secret_access_key, or the AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY environment variables)"
        )
    if isinstance(exc, (boto_errors.EndpointConnectionError, boto_errors.ConnectTimeoutError)):
        return f"{prefix}: cannot connect to {_endpoint(exc)} ({_reason(exc)})"
    if isinstance(exc, (boto_errors.ReadTimeoutError, boto_errors.ConnectionClosedError)):
        return f"{prefix}: the connection to {_endpoint(exc)} failed ({_reason(exc)})"
    return None


def is_missing_object(exc: BaseException) -> bool:
    """True for botocore's answer that an object does not exist (GET's NoSuchKey, HEAD's 404)."""
    try:
        from botocore.exceptions import ClientError
    except ImportError:  # as in explain()
        return False
    return isinstance(exc, ClientError) and str(exc.response.get("Error", {}).get("Code")) in (
        "NoSuchKey",
        "404",
    )


def _endpoint(exc: BaseException) -> str:
    """The scheme and host botocore tried: neither the bucket and key after them, nor a signed query."""
    url = str(getattr(exc, "kwargs", {}).get("endpoint_url", ""))
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.netloc else "the S3 endpoint"


def _reason(exc: BaseException) -> str:
    """The low-level cause botocore wraps, in a few words (e.g. ``connection refused``)."""
    text = str(getattr(exc, "kwargs", {}).get("error") or exc)
    if "Connection refused" in text:
        return "connection refused"
    if "timed out" in text.lower() or "timeout" in text.lower():
        return "timed out"
    if "Name or service not known" in text or "nodename nor servname" in text:
        return "unknown host name"
    return text


@contextlib.contextmanager
def explained_errors(action: str, path: str) -> Iterator[None]:
    """Run the block; a botocore error leaving it is re-raised as itself, as in Luigi (so ``except
    ClientError`` and ``except client.exceptions.NoSuchBucket`` catch it), with a note (Python 3.11+) naming
    ``path``, the cause and the fix."""
    try:
        yield
    except Exception as exc:  # every error re-raises unchanged; only botocore's get a note
        note = explain(action, path, exc)
        if note is not None and sys.version_info >= (3, 11):
            exc.add_note(note)
        raise
