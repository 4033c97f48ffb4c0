"""What an ``LSFJobTask``'s LSF job runs: ``python lsf_runner.py JOB_DIR``.

It reads ``JOB_DIR/job.json`` (written by the worker; see ``luigi.contrib.lsf``), takes the worker's
``sys.path`` and working directory, rebuilds the task from its module, family and serialized parameters,
and calls ``work()``. Nothing is unpickled. On success it writes ``JOB_DIR/job.result``; on failure the
traceback goes to stderr (LSF's ``-e`` file, which the worker reports) and the exit status is 1.

Run as a script, so only the standard library is imported before the worker's ``sys.path`` is in place.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

# The job directory's files, shared with luigi.contrib.lsf (which imports them from here).
JOB_FILE = "job.json"
JOB_FORMAT = 1
RESULT_FILE = "job.result"
RESULT_DONE = "DONE"


class JobSpecError(ValueError):
    """``job.json`` is missing or not one this runner can read."""


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


def _use_worker_environment(spec: dict[str, Any]) -> None:
    """The worker's import path (minus this file's own directory, whose modules would shadow top-level
    ones such as ``ftp`` or ``s3``) and its working directory, so relative paths mean the same."""
    own = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [entry for entry in spec["sys_path"] if entry != own]
    os.chdir(spec["cwd"])


def load_job_task(spec: dict[str, Any]) -> Any:
    """The task the worker described, rebuilt as a worker rebuilds a task it is given."""
    from luigi.task_register import load_task

    return load_task(spec["module"], spec["family"], spec["params"])


def main(args: list[str] | None = None) -> int:
    args = sys.argv if args is None else args
    if len(args) != 2 or not os.path.isdir(args[1]):
        print(
            f"lsf_runner: expected one argument, an existing job directory; got {args[1:]}", file=sys.stderr
        )
        return 2
    work_dir = os.path.abspath(args[1])
    try:
        spec = read_job_spec(work_dir)
        _use_worker_environment(spec)
        task = load_job_task(spec)
    except Exception as error:  # any failure to rebuild: one line naming the task and the cause
        print(
            f"lsf_runner: cannot rebuild the task from {work_dir}: {type(error).__name__}: {error}",
            file=sys.stderr,
        )
        return 1
    try:
        task.work()
    except Exception:  # the task's own failure: its traceback is what the worker reports
        traceback.print_exc()
        return 1
    with open(os.path.join(work_dir, RESULT_FILE), "w") as handle:
        handle.write(RESULT_DONE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
