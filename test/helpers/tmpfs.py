"""A real, tiny tmpfs for tests of a full disk: mounted for the test, filled on demand, unmounted after."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def tiny_tmpfs(where: Path, size: str = "2m") -> Iterator[Path]:
    """Mount a tmpfs of ``size`` at ``where``; skipped where the machine forbids it (never under CI)."""
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        if os.environ.get("CI"):
            raise AssertionError(f"cannot mount a tmpfs in CI: {mounted.stderr.strip()}")
        pytest.skip(f"this machine does not allow mounting a tmpfs: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(directory: Path, name: str = "filler") -> Path:
    """Write zeros into ``directory/name`` until the file system is full; returns the file."""
    path = directory / name
    block = b"\0" * 4096
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while True:
            os.write(fd, block)
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
    finally:
        os.close(fd)
    return path
