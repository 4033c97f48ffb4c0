"""What Hadoop streaming runs on each node: ``python mrrunner.py map|combiner|reduce``.

Shipped with ``-file`` beside ``packages.tar`` (Luigi and the job's modules) and ``job.json`` (written by
``JobTask.dump``; see ``luigi.contrib._job_dir``). It unpacks the archive into the working directory,
rebuilds the task from its module, family and serialized parameters (nothing is unpickled), and runs
one step over stdin and stdout. Only the standard library is imported before the archive is unpacked.
"""

from __future__ import annotations

import os
import sys
import tarfile
import traceback
from collections.abc import Callable
from typing import IO, Any

PACKAGES_ARCHIVE = "packages.tar"
EXCEPTION_HEX_PREFIX = "luigi-exc-hex="


class TaskRebuildError(RuntimeError):
    """``job.json`` does not describe a task this node can rebuild."""


def _extract_packages(archive: str) -> None:
    """Unpack ``archive`` here, refusing members that would land outside this directory."""
    here = os.path.realpath(os.curdir)
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            landing = os.path.realpath(os.path.join(here, member.name))
            if os.path.commonpath([here, landing]) != here or member.issym() or member.islnk():
                raise TaskRebuildError(f"{archive} holds {member.name!r}, which would land outside {here}")
        tar.extractall(here)


def _rebuild_job() -> Any:
    """The task ``job.json`` describes, with its distributed-cache links."""
    from luigi.contrib import _job_dir, hadoop

    spec = _job_dir.read_job_spec(os.curdir)
    try:
        job = _job_dir.load_job_task(spec)
    except Exception as error:
        raise TaskRebuildError(
            f"cannot rebuild {spec.get('family')} from module {spec.get('module')}: "
            f"{type(error).__name__}: {error}; ship the module (JobTask.extra_modules or hadoop.attach)"
        ) from error
    for src, dst in hadoop.links_from_spec(spec):
        job.add_link(src, dst)
    return job


class Runner:
    """One node's step: the job given, or the one rebuilt from ``job.json`` in the working directory."""

    def __init__(self, job: Any = None) -> None:
        if os.path.exists(PACKAGES_ARCHIVE):
            _extract_packages(PACKAGES_ARCHIVE)
        sys.path.insert(0, "")
        self.job = job if job is not None else _rebuild_job()
        self.job._setup_remote()

    def run(self, kind: str, stdin: IO[str] = sys.stdin, stdout: IO[str] = sys.stdout) -> None:
        """Run the ``map``, ``combiner`` or ``reduce`` step over ``stdin`` to ``stdout``."""
        if kind == "map":
            self.job.run_mapper(stdin, stdout)
        elif kind == "combiner":
            self.job.run_combiner(stdin, stdout)
        elif kind == "reduce":
            self.job.run_reducer(stdin, stdout)
        else:
            raise Exception(f"weird command: {kind} (expected map, combiner or reduce)")


def print_exception(exc: BaseException) -> None:
    """The traceback on stderr, readable, then on one line as hex (which survives Hadoop's log pages)."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    print(text, file=sys.stderr, end="")
    print(EXCEPTION_HEX_PREFIX + text.encode("utf-8").hex(), file=sys.stderr)


def main(
    args: list[str] | None = None,
    stdin: IO[str] = sys.stdin,
    stdout: IO[str] = sys.stdout,
    print_exception: Callable[[BaseException], None] = print_exception,
) -> None:
    """Run the step named by ``args[1]`` (``sys.argv[1]`` by default); a failure is printed and re-raised."""
    try:
        kind = (args or sys.argv)[1]
        Runner().run(kind, stdin=stdin, stdout=stdout)
    except Exception as exc:
        print_exception(exc)
        raise


if __name__ == "__main__":
    main()
