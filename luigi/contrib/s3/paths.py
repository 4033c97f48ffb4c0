"""s3:// path arithmetic: splitting into bucket and key, directory prefixes, directory markers."""

from __future__ import annotations

__all__ = [
    "S3_DIRECTORY_MARKER_SUFFIX_0",
    "S3_DIRECTORY_MARKER_SUFFIX_1",
    "add_path_delimiter",
    "is_directory_marker",
    "is_root",
    "split_path",
]

# The two conventions for "this directory exists" objects: Hadoop's `dir_$folder$` and the console's `dir/`.
S3_DIRECTORY_MARKER_SUFFIX_0 = "_$folder$"
S3_DIRECTORY_MARKER_SUFFIX_1 = "/"

_SCHEMES = ("s3", "s3a", "s3n")


def split_path(path: str) -> tuple[str, str]:
    """``s3://bucket/some/key`` -> ``("bucket", "some/key")``.

    Split by hand rather than with urlsplit, so keys may hold ``?`` and ``#`` like any other character.
    """
    scheme, sep, rest = path.partition("://")
    if not sep or scheme.lower() not in _SCHEMES:
        raise ValueError(f"Not an S3 path: {path!r} (S3 paths look like s3://bucket/key)")
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise ValueError(f"S3 path {path!r} names no bucket (S3 paths look like s3://bucket/key)")
    return bucket, key.lstrip("/")


def is_root(key: str) -> bool:
    """True for the key of a bucket's root (``s3://bucket`` or ``s3://bucket/``)."""
    return key in ("", "/")


def add_path_delimiter(path: str) -> str:
    """``path`` with one trailing slash, so it names a directory prefix (the empty root stays empty)."""
    return path if path == "" or path.endswith("/") else path + "/"


def is_directory_marker(key: str) -> bool:
    """True for an object that only marks a directory as existing."""
    return key.endswith(S3_DIRECTORY_MARKER_SUFFIX_1) or key.endswith(S3_DIRECTORY_MARKER_SUFFIX_0)
