"""Deprecated location of `luigi.contrib.s3`; import from there instead."""

from __future__ import annotations

import warnings

from luigi.contrib.s3 import *  # noqa: F403  # this module only re-exports
from luigi.contrib.s3 import __all__  # noqa: F401

warnings.warn(
    "luigi.s3 is deprecated and will be removed; import luigi.contrib.s3 instead",
    DeprecationWarning,
    stacklevel=2,
)
