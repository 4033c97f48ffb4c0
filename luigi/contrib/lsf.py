"""Run a task's ``work()`` as an IBM LSF batch job: submit with ``bsub``, poll ``bjobs``, ``bkill`` on stop.

Unlike Luigi 3.8, nothing is pickled. The job gets a small JSON file in a private directory under
``shared_tmp_dir`` (which the cluster's nodes must see): the task's module, family and serialized
parameters, the worker's working directory and ``sys.path``. ``luigi.contrib.lsf_runner``, run as the
job, rebuilds the task from it as a worker rebuilds a task it is given, and calls ``work()``. A task that
cannot be rebuilt that way fails before anything is submitted, with one line saying why.

Every command is an argument list (no local shell). The job's own command line, which LSF hands to a
shell on the execution host, is built from ``shlex.quote``-d words.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from typing import Any

import luigi
from luigi import task_status
from luigi.contrib._job_dir import (
    STDERR_FILE,
    STDOUT_FILE,
    TaskNotRebuildableError,
    follow_job,
    make_job_dir,
    read_lines,
    runner_reported_done,
    serialized_params,
    write_job_spec,
)
from luigi.contrib._job_dir import check_rebuildable as _check_rebuildable  # noqa: F401  (its old name)
from luigi.target import FileSystemTarget
from luigi.task import flatten

__all__ = [
    "BjobsFailedError",
    "LSFJobError",
    "LSFJobTask",
    "LocalLSFJobTask",
    "TaskNotRebuildableError",
    "kill_job",
    "serialized_params",
    "track_job",
]

logger = logging.getLogger("luigi-interface")

# bjobs states (LSF's ``bjobs`` reference) and what they mean for the task.
_RUNNING_STATES = {"RUN": task_status.RUNNING}
_WAITING_STATES = {"PEND", "PSUSP", "USUSP", "SSUSP", "WAIT", "PROV"}
_ERROR_TAIL_LINES = 20
# Consecutive failed bjobs calls (LSF's master restarting, say) before the job is given up and killed.
_BJOBS_ATTEMPTS = 5


class LSFJobError(RuntimeError):
    """The LSF job did not finish its work: submission refused, job exited, killed or lost."""


class BjobsFailedError(LSFJobError):
    """bjobs gave no state for a job (LSF's master unreachable, say)."""


def track_job(job_id: int) -> str:
    """The job's LSF state (``RUN``, ``PEND``, ``DONE``, ``EXIT``...); empty when bjobs gives none."""
    return _bjobs(job_id).stdout.strip()


def _bjobs(job_id: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bjobs", "-noheader", "-o", "stat", str(job_id)], capture_output=True, text=True)


def _job_state(job_id: int) -> str:
    """The job's state, empty when LSF does not know the job; BjobsFailedError when bjobs itself failed."""
    answer = _bjobs(job_id)
    state = answer.stdout.strip()
    if state or "is not found" in answer.stderr:
        return state
    raise BjobsFailedError(f"exit {answer.returncode}: {answer.stderr.strip() or 'no output'}")


def kill_job(job_id: int) -> None:
    """Ask LSF to terminate the job (``bkill``)."""
    subprocess.run(["bkill", str(job_id)], capture_output=True)


class LSFJobTask(luigi.Task):
    """Override ``work()`` (and optionally ``init_local()``); ``run()`` runs ``work()`` as an LSF job."""

    n_cpu_flag = luigi.IntParameter(default=2, significant=False)
    shared_tmp_dir = luigi.Parameter(default="/tmp")
    resource_flag = luigi.Parameter(default="mem=8192")
    memory_flag = luigi.Parameter(default="8192")
    queue_flag = luigi.Parameter(default="queue_name")
    runtime_flag = luigi.IntParameter(default=60)
    job_name_flag = luigi.Parameter(default="")
    poll_time = luigi.FloatParameter(default=5, description="Seconds between two bjobs calls")
    save_job_info = luigi.BoolParameter(default=False)
    output = luigi.Parameter(default="")  # type: ignore[assignment]  # Luigi's name; subclasses define output()
    extra_bsub_args = luigi.Parameter(default="")

    job_status: str | None = None
    tmp_dir: str = ""

    def init_local(self) -> None:
        """Runs on the worker before the job is submitted."""

    def work(self) -> None:
        """The task's work; runs in the LSF job."""

    def run(self) -> None:
        self._init_local()
        self._run_job()

    def fetch_task_failures(self) -> str:
        """The job's stderr."""
        return read_lines(os.path.join(self.tmp_dir, STDERR_FILE))

    def fetch_task_output(self) -> str:
        """The job's stdout."""
        return read_lines(os.path.join(self.tmp_dir, STDOUT_FILE))

    def _init_local(self) -> None:
        self.tmp_dir = make_job_dir(self, self.shared_tmp_dir)
        write_job_spec(self, self.tmp_dir)
        self.init_local()

    def _bsub_command(self) -> list[str]:
        """bsub's argument list; the job's words are shell-quoted because LSF runs them with a shell."""
        runner = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lsf_runner.py")
        command = ["bsub", "-q", self.queue_flag, "-n", str(self.n_cpu_flag), "-M", str(self.memory_flag)]
        command += ["-R", f"rusage[{self.resource_flag}]", "-W", str(self.runtime_flag)]
        if self.job_name_flag:
            command += ["-J", self.job_name_flag]
        logs = ["-o", os.path.join(self.tmp_dir, STDOUT_FILE), "-e", os.path.join(self.tmp_dir, STDERR_FILE)]
        command += logs
        command += shlex.split(self.extra_bsub_args)
        return command + [shlex.quote(word) for word in (sys.executable, runner, self.tmp_dir)]

    def _submit(self) -> int:
        command = self._bsub_command()
        try:
            result = subprocess.run(command, cwd=self.tmp_dir, capture_output=True, text=True)
        except FileNotFoundError:
            raise LSFJobError(
                "bsub is not on PATH: run on a host with LSF's client commands, or use LocalLSFJobTask"
            ) from None
        match = re.search(r"<(\d+)>", result.stdout)
        if result.returncode != 0 or match is None:
            raise LSFJobError(
                f"bsub did not submit {self.task_id} (exit {result.returncode}): "
                f"{(result.stderr or result.stdout).strip()}"
            )
        job_id = int(match.group(1))
        logger.info("Submitted %s as LSF job %s", self.task_id, job_id)
        return job_id

    def _run_job(self) -> None:
        try:
            follow_job(self._submit(), self._track_job, kill_job, lambda: self.job_status)
        finally:
            self._finish()

    def _track_job(self, job_id: int) -> None:
        """Poll bjobs every ``poll_time`` seconds until the job ends; LSFJobError unless it did its work."""
        while True:
            state = self._job_state_retrying(job_id)
            if state in _RUNNING_STATES or state in _WAITING_STATES:
                self.job_status = _RUNNING_STATES.get(state, task_status.PENDING)
                time.sleep(self.poll_time)
                continue
            if state == "DONE" or (state == "" and runner_reported_done(self.tmp_dir)):
                self.job_status = task_status.DONE
                return
            self.job_status = task_status.FAILED
            raise LSFJobError(self._failure_message(job_id, state))

    def _job_state_retrying(self, job_id: int) -> str:
        """The job's state, asking again after a failed bjobs, up to ``_BJOBS_ATTEMPTS`` times in a row."""
        for attempt in range(1, _BJOBS_ATTEMPTS + 1):
            try:
                return _job_state(job_id)
            except BjobsFailedError as error:
                logger.warning(
                    "bjobs failed for LSF job %s (%d of %d): %s", job_id, attempt, _BJOBS_ATTEMPTS, error
                )
                last_error = error
                time.sleep(self.poll_time)
        raise BjobsFailedError(
            f"bjobs failed {_BJOBS_ATTEMPTS} times in a row for LSF job {job_id} ({self.task_id}), "
            f"which is killed; last: {last_error}"
        )

    def _failure_message(self, job_id: int, state: str) -> str:
        if state == "EXIT":
            what = f"LSF job {job_id} for {self.task_id} exited (EXIT) before finishing work()"
        elif state == "":
            what = f"LSF no longer knows job {job_id} for {self.task_id}, and it did not finish work()"
        else:
            what = (
                f"LSF job {job_id} for {self.task_id} is in state {state!r}, which this module does not know"
            )
        errors = read_lines(os.path.join(self.tmp_dir, STDERR_FILE), last=_ERROR_TAIL_LINES)
        return f"{what}; its stderr:\n{errors}" if errors else f"{what}; its stderr is empty"

    def _finish(self) -> None:
        if not self.tmp_dir or not os.path.isdir(self.tmp_dir):
            return
        if self.save_job_info:  # kept whatever the outcome: the logs matter most after a failure
            destination = self._output_dir() or self.shared_tmp_dir
            shutil.move(self.tmp_dir, os.path.join(destination, os.path.basename(self.tmp_dir)))
        else:
            shutil.rmtree(self.tmp_dir, ignore_errors=True)

    def _output_dir(self) -> str | None:
        """The directory of the first file output; None without one (or with Luigi's ``output`` parameter
        still in place of an ``output()`` method)."""
        output: Any = self.output
        if isinstance(output, str):
            return None
        files = [target for target in flatten(output()) if isinstance(target, FileSystemTarget)]
        return os.path.dirname(os.path.abspath(files[0].path)) if files else None


class LocalLSFJobTask(LSFJobTask):
    """Runs ``init_local()`` then ``work()`` in the worker itself: for trying a pipeline without LSF."""

    def run(self) -> None:
        self.init_local()
        self.work()
