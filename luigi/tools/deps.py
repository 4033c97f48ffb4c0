"""``luigi-deps``: every task (and its outputs) on the dependency paths from a task up to an upstream family.

After fixing a bug in ``Aggregate``, which is reached from a daily ``Daily`` task, list what has to be
redone between the two::

    luigi-deps --module reports Aggregate --date 2024-01-01 --upstream-family Daily

prints, for each task on a path from ``Aggregate`` to a ``Daily`` task (both ends included), a line
``   TASK: <task>`` followed by one line per output, ``                       : <description>``. Without
``--upstream-family`` every upstream task is listed. From Python, ``find_deps(task, family)`` returns the
same tasks as a set.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from luigi.cmdline_parser import CmdlineParser
from luigi.parameter import OptionalParameter
from luigi.target import FileSystemTarget, Target
from luigi.task import Config, Task, flatten
from luigi.tools._cli import one_line_errors

__all__ = [
    "dfs_paths",
    "find_deps",
    "find_deps_cli",
    "get_task_output_description",
    "get_task_requires",
    "main",
    "upstream",
]

TASK_LINE = "   TASK: {0}"
OUTPUT_LINE = "                       : {0}"
UNKNOWN_OUTPUT = "to be determined"


class upstream(Config):  # noqa: N801 (Luigi's name: it makes the --upstream-family flag)
    """The upstream end of the paths ``luigi-deps`` lists."""

    family = OptionalParameter(
        default=None,
        description="Family of the upstream task the paths end at; none: every upstream task",
    )


def get_task_requires(task: Task) -> set[Task]:
    """The tasks ``task.requires()`` returns, flattened into a set."""
    return set(flatten(task.requires()))


def dfs_paths(
    start_task: Task, goal_task_family: str | None, path: list[Task] | None = None
) -> Iterator[Task]:
    """Yield the tasks of every dependency path from ``start_task`` to a task of ``goal_task_family``.

    With ``goal_task_family`` None every path counts, so every upstream task is yielded. A task may be
    yielded more than once (once per path through it); ``path`` is the path walked so far.
    """
    walked = [start_task] if path is None else path
    if goal_task_family is None or start_task.task_family == goal_task_family:
        yield from walked
    for required in sorted(get_task_requires(start_task) - set(walked), key=lambda t: t.task_id):
        yield from dfs_paths(required, goal_task_family, [*walked, required])


def find_deps(task: Task, upstream_task_family: str | None) -> set[Task]:
    """Every task on a dependency path from ``task`` to a task of ``upstream_task_family`` (None: any)."""
    return set(dfs_paths(task, upstream_task_family))


def find_deps_cli(cmdline_args: Sequence[str] | None = None) -> set[Task]:
    """``find_deps`` for the task and ``--upstream-family`` of a ``luigi``-style command line."""
    args = sys.argv[1:] if cmdline_args is None else list(cmdline_args)
    with CmdlineParser.global_instance(args) as parser:
        return find_deps(parser.get_task_obj(), upstream().family)


def get_task_output_description(task_output: Target) -> str:
    """Where an output lives, in one line: ``[FileSystem] path``, ``[S3] path``, ``[SSH] host:path``..."""
    ssh = sys.modules.get("luigi.contrib.ssh")
    if ssh is not None and isinstance(task_output, ssh.RemoteTarget):
        return f"[SSH] {task_output.fs.remote_context.host}:{task_output.path}"
    s3 = sys.modules.get("luigi.contrib.s3")
    if s3 is not None and isinstance(task_output, s3.S3Target):
        return f"[S3] {task_output.path}"
    if isinstance(task_output, FileSystemTarget):
        return f"[FileSystem] {task_output.path}"
    postgres = sys.modules.get("luigi.contrib.postgres")
    if postgres is not None and isinstance(task_output, postgres.PostgresTarget):
        return f"[DB] {task_output.host}:{task_output.table}"
    return UNKNOWN_OUTPUT


def _output_descriptions(outputs: Any) -> list[str]:
    """A description per output: of each value of a dict, each item of a list, or the one target."""
    if isinstance(outputs, Mapping):
        return [get_task_output_description(target) for target in outputs.values()]
    if isinstance(outputs, (list, tuple, set, frozenset)):
        return [get_task_output_description(target) for target in outputs]
    if outputs is None:
        return []
    return [get_task_output_description(outputs)]


def main(cmdline_args: Sequence[str] | None = None) -> None:
    """The ``luigi-deps`` command: print each task found (ordered by id) and where its outputs are."""
    with one_line_errors("luigi-deps"):
        found = find_deps_cli(cmdline_args)
    for task in sorted(found, key=lambda t: t.task_id):
        print(TASK_LINE.format(task))
        for description in _output_descriptions(task.output()):
            print(OUTPUT_LINE.format(description))


if __name__ == "__main__":
    main()
