"""Tests that need a server or a program: skip locally when it is missing, fail when ``CI`` is set.

CI (``.ci/run``) installs every service the tests use, so there a missing one is a broken set-up, not a
reason to skip.
"""

from __future__ import annotations

import os
import shutil
from typing import NoReturn

import pytest


def unavailable(why: str) -> NoReturn:
    """Skip the test because ``why`` (locally), or fail it (``CI`` set)."""
    if os.environ.get("CI"):
        pytest.fail(f"CI must run this test, but {why}")
    pytest.skip(why)


def require_program(name: str, package: str) -> str:
    """The path of program ``name``; otherwise skip or fail, naming the Debian ``package`` to install."""
    path = shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if os.access(p, os.X_OK)), None
    )
    if path is None:
        unavailable(f"{name} is not installed (apt-get install {package})")
    return path


def require_module(name: str, extra: str) -> None:
    """Skip or fail unless the Python module ``name`` (from this package's extra ``extra``) imports."""
    try:
        __import__(name)
    except ImportError:
        unavailable(f"the Python module {name} is not installed (pip install -e '.[{extra}]')")
