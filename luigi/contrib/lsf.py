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

import importlib
import json
import logging
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import luigi
from luigi import task_status
from luigi.contrib.lsf_runner import JOB_FILE, JOB_FORMAT, RESULT_DONE, RESULT_FILE
from luigi.target import FileSystemTarget
from luigi.task import flatten

__all__ = [
    "BjobsFailedError",
    "LSFJobError",
    "LSFJobTask",
    "LocalLSFJobTask",
    "TaskNotRebuildableError",
    "kill_job",
    "track_job",
]

logger = logging.getLogger("luigi-interface")

# What LSF writes into the job directory (-o and -e).
STDOUT_FILE = "job.out"
STDERR_FILE = "job.err"

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


class TaskNotRebuildableError(ValueError):
    """The task cannot be rebuilt in the LSF job from its module, family and parameters."""


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


def serialized_params(task: luigi.Task) -> dict[str, str]:
    """Every parameter value of ``task`` serialized, private and insignificant ones included."""
    params = dict(task.get_params())
    return {name: params[name].serialize(value) for name, value in task.param_kwargs.items()}


def _check_rebuildable(task: luigi.Task, params: dict[str, str]) -> None:
    """Raise TaskNotRebuildableError unless importing the module and parsing ``params`` gives ``task``."""
    cls = type(task)
    where = f"{task.task_family} (class {cls.__qualname__} in module {cls.__module__})"
    if cls.__module__ == "__main__":
        raise TaskNotRebuildableError(
            f"{where} is defined in the script being run, which the LSF job cannot import: "
            "move it into a module on the Python path"
        )
    found: Any = importlib.import_module(cls.__module__)
    for part in cls.__qualname__.split("."):
        found = getattr(found, part, None)
    if found is not cls:
        raise TaskNotRebuildableError(
            f"{where} is not reachable by name from its module (defined inside a function?), so the LSF job "
            "cannot import it: define it at the top level of a module"
        )
    rebuilt = cls.from_str_params(params).param_kwargs
    changed = sorted(name for name, value in task.param_kwargs.items() if rebuilt.get(name) != value)
    if changed:
        raise TaskNotRebuildableError(
            f"{where}: parameter(s) {', '.join(changed)} do not survive serialization, so the LSF job would "
            "run a different task: use parameter types whose parse(serialize(value)) gives the value back"
        )


@contextmanager
def _sigterm_raises() -> Iterator[None]:
    """While active (main thread only), SIGTERM raises SystemExit(143): the job is killed on the way out."""

    def raise_exit(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    installed = threading.current_thread() is threading.main_thread()  # only there can handlers be set
    previous = signal.signal(signal.SIGTERM, raise_exit) if installed else None
    try:
        yield
    finally:
        if installed:
            signal.signal(signal.SIGTERM, previous)


def _read_lines(path: str, last: int | None = None) -> str:
    """The file's text (its ``last`` lines when given); empty when it does not exist."""
    try:
        with open(path, errors="replace") as handle:
            return "".join(handle.readlines()[-last:] if last else handle.readlines()).rstrip()
    except FileNotFoundError:
        return ""


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
        return _read_lines(os.path.join(self.tmp_dir, STDERR_FILE))

    def fetch_task_output(self) -> str:
        """The job's stdout."""
        return _read_lines(os.path.join(self.tmp_dir, STDOUT_FILE))

    def _init_local(self) -> None:
        params = serialized_params(self)
        _check_rebuildable(self, params)
        prefix = re.sub(r"[^A-Za-z0-9_.-]", "_", self.task_id)[:100] + "-"
        self.tmp_dir = tempfile.mkdtemp(prefix=prefix, dir=self.shared_tmp_dir)  # private: 0700
        spec = {
            "format": JOB_FORMAT,
            "module": type(self).__module__,
            "family": self.task_family,
            "params": params,
            "cwd": os.getcwd(),
            "sys_path": [os.path.abspath(entry or os.curdir) for entry in sys.path],
        }
        with open(os.path.join(self.tmp_dir, JOB_FILE), "w") as handle:
            json.dump(spec, handle)
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
            job_id = self._submit()
            try:
                with _sigterm_raises():
                    self._track_job(job_id)
            finally:
                if self.job_status not in (task_status.DONE, task_status.FAILED):
                    kill_job(job_id)  # the worker is stopping (or tracking broke): the job must not run on
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
            if state == "DONE" or (state == "" and self._runner_reported_done()):
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

    def _runner_reported_done(self) -> bool:
        """Whether the runner finished ``work()``: the answer once LSF has forgotten the job."""
        return _read_lines(os.path.join(self.tmp_dir, RESULT_FILE)) == RESULT_DONE

    def _failure_message(self, job_id: int, state: str) -> str:
        if state == "EXIT":
            what = f"LSF job {job_id} for {self.task_id} exited (EXIT) before finishing work()"
        elif state == "":
            what = f"LSF no longer knows job {job_id} for {self.task_id}, and it did not finish work()"
        else:
            what = (
                f"LSF job {job_id} for {self.task_id} is in state {state!r}, which this module does not know"
            )
        errors = _read_lines(os.path.join(self.tmp_dir, STDERR_FILE), last=_ERROR_TAIL_LINES)
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
