"""Reading a Spark driver's output: the Spark UI's address, and the driver's own error when it fails."""

from __future__ import annotations

import re
import socket
from collections.abc import Mapping, Sequence
from typing import Any

from luigi.contrib.external_program import ExternalProgramRunError

__all__ = ["TRACKING_URL_PATTERN", "SparkJobError", "SparkUiUrlReader", "driver_error"]

# The Spark UI's address as the driver logs it: Spark 3 ("Bound SparkUI to ..., and started at URL"),
# Spark 4 (the Jetty host, then the port it got), and cluster managers' reports ("tracking URL: URL").
TRACKING_URL_PATTERN = (
    r"Bound SparkUI to \S+, and started at \S+"
    r"|Start Jetty \S+ for SparkUI"
    r"|Successfully started service 'SparkUI' on port \d+"
    r"|tracking URL: https?://\S+"
)
_URL = re.compile(r"https?://[^\s,;]+")
_JETTY_HOST = re.compile(r"Start Jetty (\S+?):\d+ for SparkUI")
_UI_PORT = re.compile(r"'SparkUI' on port (\d+)")
_WILDCARD_HOSTS = ("0.0.0.0", "::", "[::]")

# A log4j line of the driver (timestamp, level): noise when looking for the driver's own error.
_LOG_LINE = re.compile(r"^\d{2}/\d{2}/\d{2} \d{2}:\d{2}:\d{2} (TRACE|DEBUG|INFO|WARN) ")
_JVM_NOISE = ("WARNING: Using incubator modules", "Using Spark's default log4j profile", "\tat ", "\t... ")
DRIVER_ERROR_LINES = 25
DRIVER_ERROR_CHARS = 6000


class SparkUiUrlReader:
    """Turns the driver's log lines matched by TRACKING_URL_PATTERN into the Spark UI's URL."""

    def __init__(self) -> None:
        self._host: str | None = None

    def url_for(self, line: str) -> str:
        """The URL a line gives; "" while only the host is known (Spark 4 logs the port next)."""
        url = _URL.search(line)
        if url:
            return url.group(0).rstrip(".")
        host = _JETTY_HOST.search(line)
        if host:
            self._host = host.group(1)
            return ""
        port = _UI_PORT.search(line)
        if port:
            host_name = self._host if self._host and self._host not in _WILDCARD_HOSTS else socket.getfqdn()
            return f"http://{host_name}:{port.group(1)}"
        return line


class SparkJobError(ExternalProgramRunError):
    """A Spark application failed; ``driver_error`` holds what the driver said about it (also in the text)."""

    def __init__(
        self,
        message: str,
        args: Sequence[str],
        env: Mapping[str, str] | None = None,
        stdout: str | None = None,
        stderr: str | None = None,
        returncode: int | None = None,
        driver_error: str = "",
    ) -> None:
        super().__init__(message, args, env, stdout, stderr, returncode)
        self.driver_error = driver_error

    def __reduce__(self) -> Any:
        fields = (
            self.message,
            self.command,
            self.env,
            self.out,
            self.err,
            self.returncode,
            self.driver_error,
        )
        return (type(self), fields)


def driver_error(stdout: str | None, stderr: str | None) -> str:
    """The driver's own error: its Python traceback, else the last lines that are not Spark's log."""
    for text in (stdout, stderr):
        traceback = _last_python_traceback(text or "")
        if traceback:
            return shorten(traceback)
    for text in (stderr, stdout):  # the JVM reports on stderr, a Python driver on stdout
        meaningful = [line for line in (text or "").splitlines() if _is_meaningful(line)]
        if meaningful:
            return shorten("\n".join(meaningful[-DRIVER_ERROR_LINES:]))
    return "[nothing: see the output below]"


def _last_python_traceback(text: str) -> str:
    """The last Python traceback in ``text``, up to the next driver log line."""
    start = text.rfind("Traceback (most recent call last):")
    if start < 0:
        return ""
    lines = []
    for line in text[start:].splitlines():
        if _LOG_LINE.match(line):
            break
        lines.append(line)
    return "\n".join(lines).strip()


def _is_meaningful(line: str) -> bool:
    return bool(line.strip()) and not _LOG_LINE.match(line) and not line.startswith(_JVM_NOISE)


def shorten(text: str) -> str:
    """``text``, or its end when it is longer than an error message should quote."""
    if len(text) <= DRIVER_ERROR_CHARS:
        return text
    return f"[... {len(text) - DRIVER_ERROR_CHARS} characters not shown]\n{text[-DRIVER_ERROR_CHARS:]}"
