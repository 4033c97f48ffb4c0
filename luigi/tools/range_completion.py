"""How a range task learns which of its instances are complete without asking each one in turn.

Two shortcuts, tried in this order by ``RangeDaily`` and its siblings: the task class's own
``bulk_complete`` classmethod, then a few listings of the filesystems its outputs live on. Each raises
NotImplementedError when it cannot answer, and the caller then asks every instance's ``complete()``.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from luigi.target import FileSystem, FileSystemException, FileSystemTarget
from luigi.task import Task, flatten

logger = logging.getLogger("luigi-interface")

# Listing calls allowed per filesystem: when the wanted paths spread over more directories than this,
# their common parent is listed once instead.
MAX_LISTINGS = 5


class BoundTaskFactory:
    """Makes instances of a task class with some parameters fixed, for a ``bulk_complete`` to call.

    Like ``functools.partial(task_cls, **fixed)`` (it has the same ``func``/``args``/``keywords``), except
    that a lone positional argument is always the ranged parameter, wherever that sits in the class.
    Other attributes are looked up on the task class.
    """

    def __init__(self, task_cls: type[Task], fixed_params: Mapping[str, Any], param_name: str) -> None:
        self.func = task_cls
        self.args: tuple[Any, ...] = ()
        self.keywords = dict(fixed_params)
        self.param_name = param_name

    def __call__(self, *args: Any, **kwargs: Any) -> Task:
        params = dict(self.keywords)
        if len(args) == 1:
            params[self.param_name] = args[0]
            args = ()
        params.update(kwargs)
        return self.func(*args, **params)

    def __getattr__(self, name: str) -> Any:
        if name == "func":  # not set yet (e.g. during copying): no class to delegate to
            raise AttributeError(name)
        return getattr(self.func, name)


def bulk_complete_values(
    task_cls: type[Task], fixed_params: Mapping[str, Any], param_name: str, values: Sequence[Any]
) -> list[Any]:
    """The members of ``values`` (values of ``param_name``) that ``task_cls.bulk_complete`` reports complete.

    ``bulk_complete`` is called as the classmethod it is, with a ``BoundTaskFactory`` standing in for the
    class, so that ``cls(value)`` builds the instance with ``fixed_params`` too.

    Raises:
        NotImplementedError: the class has no bulk completion check (the default ``Task.bulk_complete``).
    """
    bulk = getattr(task_cls, "bulk_complete", None)
    if bulk is None:
        raise NotImplementedError(f"{task_cls.__name__} has no bulk_complete")
    function = getattr(bulk, "__func__", None)
    if function is None:  # a staticmethod or plain callable: nothing to bind the fixed parameters to
        reported = bulk(list(values))
    else:
        reported = function(BoundTaskFactory(task_cls, fixed_params, param_name), list(values))
    return [item[param_name] if isinstance(item, Mapping) else item for item in reported]


def infer_bulk_complete_from_fs(
    datetimes: Sequence[datetime],
    datetime_to_task: Callable[[datetime], Task],
    datetime_to_re: Callable[[datetime], str] | None = None,
) -> list[datetime]:
    """The members of ``datetimes`` whose task outputs do not all exist, learnt from a few listings.

    ``datetime_to_re`` is accepted for compatibility with Luigi's signature and not needed: the
    directories to list are planned from the output paths themselves.

    Raises:
        NotImplementedError: outputs alone cannot decide completeness (a custom ``complete()``, a target
            that is not a FileSystemTarget, or one with its own ``exists()``).
    """
    locations_by_datetime: dict[datetime, list[tuple[int, str]]] = {}
    wanted: dict[int, tuple[FileSystem, set[str]]] = {}
    for dt in datetimes:
        locations = _output_locations(datetime_to_task(dt))
        locations_by_datetime[dt] = [(id(fs), path) for fs, path in locations]
        for fs, path in locations:
            wanted.setdefault(id(fs), (fs, set()))[1].add(path)
    existing = {(fs_id, path) for fs_id, (fs, paths) in wanted.items() for path in _existing_paths(fs, paths)}
    return [
        dt
        for dt in datetimes
        if not locations_by_datetime[dt] or not all(loc in existing for loc in locations_by_datetime[dt])
    ]


def most_common(items: Iterable[Any]) -> tuple[Any, int]:
    """The most frequent item and its count (the first seen wins a tie)."""
    [(item, count)] = Counter(items).most_common(1)
    return item, count


def _output_locations(task: Task) -> list[tuple[FileSystem, str]]:
    """(filesystem, path) of each output, or NotImplementedError if existence does not decide completeness."""
    if type(task).complete is not Task.complete:
        raise NotImplementedError(
            f"{task.task_family} overrides complete(), so its outputs alone do not decide"
        )
    locations = []
    for target in flatten(task.output()):
        if not isinstance(target, FileSystemTarget):
            raise NotImplementedError(f"output {target!r} of {task!r} is not a FileSystemTarget")
        if not getattr(type(target).exists, "__module__", "").startswith("luigi."):
            raise NotImplementedError(f"output {target!r} of {task!r} has its own exists()")
        locations.append((target.fs, target.path))
    return locations


def _existing_paths(fs: FileSystem, paths: set[str]) -> set[str]:
    """Which of ``paths`` exist on ``fs``, by listing a few directories (or asking each path when cheaper)."""
    bases = _listing_bases(paths)
    if bases is None:
        return {path for path in paths if fs.exists(path)}
    try:
        listed = _listed_paths(fs, bases)
    except NotImplementedError:
        return {path for path in paths if fs.exists(path)}
    in_order = sorted(listed)
    found = set()
    for path in paths:
        key = path.rstrip("/")
        if key in listed or _is_listed_directory(key, in_order):
            found.add(path)
        elif any(ancestor in listed for ancestor in _ancestors(key)) and fs.exists(path):
            # The listing stopped at a directory above this path (it is not recursive): ask directly.
            found.add(path)
    return found


def _listing_bases(paths: set[str]) -> list[str] | None:
    """The deepest directories, MAX_LISTINGS at most, that hold all ``paths``; None if not worth it."""
    if len(paths) <= MAX_LISTINGS:
        return None
    deepest = max(path.count("/") for path in paths)
    chosen: set[str] | None = None
    for depth in range(1, deepest + 1):
        directories = {_directory_at_depth(path, depth) for path in paths}
        if len(directories) > MAX_LISTINGS:
            break
        chosen = directories
    if chosen is None or any(_is_root(directory) for directory in chosen):
        return None  # listing a whole filesystem would cost more than asking for each path
    return sorted(chosen)


def _directory_at_depth(path: str, depth: int) -> str:
    """The prefix of ``path`` up to its ``depth``-th slash, or its own directory if it is shallower."""
    end = -1
    for _ in range(depth):
        following = path.find("/", end + 1)
        if following == -1:
            break
        end = following
    return path[: end + 1]


def _is_root(directory: str) -> bool:
    """True for '', '/' and 'scheme://': directories whose listing would walk a whole filesystem."""
    _, separator, rest = directory.partition("://")
    return not (rest if separator else directory).strip("/")


def _listed_paths(fs: FileSystem, bases: list[str]) -> set[str]:
    """Every path ``fs.listdir`` gives under ``bases`` (without trailing slashes)."""
    listed: set[str] = set()
    for base in bases:
        started = time.monotonic()
        try:
            entries = [str(entry) for entry in fs.listdir(base)]
        except (OSError, FileSystemException) as exc:  # a directory that is not there holds nothing
            logger.debug("Listing %s failed (%s); treating it as empty", base, exc)
            entries = []
        for entry in entries:
            full = entry if entry.startswith(base.rstrip("/")) else base + entry.lstrip("/")
            listed.add(full.rstrip("/"))
        logger.debug("Listed %d paths under %s in %.3fs", len(entries), base, time.monotonic() - started)
    return listed


def _is_listed_directory(path: str, listed_in_order: list[str]) -> bool:
    """True when some listed path lies inside ``path`` (so ``path`` is an existing directory)."""
    prefix = path + "/"
    index = bisect.bisect_left(listed_in_order, prefix)
    return index < len(listed_in_order) and listed_in_order[index].startswith(prefix)


def _ancestors(path: str) -> list[str]:
    """Every proper prefix of ``path`` that ends just before a slash."""
    return [path[:index] for index, char in enumerate(path) if char == "/" and index > 0]
