"""What an ``LSFJobTask``'s LSF job runs: ``python lsf_runner.py JOB_DIR``.

It rebuilds the task from ``JOB_DIR/job.json`` (written by the worker; see ``luigi.contrib._job_dir``)
and calls ``work()``. Nothing is unpickled. On success it writes ``JOB_DIR/job.result``; on failure the
traceback goes to stderr (LSF's ``-e`` file, which the worker reports) and the exit status is 1.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":  # run as a script: import luigi from the tree this file is in, not this folder
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from luigi.contrib._job_dir import (  # noqa: E402  (after the path fix above)
    JOB_FILE,
    JOB_FORMAT,
    RESULT_DONE,
    RESULT_FILE,
    JobSpecError,
    load_job_task,
    read_job_spec,
    run_job,
)

__all__ = [
    "JOB_FILE",
    "JOB_FORMAT",
    "RESULT_DONE",
    "RESULT_FILE",
    "JobSpecError",
    "load_job_task",
    "main",
    "read_job_spec",
]


def main(args: list[str] | None = None) -> int:
    args = sys.argv if args is None else args
    if len(args) != 2 or not os.path.isdir(args[1]):
        print(
            f"lsf_runner: expected one argument, an existing job directory; got {args[1:]}", file=sys.stderr
        )
        return 2
    return run_job(args[1], "lsf_runner")


if __name__ == "__main__":
    sys.exit(main())
