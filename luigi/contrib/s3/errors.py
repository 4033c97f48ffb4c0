"""The errors S3 operations raise, and the one place botocore's exceptions become them.

Every message names the s3:// path and what went wrong, and never carries a credential: the texts are
built here from the error code, never from the request.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from luigi.target import FileSystemException

__all__ = [
    "DeprecatedBotoClientException",
    "FileNotFoundException",
    "InvalidDeleteException",
    "S3AccessDeniedError",
    "S3AuthenticationError",
    "S3BucketNotFoundError",
    "S3ConnectionError",
    "S3Error",
    "translated_errors",
]


class InvalidDeleteException(FileSystemException):
    """A remove that S3Client refuses: the root of a bucket, or a directory without ``recursive``."""


class FileNotFoundException(FileSystemException, FileNotFoundError):
    """No object at the s3:// path that was read or copied."""


class DeprecatedBotoClientException(Exception):
    """An argument of the old boto (v2) client that boto3 replaced; the message says what to use."""


class S3Error(FileSystemException):
    """An S3 request failed; the message names the s3:// path and the cause."""


class S3BucketNotFoundError(S3Error):
    """The bucket of the path does not exist."""


class S3AuthenticationError(S3Error):
    """The server rejected the credentials (unknown key id, wrong secret, bad or expired token, none)."""


class S3AccessDeniedError(S3Error):
    """The credentials are valid but not allowed to do this."""


class S3ConnectionError(S3Error, ConnectionError):
    """The S3 endpoint could not be reached."""


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


def _client_error(action: str, path: str, response: dict[str, Any]) -> S3Error | FileNotFoundException:
    """The error for a ClientError's parsed response; HEAD answers carry only the HTTP status as code."""
    error = response.get("Error", {})
    code = str(error.get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    prefix = f"Cannot {action} {path}"
    if code in _BUCKET_CODES:
        bucket = error.get("BucketName") or bucket_of(path)
        return S3BucketNotFoundError(f"{prefix}: bucket {bucket!r} does not exist")
    if code in _AUTH_CAUSES:
        return S3AuthenticationError(f"{prefix}: {_AUTH_CAUSES[code]}")
    if code in ("NoSuchKey", "404") or status == 404:
        return FileNotFoundException(f"{prefix}: no such object")
    if code in ("AccessDenied", "403", "AllAccessDisabled") or status == 403:
        return S3AccessDeniedError(f"{prefix}: access denied (the credentials lack permission, or are wrong)")
    message = str(error.get("Message", "")).strip()
    detail = f"{code}: {message}" if message else code or f"HTTP {status}"
    return S3Error(f"{prefix}: the server answered {detail}")


def translate(action: str, path: str, exc: BaseException) -> BaseException:
    """The S3Error (or FileNotFoundException) that stands for botocore's ``exc``, or ``exc`` itself."""
    try:
        from botocore import exceptions as boto_errors
    except ImportError:  # no botocore, so `exc` cannot be one of its errors (it may say boto3 is missing)
        return exc

    prefix = f"Cannot {action} {path}"
    if isinstance(exc, boto_errors.ClientError):
        return _client_error(action, path, exc.response)
    if isinstance(exc, boto_errors.NoCredentialsError):
        return S3AuthenticationError(
            f"{prefix}: no AWS credentials were found (set [s3] aws_access_key_id and "
            "aws_secret_access_key, or the AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY environment variables)"
        )
    if isinstance(exc, (boto_errors.EndpointConnectionError, boto_errors.ConnectTimeoutError)):
        return S3ConnectionError(f"{prefix}: cannot connect to {_endpoint(exc)} ({_reason(exc)})")
    if isinstance(exc, (boto_errors.ReadTimeoutError, boto_errors.ConnectionClosedError)):
        return S3ConnectionError(f"{prefix}: the connection to {_endpoint(exc)} failed ({_reason(exc)})")
    return exc


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
def translated_errors(action: str, path: str) -> Iterator[None]:
    """Run the block, re-raising botocore failures as one S3Error naming ``path`` and the cause."""
    try:
        yield
    except Exception as exc:  # every botocore error goes through translate(); the rest re-raise as they are
        translated = translate(action, path, exc)
        if translated is exc:
            raise
        translated.original = exc  # type: ignore[attr-defined]
        raise translated from None
