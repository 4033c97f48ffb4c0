"""Amazon S3 (and S3-compatible stores such as MinIO) for Luigi: `S3Client`, `S3Target` and friends.

Needs the ``s3`` extra (boto3), imported when a client first talks to S3, not at import. Options are read
from the ``[s3]`` config section: credentials (``aws_access_key_id``, ``aws_secret_access_key``,
``aws_session_token``, or ``aws_role_arn`` with ``aws_role_session_name``), ``region_name``,
``profile_name``, ``endpoint_url``, ``use_ssl``, ``verify`` and botocore settings (``connect_timeout``,
``read_timeout``, ``max_attempts``, ``retry_mode``, ``addressing_style``, ...).
"""

from __future__ import annotations

from luigi.contrib.s3.client import S3Client
from luigi.contrib.s3.errors import (
    DeprecatedBotoClientException,
    FileNotFoundException,
    InvalidDeleteException,
)
from luigi.contrib.s3.files import AtomicS3File, ReadableS3File
from luigi.contrib.s3.paths import S3_DIRECTORY_MARKER_SUFFIX_0, S3_DIRECTORY_MARKER_SUFFIX_1
from luigi.contrib.s3.targets import (
    S3EmrTarget,
    S3EmrTask,
    S3FlagTarget,
    S3FlagTask,
    S3PathTask,
    S3Target,
)

__all__ = [
    "S3_DIRECTORY_MARKER_SUFFIX_0",
    "S3_DIRECTORY_MARKER_SUFFIX_1",
    "AtomicS3File",
    "DeprecatedBotoClientException",
    "FileNotFoundException",
    "InvalidDeleteException",
    "ReadableS3File",
    "S3Client",
    "S3EmrTarget",
    "S3EmrTask",
    "S3FlagTarget",
    "S3FlagTask",
    "S3PathTask",
    "S3Target",
]
