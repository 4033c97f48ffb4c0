"""Running a ``hadoop`` command and following it: `run_and_track_hadoop_job` and what it raises.

Shared by ``hadoop`` (streaming) and ``hadoop_jar``; both reach it as
``luigi.contrib.hadoop.run_and_track_hadoop_job`` at call time, which is the name tests patch.
"""

from __future__ import annotations

import html
import json
import logging
import re
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from types import FrameType, TracebackType
from typing import Any

from luigi import configuration
from luigi.contrib.external_program import _ProgramOutputError

__all__ = ["HadoopJobError", "HadoopRunContext", "fetch_task_failures", "run_and_track_hadoop_job"]

logger = logging.getLogger("luigi-interface")

_TRACKING_URL = re.compile(r"(tracking url|the url to track the job):\s+(?P<url>.+)$")
_JOB_ID = re.compile(r"(running job|submitted hadoop job): (?P<id>\S+)")
_APPLICATION_ID = re.compile(r"submitted application (?P<id>\S+)")
EXCEPTION_HEX_PREFIX = "luigi-exc-hex="  # how mrrunner writes a step's traceback on one line


class HadoopJobError(_ProgramOutputError):
    """A Hadoop job failed: ``message``, with the command's stdout ``out`` and stderr ``err``."""

    def __str__(self) -> str:
        return self.message


class HadoopRunContext:
    """While a job runs: SIGTERM or Ctrl-C kills it on the cluster (the application, else the job)."""

    def __init__(self) -> None:
        self.job_id: str | None = None
        self.application_id: str | None = None
        self._previous_handler: Any = None
        self._installed = False

    def __enter__(self) -> HadoopRunContext:
        # Signal handlers can only be set from the main thread; elsewhere Ctrl-C still kills the job.
        self._installed = threading.current_thread() is threading.main_thread()
        if self._installed:
            self._previous_handler = signal.signal(signal.SIGTERM, self.kill_job)
        return self

    def kill_job(self, captured_signal: int | None = None, stack_frame: FrameType | None = None) -> None:
        """Kill what was submitted; when called for a signal, exit with ``128 + signal``."""
        if self.application_id:
            logger.info("Killing the YARN application %s", self.application_id)
            subprocess.call(["yarn", "application", "-kill", self.application_id])
        elif self.job_id:
            logger.info("Killing the Hadoop job %s", self.job_id)
            subprocess.call(["mapred", "job", "-kill", self.job_id])
        if captured_signal is not None:
            sys.exit(128 + captured_signal)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is KeyboardInterrupt:
            self.kill_job()
        if self._installed:
            signal.signal(signal.SIGTERM, self._previous_handler)


def _follow_line(line: str, context: HadoopRunContext, report_url: Callable[[str], Any] | None) -> bool:
    """Note the job id, application id and tracking URL ``line`` names; False once ``report_url`` broke."""
    lowered = line.strip().lower()
    match = _TRACKING_URL.search(lowered)
    if match and report_url is not None:
        try:
            report_url(match.group("url"))
        except Exception as error:  # a broken callback must not stop the job being followed
            logger.warning("tracking URL callback failed, not calling it again: %s", error)
            return False
    job = _JOB_ID.search(lowered)
    if job:
        context.job_id = job.group("id")
    application = _APPLICATION_ID.search(lowered)
    if application:
        context.application_id = application.group("id")
    return True


def _write_history(arglist: Sequence[str], job_id: str | None) -> None:
    """``[core] history-filename``: the job id, in a file inside the job's output directory."""
    history_filename = configuration.get_config().get("core", "history-filename", "")
    if not history_filename or "-output" not in arglist:
        return
    from luigi.contrib.hdfs import HdfsTarget

    output_dir = arglist[list(arglist).index("-output") + 1]
    with HdfsTarget(f"{output_dir}/{history_filename}").open("w") as history:
        history.write(json.dumps({"job_id": job_id}))


def run_and_track_hadoop_job(
    arglist: Sequence[str], tracking_url_callback: Callable[[str], Any] | None = None, env: Any = None
) -> tuple[str, str]:
    """Run ``arglist``, logging its stderr and reporting its tracking URL; ``(stdout, stderr)`` on success.

    Raises `HadoopJobError` (with both outputs) when the command exits non-zero.
    """
    logger.info("%s", subprocess.list2cmdline(list(arglist)))
    tracking_url = None
    with tempfile.TemporaryFile("w+t") as temp_stdout:
        proc = subprocess.Popen(
            list(arglist),
            stdout=temp_stdout,
            stderr=subprocess.PIPE,
            env=env,
            close_fds=True,
            universal_newlines=True,
        )
        err_lines = []
        with HadoopRunContext() as context:
            while proc.poll() is None:
                line = proc.stderr.readline() if proc.stderr else ""
                if not line:
                    proc.wait()  # stderr is closed: the command is ending
                    continue
                err_lines.append(line)
                url = _TRACKING_URL.search(line.strip().lower())
                if url:
                    tracking_url = url.group("url")
                if not _follow_line(line, context, tracking_url_callback):
                    tracking_url_callback = None
                logger.info("%s", line.rstrip("\n"))  # after the ids it names are noted
        err = "".join(err_lines + [line for line in (proc.stderr or [])])
        temp_stdout.seek(0)
        out = "".join(temp_stdout.readlines())
    if proc.returncode == 0:
        _write_history(arglist, context.job_id)
        return out, err
    raise HadoopJobError(_failure_message(proc.returncode, tracking_url), out, err)


def _failure_message(returncode: int, tracking_url: str | None) -> str:
    message = f"Streaming job failed with exit code {returncode}. "
    if not tracking_url:
        return message + "Also, no tracking url found."
    try:
        task_failures = fetch_task_failures(tracking_url)
    except Exception as error:  # the job's failure is the news; not reaching its pages is a footnote
        return message + f"Additionally, an error occurred when fetching data from {tracking_url}: {error}"
    if not task_failures:
        return message + "Also, could not fetch output from tasks."
    return message + f"Output from tasks below:\n{task_failures}"


def _fetch(url: str, timeout: float) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return str(response.read().decode("utf-8", "replace"))


def fetch_task_failures(tracking_url: str, timeout: float = 60, most: int = 5) -> str:
    """The logs of the failed task attempts, read from a Hadoop 1 JobTracker's pages (``jobdetails.jsp``
    URLs); other tracking URLs (YARN's) have no such pages, so nothing is fetched and "" is returned."""
    if "jobdetails.jsp" not in tracking_url:
        return ""
    failures_url = tracking_url.replace("jobdetails.jsp", "jobfailures.jsp") + "&cause=failed"
    failures_page = _fetch(failures_url, timeout)
    found = re.findall(r'href="([^"]*tasklog[^"]*)"', failures_page)
    links = [urllib.parse.urljoin(failures_url, html.unescape(link)) for link in found]
    logs = []
    for link in [link for link in links if "all=true" in link][:most]:
        page = _fetch(link, timeout)
        text = "\n".join(html.unescape(block) for block in re.findall(r"<pre>(.*?)</pre>", page, re.S))
        logs.append(_decode_exceptions(text))
    return "\n".join(log for log in logs if log)


def _decode_exceptions(text: str) -> str:
    """``text`` with each ``luigi-exc-hex=`` line written back as the traceback it carries."""
    lines = []
    for line in text.splitlines():
        if line.startswith(EXCEPTION_HEX_PREFIX):
            line = bytes.fromhex(line[len(EXCEPTION_HEX_PREFIX) :].strip()).decode("utf-8", "replace")
        lines.append(line)
    return "\n".join(lines)
