"""What the ``luigi-deps``, ``luigi-deps-tree`` and ``luigi-grep`` commands share: one-line errors."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def one_line_errors(prog: str) -> Iterator[None]:
    """Turn a wrong command line or config (unknown task, bad value, missing module) into one line, exit 1."""
    from luigi.configuration import ConfigError
    from luigi.parameter import ParameterException
    from luigi.task_register import TaskClassException

    try:
        yield
    except (TaskClassException, ParameterException, ConfigError, ModuleNotFoundError) as exc:
        text = " ".join(str(exc).split()) or type(exc).__name__
        print(f"{prog}: error: {text}", file=sys.stderr)
        sys.exit(1)
