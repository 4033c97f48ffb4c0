"""The job directory a batch-system task ships to its job: one mechanism for ``lsf`` and ``sge``.

Nothing is pickled. The worker checks that the task can be rebuilt from its module, family and
serialized parameters, makes a private directory under the shared tmp dir and writes ``job.json`` there:
those three, the worker's working directory and ``sys.path``. The runner, run as the job on a node that
sees the same paths, reads it back, takes the worker's environment, rebuilds the task as a worker
rebuilds a task it is given, calls ``work()`` and records ``job.result`` once ``work()`` has returned:
that file, not the batch system's word, is what says the work was done.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import Any

import luigi
from luigi import task_status
from luigi.worker.remote_task import (  # one mechanism for shipping a task by reference
    TaskNotRebuildableError,
    check_parameters_survive,
    check_rebuildable,
    serialized_params,
)

__all__ = [  # the shipping names stay importable from here, where the batch runners found them
    "TaskNotRebuildableError",
    "check_parameters_survive",
    "check_rebuildable",
    "serialized_params",
]

JOB_FILE = "job.json"
JOB_FORMAT = 1
RESULT_FILE = "job.result"
RESULT_DONE = "DONE"
# What the batch system writes into the job directory (its -o and -e files).
STDOUT_FILE = "job.out"
STDERR_FILE = "job.err"


class JobSpecError(ValueError):
    """``job.json`` is missing or not one this runner can read."""


def make_job_dir(task: luigi.Task, shared_tmp_dir: str) -> str:
    """A new private (0700) directory under ``shared_tmp_dir``, named after the task, if it is rebuildable."""
    check_rebuildable(task, serialized_params(task))
    prefix = re.sub(r"[^A-Za-z0-9_.-]", "_", task.task_id)[:100] + "-"
    return tempfile.mkdtemp(prefix=prefix, dir=shared_tmp_dir)


def write_job_spec(
    task: luigi.Task, job_dir: str, module: str | None = None, extra: dict[str, Any] | None = None
) -> None:
    """Write ``job.json``: what the runner needs to rebuild ``task`` where the worker stands.

    ``module`` replaces the task's module name (``hadoop`` ships a script run as ``__main__`` under its
    own name); ``extra`` holds a runner's own JSON fields.
    """
    spec = {
        **(extra or {}),
        "format": JOB_FORMAT,
        "module": module or type(task).__module__,
        "family": task.task_family,
        "params": serialized_params(task),
        "cwd": os.getcwd(),
        "sys_path": [os.path.abspath(entry or os.curdir) for entry in sys.path],
    }
    with open(os.path.join(job_dir, JOB_FILE), "w") as handle:
        json.dump(spec, handle)


def read_job_spec(work_dir: str) -> dict[str, Any]:
    """The worker's description of the task to run."""
    path = os.path.join(work_dir, JOB_FILE)
    try:
        with open(path) as handle:
            spec = json.load(handle)
    except (OSError, ValueError) as error:
        raise JobSpecError(
            f"cannot read {path}: {error}; is the job directory on a disk this node sees?"
        ) from error
    if not isinstance(spec, dict) or spec.get("format") != JOB_FORMAT:
        raise JobSpecError(
            f"{path} is not a format {JOB_FORMAT} job file: run the same luigi on worker and nodes"
        )
    return spec


def _use_worker_environment(spec: dict[str, Any], extra_path: Sequence[str]) -> None:
    """The worker's import path (minus the runners' own directory, whose modules would shadow top-level
    ones such as ``ftp`` or ``s3``) and its working directory, so relative paths mean the same."""
    own = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [entry for entry in [*spec["sys_path"], *extra_path] if entry != own]
    os.chdir(spec["cwd"])


def load_job_task(spec: dict[str, Any]) -> Any:
    """The task the worker described, rebuilt as a worker rebuilds a task it is given."""
    from luigi.task_register import load_task

    return load_task(spec["module"], spec["family"], spec["params"])


def run_job(work_dir: str, runner: str, extra_path: Sequence[str] = ()) -> int:
    """The runner's body: rebuild the task from ``work_dir``, call ``work()``, record that it returned.

    Returns the exit status: 0 done, 1 failed (one line on stderr if the task could not be rebuilt, the
    traceback of ``work()`` otherwise, which is what the worker reports from the job's stderr file).
    """
    work_dir = os.path.abspath(work_dir)
    try:
        spec = read_job_spec(work_dir)
        _use_worker_environment(spec, extra_path)
        task = load_job_task(spec)
    except Exception as error:  # any failure to rebuild: one line naming the task and the cause
        why = f"{type(error).__name__}: {error}"
        print(f"{runner}: cannot rebuild the task from {work_dir}: {why}", file=sys.stderr)
        return 1
    try:
        task.work()
    except Exception:  # the task's own failure: its traceback is what the worker reports
        traceback.print_exc()
        return 1
    with open(os.path.join(work_dir, RESULT_FILE), "w") as handle:
        handle.write(RESULT_DONE)
    return 0


def runner_reported_done(job_dir: str) -> bool:
    """Whether the runner finished ``work()``: the answer once the batch system has forgotten the job."""
    return read_lines(os.path.join(job_dir, RESULT_FILE)) == RESULT_DONE


def read_lines(path: str, last: int | None = None) -> str:
    """The file's text (its ``last`` lines when given); empty when it does not exist."""
    try:
        with open(path, errors="replace") as handle:
            return "".join(handle.readlines()[-last:] if last else handle.readlines()).rstrip()
    except FileNotFoundError:
        return ""


@contextmanager
def sigterm_raises() -> Iterator[None]:
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


def follow_job(
    job_id: int, track: Callable[[int], None], kill: Callable[[int], None], status: Callable[[], str | None]
) -> None:
    """``track(job_id)`` until the job ends; if tracking stops first (the worker got SIGTERM or Ctrl-C, or
    tracking broke), ``kill(job_id)``, so that no job runs on unwatched. ``status()`` is the task's
    ``job_status``, DONE or FAILED once the job has ended."""
    try:
        with sigterm_raises():
            track(job_id)
    finally:
        if status() not in (task_status.DONE, task_status.FAILED):
            kill(job_id)
