"""How a range task learns which of its instances are complete without asking each one in turn.

Two shortcuts, tried in this order by ``RangeDaily``, ``RangeHourly`` and ``RangeByMinutes``: the task
class's own ``bulk_complete`` classmethod, then listings of the filesystems its outputs live on. Each raises
NotImplementedError when it cannot answer.

The listings follow Luigi's plan: sample the ``of`` task at 135 scattered datetimes to find where the date
sits in each output path, turn that into a directory glob (``/d/[0-9][0-9][0-9][0-9]/[0-9][0-9]``), narrow
the glob to the digits the wanted paths actually have (``_constrain_glob``), then ask ``fs.exists(glob)`` and
``fs.listdir(glob)`` for each narrowed glob: a datetime is complete when all its output paths are listed.
"""

from __future__ import annotations

import glob as pathglob
import logging
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from luigi.local_target import LocalFileSystem
from luigi.target import FileSystem, FileSystemTarget
from luigi.task import Task, flatten_output

logger = logging.getLogger("luigi-interface")

DIGIT_WILDCARD = "[0-9]"
# How many (glob, digit) pairs _constrain_glob may split one glob into before it writes a digit set instead.
CONSTRAIN_LIMIT = 5


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


def most_common(items: Iterable[Any]) -> tuple[Any, int]:
    """The most frequent item and its count (the first seen wins a tie)."""
    [(item, count)] = Counter(items).most_common(1)
    return item, count


# -- inference from listings --------------------------------------------------------------------------------


def infer_bulk_complete_from_fs(
    datetimes: Sequence[datetime],
    datetime_to_task: Callable[[datetime], Task],
    datetime_to_re: Callable[[datetime], str],
) -> list[datetime]:
    """The members of ``datetimes`` some of whose output paths are not listed on their filesystem.

    ``datetime_to_re(dt)`` is a regex whose groups match the date parts of ``dt`` in an output path, e.g.
    ``dt.strftime("(%Y).*(%m).*(%d)")``.

    Raises:
        NotImplementedError: the outputs do not allow it (see ``_get_filesystems_and_globs``).
    """
    filesystems_and_globs = list(_get_filesystems_and_globs(datetime_to_task, datetime_to_re))
    paths_by_datetime = [[target.path for target in flatten_output(datetime_to_task(dt))] for dt in datetimes]
    listed: set[str] = set()
    # One (filesystem, glob) per output position: pair it with that position's path in every datetime.
    for (fs, glob), paths in zip(filesystems_and_globs, zip(*paths_by_datetime, strict=False), strict=False):
        listed |= _list_existing(fs, glob, list(paths))
    return [dt for dt, paths in zip(datetimes, paths_by_datetime, strict=True) if not set(paths) <= listed]


def _sample_datetimes() -> list[datetime]:
    """135 scattered datetimes whose parts are unlikely to coincide in a path other than as the date."""
    return [
        datetime(year, month, day, hour)
        for year in range(2000, 2050, 10)
        for month in range(1, 4)
        for day in range(5, 8)
        for hour in range(21, 24)
    ]


def _get_filesystems_and_globs(
    datetime_to_task: Callable[[datetime], Task], datetime_to_re: Callable[[datetime], str]
) -> Iterator[tuple[FileSystem, str]]:
    """Yield ``(filesystem, directory glob)`` per output position of the task, learnt from samples.

    Raises:
        NotImplementedError: the task has no outputs, their number changes over time, an output is
            not a FileSystemTarget, or a path does not show the sampled date.
    """
    samples = _sample_datetimes()
    regexes = [re.compile(datetime_to_re(dt)) for dt in samples]
    tasks = [datetime_to_task(dt) for dt in samples]
    outputs = [flatten_output(task) for task in tasks]
    if not outputs[0]:
        # Luigi would call every instance complete here; asking each one is the safe answer.
        raise NotImplementedError(f"{tasks[0]!r} has no outputs (nor its requirements) to list")
    for task_outputs, task in zip(outputs, tasks, strict=True):
        if len(task_outputs) != len(outputs[0]):
            raise NotImplementedError(
                f"Outputs must be consistent over time, sorry; was {task_outputs!r} for {task!r} and "
                f"{outputs[0]!r} for {tasks[0]!r}"
            )
        for target in task_outputs:
            if not isinstance(target, FileSystemTarget):
                raise NotImplementedError(
                    f"Output targets must be instances of FileSystemTarget; was {target!r} for {task!r}"
                )
    for same_position in zip(*outputs, strict=True):
        yield same_position[0].fs, _get_per_location_glob(tasks, same_position, regexes)


def _get_per_location_glob(
    tasks: Sequence[Task], outputs: Sequence[FileSystemTarget], regexes: Sequence[re.Pattern[str]]
) -> str:
    """The directory of the first sample's path with each date part (at its usual span) as ``[0-9]``s."""
    paths = [output.path for output in outputs]
    matches = [regex.search(path) for regex, path in zip(regexes, paths, strict=True)]
    for match, path, task in zip(matches, paths, tasks, strict=True):
        if match is None:
            raise NotImplementedError(
                f"Couldn't deduce datehour representation in output path {path!r} of task {task}"
            )
    found = [match for match in matches if match is not None]
    spans = [most_common(m.span(group) for m in found)[0] for group in range(1, found[0].re.groups + 1)]
    glob = paths[0]
    for start, end in sorted(spans, reverse=True):  # from the right, so earlier offsets stay valid
        glob = glob[:start] + DIGIT_WILDCARD * (end - start) + glob[end:]
    # Listing a directory is what filesystems offer; drop the file name.
    return glob.rsplit("/", 1)[0]


def _digit_set(digits: Iterable[str]) -> str:
    """A readable wildcard for a set of digits: ``[1-9]`` when contiguous, ``[13]`` otherwise."""
    chosen = sorted(set(digits))
    if len(chosen) > 1 and ord(chosen[-1]) - ord(chosen[0]) == len(chosen) - 1:
        return f"[{chosen[0]}-{chosen[-1]}]"
    return f"[{''.join(chosen)}]"


def _constrain_glob(glob: str, paths: Sequence[str], limit: int = CONSTRAIN_LIMIT) -> list[str]:
    """Globs that together cover ``paths`` and little else, so that listings stay short.

    The leftmost ``[0-9]`` of every glob is split into one glob per digit its paths have there, again and
    again; when that would give more than ``limit`` globs, the digits are written as a set there instead.
    """
    current: dict[str, list[str]] = {glob: list(paths)}
    while True:
        position = next(iter(current)).find(DIGIT_WILDCARD)
        if position == -1:
            return list(current)
        digits = {g: sorted({path[position] for path in p}) for g, p in current.items()}
        if sum(len(found) for found in digits.values()) > limit:
            return [g.replace(DIGIT_WILDCARD, _digit_set(digits[g]), 1) for g in current]
        current = {
            g.replace(DIGIT_WILDCARD, digit, 1): [path for path in p if path[position] == digit]
            for g, p in current.items()
            for digit in digits[g]
        }


def _list_existing(fs: FileSystem, glob: str, paths: Sequence[str]) -> set[str]:
    """Every path listed under the narrowed globs of ``glob`` that exist on ``fs``."""
    globs = sorted(_constrain_glob(glob, paths))
    started = time.monotonic()
    listing: set[str] = set()
    for narrowed in globs:
        for directory in _concrete(fs, narrowed):
            logger.debug("Listing %s", directory)
            if fs.exists(directory):
                listing.update(str(path) for path in fs.listdir(directory))
    logger.debug(
        "%d %s listings took %.3fs to return %d items",
        len(globs),
        type(fs).__name__,
        time.monotonic() - started,
        len(listing),
    )
    return listing


def _concrete(fs: FileSystem, glob: str) -> list[str]:
    """What to ask ``fs`` about: the glob itself, or for the local disk the directories it matches.

    Remote filesystems (HDFS, S3, GCS) expand globs themselves; ``os.path.exists`` does not.
    """
    if isinstance(fs, LocalFileSystem) and pathglob.has_magic(glob):
        return sorted(pathglob.glob(glob))
    return [glob]
