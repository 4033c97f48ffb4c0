"""Extracting a tar archive without letting a member land outside the destination directory.

``SafeExtractor(path).safe_extract(tar_path)`` checks every member first and raises
``RuntimeError("Attempted Path Traversal in Tar File")`` before anything is written when one would escape
``path`` (``../x``, an absolute name, or a link pointing outside); otherwise it extracts them all.
"""

from __future__ import annotations

import os
import tarfile
from collections.abc import Iterable

__all__ = ["PATH_TRAVERSAL_MESSAGE", "SafeExtractor"]

PATH_TRAVERSAL_MESSAGE = "Attempted Path Traversal in Tar File"


class SafeExtractor:
    """Extracts tar files into ``path`` (default: the current directory), refusing path traversal."""

    def __init__(self, path: str | os.PathLike[str] = ".") -> None:
        self.path = os.fspath(path)

    @staticmethod
    def _is_within_directory(directory: str, target: str) -> bool:
        """Whether ``target`` is ``directory`` itself or lies below it (both made absolute)."""
        abs_directory = os.path.abspath(directory)
        abs_target = os.path.abspath(target)
        return os.path.commonpath([abs_directory, abs_target]) == abs_directory

    def safe_extract(
        self,
        tar_path: str | os.PathLike[str],
        members: Iterable[tarfile.TarInfo] | None = None,
        *,
        numeric_owner: bool = False,
    ) -> None:
        """Extract ``members`` (default: all) of ``tar_path`` into ``path``, after checking every one.

        Raises:
            RuntimeError: a member's name, or the target of a link member, resolves outside ``path``;
                nothing has been extracted then.
        """
        with tarfile.open(tar_path) as tar:
            chosen = list(members) if members is not None else tar.getmembers()
            for member in chosen:
                self._check_member(member)
            tar.extractall(self.path, members=chosen, numeric_owner=numeric_owner, filter="tar")

    def _check_member(self, member: tarfile.TarInfo) -> None:
        """RuntimeError unless the member, and what a link member points to, stay inside ``path``."""
        member_path = os.path.join(self.path, member.name)
        if not self._is_within_directory(self.path, member_path):
            raise RuntimeError(PATH_TRAVERSAL_MESSAGE)
        if member.issym():
            pointed = os.path.join(os.path.dirname(member_path), member.linkname)
        elif member.islnk():
            pointed = os.path.join(self.path, member.linkname)
        else:
            return
        if not self._is_within_directory(self.path, pointed):
            raise RuntimeError(PATH_TRAVERSAL_MESSAGE)
