"""Run a task's ``work()`` as a (Sun/Son of/Univa) Grid Engine job: submit with ``qsub``, poll ``qstat``.

Luigi 3.8's names, parameters and command lines, with two differences that matter:

* nothing is pickled: the job gets ``job.json`` (module, family, serialized parameters) in a private
  directory under ``shared_tmp_dir``, and ``luigi.contrib.sge_runner`` rebuilds the task from it
  (``luigi.contrib._job_dir``, shared with ``lsf``). A task that cannot be rebuilt fails before anything
  is submitted, with one line saying why. ``no_tarball`` is accepted; no package tarball is ever made,
  since the job imports from the worker's ``sys.path``, which the nodes must see.
* no local shell: ``qsub`` runs from an argument list with the job script on its stdin, and every word of
  that script (which Grid Engine runs with a shell on the node) is ``shlex.quote``-d (Luigi #3419).
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import subprocess
import sys
import time
from typing import Any, NoReturn

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
    write_job_spec,
)

__all__ = [
    "POLL_TIME",
    "LocalSGEJobTask",
    "SGEJobError",
    "SGEJobTask",
    "TaskNotRebuildableError",
]

logger = logging.getLogger("luigi-interface")

POLL_TIME = 5  # seconds; Luigi's module constant (the task's poll_time parameter is what is used)

# qstat's state column (qstat(1), "state"): what each letter means for the task.
UNKNOWN_STATE = "u"  # not in qstat's list: finished, deleted or lost
_RUNNING_LETTERS = set("rtR")  # running, transferring, restarted
_WAITING_LETTERS = set("qwhsST")  # queued, waiting, held, suspended (by user, queue or threshold)
_ERROR_TAIL_LINES = 20
# A line the shell of some sites writes to every job's stderr; not a sign of failure.
_NOT_A_TTY = "stdin: is not a tty"


class SGEJobError(RuntimeError):
    """The Grid Engine job did not finish its work: submission refused, job failed, deleted or lost."""


def _parse_qstat_state(qstat_out: str, job_id: int | str) -> str:
    """The state qstat shows for ``job_id`` (``r``, ``qw``, ``Eqw``...), ``u`` when it does not list it."""
    lines = qstat_out.splitlines()
    header_end = next((i for i, line in enumerate(lines) if line.startswith("---")), len(lines))
    for line in lines[header_end + 1 :]:
        fields = line.split()
        if len(fields) >= 5 and fields[0].isdigit() and int(fields[0]) == int(job_id):
            return fields[4]
    return UNKNOWN_STATE


def _parse_qsub_job_id(qsub_out: str) -> int:
    """The job id in qsub's ``Your job <id> ("<name>") has been submitted``."""
    words = qsub_out.split()
    if len(words) < 3 or words[:2] != ["Your", "job"] or not words[2].isdigit():
        raise SGEJobError(
            f"qsub's answer is not 'Your job <id> (\"<name>\") has been submitted': {qsub_out!r}"
        )
    return int(words[2])


def _qsub_arguments(job_name: str, outfile: str, errfile: str, pe: str, n_cpu: int) -> list[str]:
    """Luigi's qsub options: logs (``:path``, any host), environment exported, rerunnable, slots, name."""
    logs = ["-o", f":{outfile}", "-e", f":{errfile}"]
    return ["qsub", *logs, "-V", "-r", "y", "-pe", pe, str(n_cpu), "-N", job_name]


def _build_qsub_command(cmd: str, job_name: str, outfile: str, errfile: str, pe: str, n_cpu: int) -> str:
    """Luigi's submission as one shell line, ``echo <cmd> | qsub ...``, every word quoted.

    SGEJobTask itself runs the same arguments without a shell (job script on stdin); this is for users
    who log or run the line themselves.
    """
    qsub = _qsub_arguments(job_name, outfile, errfile, pe, n_cpu)
    return f"echo {shlex.quote(cmd)} | {shlex.join(qsub)}"


def _job_errors(errfile: str) -> str:
    """The job's stderr, its last lines, without a leading ``stdin: is not a tty``."""
    errors = read_lines(errfile, last=_ERROR_TAIL_LINES)
    first, _, rest = errors.partition("\n")
    return rest if first.strip() == _NOT_A_TTY else errors


def _error_reason(job_id: int) -> str:
    """What Grid Engine says put the job in an error state (``qstat -j``'s ``error reason``), as
    `` (Grid Engine says: ...)``; empty when it says nothing."""
    details = subprocess.run(["qstat", "-j", str(job_id)], capture_output=True, text=True).stdout
    reasons = [
        line.split(":", 1)[1].strip() for line in details.splitlines() if line.startswith("error reason")
    ]
    return f" (Grid Engine says: {'; '.join(reasons)})" if reasons else ""


def _qdel(job_id: int) -> None:
    """Ask Grid Engine to delete the job (queued, running or in error)."""
    subprocess.run(["qdel", str(job_id)], capture_output=True)


class SGEJobTask(luigi.Task):
    """Override ``work()``; ``run()`` runs it as a Grid Engine job (or in the worker with ``run_locally``)."""

    n_cpu = luigi.IntParameter(default=2, significant=False)
    shared_tmp_dir = luigi.Parameter(default="/home", significant=False)
    parallel_env = luigi.Parameter(default="orte", significant=False)
    job_name_format = luigi.OptionalParameter(
        default=None, significant=False, description="A str.format template for job_name"
    )
    job_name = luigi.OptionalParameter(default=None, significant=False)
    run_locally = luigi.BoolParameter(significant=False)
    poll_time = luigi.IntParameter(default=POLL_TIME, significant=False, description="Seconds between qstats")
    dont_remove_tmp_dir = luigi.BoolParameter(significant=False)
    no_tarball = luigi.BoolParameter(
        significant=False, description="Accepted for Luigi's command lines; no tarball is ever made"
    )

    tmp_dir: str = ""
    outfile: str = ""
    errfile: str = ""
    job_status: str | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.job_name is None:
            if self.job_name_format:
                self.job_name = self.job_name_format.format(task_family=self.task_family, **self.__dict__)
            else:
                self.job_name = self.task_family

    def work(self) -> None:
        """The task's work; runs in the Grid Engine job."""

    def run(self) -> None:
        if self.run_locally:
            self.work()
        else:
            self._init_local()
            self._run_job()

    def _init_local(self) -> None:
        """Make the job directory and write what the job needs into it (fails first if not rebuildable)."""
        self.tmp_dir = make_job_dir(self, self.shared_tmp_dir)
        logger.info("Job directory for %s: %s", self.task_id, self.tmp_dir)
        self._dump(self.tmp_dir)

    def _dump(self, out_dir: str = "") -> None:
        """Write ``job.json`` into ``out_dir`` (Luigi pickles the task here; nothing is pickled)."""
        write_job_spec(self, out_dir or self.tmp_dir)

    def _job_script(self) -> str:
        """What the job runs: the runner with the job and project directories, every word shell-quoted."""
        runner = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sge_runner.py")
        words = [sys.executable, runner, self.tmp_dir, os.getcwd()]
        return shlex.join(words + (["--no-tarball"] if self.no_tarball else []))

    def _run_job(self) -> None:
        self.outfile = os.path.join(self.tmp_dir, STDOUT_FILE)
        self.errfile = os.path.join(self.tmp_dir, STDERR_FILE)
        try:
            follow_job(self._submit(), self._track_job, _qdel, lambda: self.job_status)
        finally:
            if not self.dont_remove_tmp_dir:
                shutil.rmtree(self.tmp_dir, ignore_errors=True)

    def _submit(self) -> int:
        job_name = str(self.job_name)
        if any(char.isspace() for char in job_name):  # qsub's own answer is "Error reading answer list"
            raise SGEJobError(
                f"job_name {job_name!r} contains whitespace, which Grid Engine refuses: "
                "give job_name (or job_name_format) without spaces"
            )
        qsub = _qsub_arguments(job_name, self.outfile, self.errfile, self.parallel_env, self.n_cpu)
        try:
            result = subprocess.run(qsub, input=self._job_script() + "\n", capture_output=True, text=True)
        except FileNotFoundError:
            raise SGEJobError(
                "qsub is not on PATH: run on a Grid Engine submit host, or set run_locally"
            ) from None
        if result.returncode != 0:
            raise SGEJobError(
                f"qsub did not submit {self.task_id} (exit {result.returncode}): "
                f"{(result.stderr or result.stdout).strip()}"
            )
        job_id = _parse_qsub_job_id(result.stdout)
        logger.info("Submitted %s as Grid Engine job %s (%s)", self.task_id, job_id, job_name)
        return job_id

    def _track_job(self, job_id: int) -> None:
        """Poll qstat every ``poll_time`` seconds until the job leaves it; SGEJobError unless work() ended."""
        while True:
            state = self._qstat_state(job_id)
            if state == UNKNOWN_STATE:
                return self._finished(job_id)
            if "E" in state:
                why = _error_reason(job_id)  # read before qdel makes it unreadable
                self._give_up(job_id, f"is in error state {state!r}{why}; deleted it")
            if "d" not in state and not set(state) <= _RUNNING_LETTERS | _WAITING_LETTERS:
                self._give_up(job_id, f"is in state {state!r}, which this module does not know; deleted it")
            # "d" (being deleted) waits too: the job leaves qstat, then fails for lack of a result
            self.job_status = task_status.RUNNING if set(state) & _RUNNING_LETTERS else task_status.PENDING
            time.sleep(self.poll_time)

    def _give_up(self, job_id: int, what: str) -> NoReturn:
        """Delete the job, which would otherwise stay in the queue, and fail the task saying ``what``."""
        self.job_status = task_status.FAILED
        _qdel(job_id)
        raise SGEJobError(self._failure_message(job_id, what))

    def _qstat_state(self, job_id: int) -> str:
        result = subprocess.run(["qstat"], capture_output=True, text=True)
        if result.returncode != 0:
            raise SGEJobError(
                f"qstat failed (exit {result.returncode}) while tracking Grid Engine job {job_id} for "
                f"{self.task_id}, which is deleted: {(result.stderr or result.stdout).strip()}"
            )
        return _parse_qstat_state(result.stdout, job_id)

    def _finished(self, job_id: int) -> None:
        """The job left qstat: done if the runner recorded that work() returned, failed otherwise."""
        if runner_reported_done(self.tmp_dir):
            self.job_status = task_status.DONE
            output = read_lines(self.outfile)
            logger.info("Grid Engine job %s for %s is done; its output:\n%s", job_id, self.task_id, output)
            return
        self.job_status = task_status.FAILED
        raise SGEJobError(
            self._failure_message(job_id, "ended without finishing work() (failed, deleted or lost)")
        )

    def _failure_message(self, job_id: int, what: str) -> str:
        errors = _job_errors(self.errfile)
        head = f"Grid Engine job {job_id} for {self.task_id} {what}"
        return f"{head}; its stderr:\n{errors}" if errors else f"{head}; its stderr is empty"


class LocalSGEJobTask(SGEJobTask):
    """Runs ``work()`` in the worker itself: for trying a pipeline without Grid Engine."""

    def run(self) -> None:
        self.work()
