"""What an ``SGEJobTask``'s Grid Engine job runs: ``python sge_runner.py JOB_DIR PROJECT_DIR [--no-tarball]``.

It rebuilds the task from ``JOB_DIR/job.json`` (written by the worker; see ``luigi.contrib._job_dir``),
with ``PROJECT_DIR`` on the import path as in Luigi, and calls ``work()``. Nothing is unpickled and no
tarball is unpacked (``--no-tarball`` is accepted either way). On success it writes ``JOB_DIR/job.result``;
on failure the traceback goes to stderr (the job's ``-e`` file, which the worker reports), exit status 1.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__":  # run as a script: import luigi from the tree this file is in, not this folder
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from luigi.contrib._job_dir import run_job  # noqa: E402  (after the path fix above)

NO_TARBALL = "--no-tarball"


def main(args: list[str] | None = None) -> int:
    args = sys.argv if args is None else args
    positional = [arg for arg in args[1:] if arg != NO_TARBALL]
    if len(positional) != 2 or not os.path.isdir(positional[0]):
        print(
            "sge_runner: expected an existing job directory and the project directory"
            f" (and optionally {NO_TARBALL}); got {args[1:]}",
            file=sys.stderr,
        )
        return 2
    work_dir, project_dir = positional
    return run_job(work_dir, "sge_runner", extra_path=[project_dir])


if __name__ == "__main__":
    sys.exit(main())
