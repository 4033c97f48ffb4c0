"""`HadoopJarJobTask`: a task that runs ``hadoop jar <jar> [main] -D... <args>``, here or over ssh.

Outputs among ``args()`` that do not exist yet are written to a temporary path beside them and moved into
place once the job succeeded, so a failed job leaves no half-written output.
"""

from __future__ import annotations

import logging
import os
import random
import shlex
import warnings
from collections.abc import Callable
from typing import Any, Protocol

import luigi.contrib.hadoop
import luigi.contrib.hdfs
from luigi.contrib.hadoop import BaseHadoopJobTask, HadoopJobError, JobRunner

__all__ = ["HadoopJarJobError", "HadoopJarJobFailed", "HadoopJarJobRunner", "HadoopJarJobTask", "fix_paths"]

logger = logging.getLogger("luigi-interface")


class HadoopJarJobError(Exception):
    """A jar job cannot be run as configured (no jar, a missing jar file, incomplete ssh settings)."""


class HadoopJarJobFailed(HadoopJarJobError, HadoopJobError):
    """The jar's job ran and failed: a `HadoopJobError` (message, out, err) and a `HadoopJarJobError`."""


class JobArguments(Protocol):
    """What ``fix_paths`` reads of a job: its arguments and whether its outputs are written atomically."""

    def args(self) -> list[Any]: ...

    def atomic_output(self) -> bool: ...


def fix_paths(job: JobArguments) -> tuple[list[tuple[luigi.contrib.hdfs.HdfsTarget, str]], list[str]]:
    """``job.args()`` as strings, outputs not yet written swapped for temporary paths.

    Returns ``(tmp_files, args)``; ``tmp_files`` pairs each temporary target with the final path.
    """
    tmp_files = []
    args = []
    for arg in job.args():
        if not isinstance(arg, luigi.contrib.hdfs.HdfsTarget):
            path = getattr(arg, "path", None)  # any target-like object; a plain value is its str()
            args.append(path if path is not None else str(arg))
        elif arg.exists() or not job.atomic_output():
            args.append(arg.path)
        else:
            final_path = arg.path.rstrip("/")
            tmp = luigi.contrib.hdfs.HdfsTarget(f"{final_path}-luigi-tmp-{random.randrange(10**9):09d}")
            logger.info("Using the temporary path %s for %s", tmp.path, arg.path)
            tmp_files.append((tmp, final_path))
            args.append(tmp.path)
    return tmp_files, args


def _ssh_command(ssh_config: dict[str, Any], hadoop_arglist: list[str]) -> list[str]:
    """The ``ssh`` command that runs ``hadoop_arglist`` on the configured host."""
    host, key_file, username = (ssh_config.get(key) for key in ("host", "key_file", "username"))
    if not host or not key_file or not username:
        raise HadoopJarJobError(
            "missing some config for HadoopRemoteJarJobRunner: ssh() must give host, key_file and username"
        )
    arglist = ["ssh", "-i", key_file, "-o", "BatchMode=yes"]
    if ssh_config.get("no_host_key_check", False):
        arglist += ["-o", "UserKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=no"]
    return [*arglist, f"{username}@{host}", " ".join(shlex.quote(arg) for arg in hadoop_arglist)]


class HadoopJarJobRunner(JobRunner):
    """Runs a `HadoopJarJobTask`'s jar with ``hadoop jar``."""

    def run_job(
        self, job: HadoopJarJobTask, tracking_url_callback: Callable[[str], Any] | None = None
    ) -> None:
        if tracking_url_callback is not None:
            warnings.warn(
                "tracking_url_callback is deprecated: the job's set_tracking_url is used",
                DeprecationWarning,
                stacklevel=2,
            )
        jar = job.jar()
        if not jar:
            raise HadoopJarJobError("Jar not defined: HadoopJarJobTask.jar() must return the jar's path")
        hadoop_arglist = [*luigi.contrib.hdfs.load_hadoop_cmd(), "jar", jar]
        main = job.main()
        if main:
            hadoop_arglist.append(main)
        hadoop_arglist += ["-D" + conf for conf in job.jobconfs()]
        tmp_files, job_args = fix_paths(job)
        hadoop_arglist += job_args
        ssh_config = job.ssh()
        if ssh_config:
            arglist = _ssh_command(ssh_config, hadoop_arglist)
        elif not os.path.exists(jar):
            raise HadoopJarJobError(f"job jar does not exist: {jar}")
        else:
            arglist = hadoop_arglist
        try:
            luigi.contrib.hadoop.run_and_track_hadoop_job(arglist, job.set_tracking_url)
        except HadoopJobError as error:
            _remove_partial(tmp_files)
            raise HadoopJarJobFailed(error.message, error.out, error.err) from error
        for tmp, final_path in tmp_files:
            tmp.move(final_path)


def _remove_partial(tmp_files: list[tuple[luigi.contrib.hdfs.HdfsTarget, str]]) -> None:
    for tmp, _final_path in tmp_files:
        try:
            if tmp.exists():
                tmp.remove(skip_trash=True)
        except Exception as error:  # cleanup is best effort; the job's own error is what the user needs
            logger.warning("could not remove the failed job's output %s: %s", tmp.path, error)


class HadoopJarJobTask(BaseHadoopJobTask):
    """A Hadoop job packaged as a jar: override ``jar()``, and ``main()``, ``args()`` as needed."""

    def jar(self) -> str | None:
        """The jar's local path (on the ssh host, with ``ssh()``)."""
        return None

    def main(self) -> str | None:
        """The main class, when the jar's manifest does not name one."""
        return None

    def job_runner(self) -> JobRunner:
        return HadoopJarJobRunner()

    def atomic_output(self) -> bool:
        """Whether outputs are written to a temporary path and moved into place on success."""
        return True

    def ssh(self) -> dict[str, Any] | None:
        """``{"host", "key_file", "username"[, "no_host_key_check"]}`` to run the jar on another machine."""
        return None

    def args(self) -> list[Any]:
        """The jar's arguments: strings, or targets (their paths)."""
        return []
