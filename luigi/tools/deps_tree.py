"""``luigi-deps-tree``: the dependency tree of a task, each node marked COMPLETE or PENDING.

It takes the ``luigi`` command line but runs nothing::

    $ luigi-deps-tree --module reports Summary --date 2024-01-01

    └─--[Summary-{'date': '2024-01-01'} (PENDING)]
        |---[Extract-{'date': '2024-01-01', 'part': '0'} (COMPLETE)]
        |   └─--[Source-{'part': '0'} (COMPLETE)]
        └─--[Extract-{'date': '2024-01-01', 'part': '1'} (PENDING)]
            └─--[Source-{'part': '1'} (PENDING)]

Each node is ``[Class-{significant parameters} (STATUS)]``, the status in green (COMPLETE) or blue
(PENDING) ANSI colours. A task reached along several paths is shown under each of them.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence

from luigi.cmdline_parser import CmdlineParser
from luigi.task import Task, flatten
from luigi.tools._cli import one_line_errors

__all__ = ["bcolors", "main", "print_tree"]

# Luigi's drawing: four columns a level, the last child's branch a corner.
LAST_BRANCH = "└─--"
MIDDLE_BRANCH = "|---"
UNDER_LAST = "    "
UNDER_MIDDLE = "|   "


class bcolors:  # noqa: N801 (Luigi's name)
    """The ANSI colour codes of the statuses."""

    OKBLUE = "\033[94m"
    OKGREEN = "\033[92m"
    ENDC = "\033[0m"


def _status(task: Task) -> str:
    """COMPLETE or PENDING, coloured; a task without outputs does not warn about its complete() here."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        complete = task.complete()
    if complete:
        return f"{bcolors.OKGREEN}COMPLETE{bcolors.ENDC}"
    return f"{bcolors.OKBLUE}PENDING{bcolors.ENDC}"


def print_tree(task: Task, indent: str = "", last: bool = True) -> str:
    """The tree below ``task`` as text: one line per node, each starting with a newline.

    ``indent`` is the prefix of the lines below this node's parent and ``last`` whether the node is its
    parent's last child (``└─--`` then, ``|---`` otherwise).
    """
    branch, below = (LAST_BRANCH, UNDER_LAST) if last else (MIDDLE_BRANCH, UNDER_MIDDLE)
    params = task.to_str_params(only_significant=True)
    text = f"\n{indent}{branch}[{type(task).__name__}-{params} ({_status(task)})]"
    children = flatten(task.requires())
    for index, child in enumerate(children):
        text += print_tree(child, indent + below, index == len(children) - 1)
    return text


def main(cmdline_args: Sequence[str] | None = None) -> None:
    """The ``luigi-deps-tree`` command: parse a ``luigi`` command line and print the root task's tree."""
    args = sys.argv[1:] if cmdline_args is None else list(cmdline_args)
    with one_line_errors("luigi-deps-tree"), CmdlineParser.global_instance(args) as parser:
        task = parser.get_task_obj()
        print(print_tree(task))


if __name__ == "__main__":
    main()
