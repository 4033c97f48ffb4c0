"""The error a failing ``hadoop fs`` command raises."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["HDFSCliError"]


class HDFSCliError(Exception):
    """A ``hadoop`` command exited non-zero; carries its exit code and what it printed."""

    def __init__(self, command: Sequence[str] | str, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        message = (
            f"Command {command!r} failed [exit code {returncode}]\n"
            f"---stdout---\n{stdout}\n---stderr---\n{stderr}------------"
        )
        super().__init__(message)
