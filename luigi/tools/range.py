"""Recurring tasks and backfills: wrapper tasks that require the missing instances of a dated task.

``luigi --module reports RangeDaily --of DailyReport --start 2024-01-01`` (typically run from cron) requires
every ``DailyReport(date=...)`` from the start date up to today that is not complete yet, at most
``task_limit`` of them per run. The ``*Base`` classes and ``RangeMonthly`` ask each instance's
``complete()``; ``RangeDaily``, ``RangeHourly`` and ``RangeByMinutes`` first try the class's
``bulk_complete`` and then a few filesystem listings, which is much faster for long ranges on remote
storage.
"""

from __future__ import annotations

import inspect
import logging
import time
import warnings
from collections.abc import Sequence
from datetime import date, datetime, timedelta, timezone
from typing import Any

from luigi.event import Event
from luigi.parameter import (
    BoolParameter,
    DateHourParameter,
    DateMinuteParameter,
    DateParameter,
    DictParameter,
    IntParameter,
    MonthParameter,
    OptionalParameter,
    Parameter,
    ParameterException,
    TaskParameter,
)
from luigi.task import Task, WrapperTask
from luigi.tools.range_completion import (
    _constrain_glob,
    _get_filesystems_and_globs,
    _get_per_location_glob,
    _list_existing,
    bulk_complete_values,
    infer_bulk_complete_from_fs,
    most_common,
)

__all__ = [
    "RangeBase",
    "RangeByMinutes",
    "RangeByMinutesBase",
    "RangeDaily",
    "RangeDailyBase",
    "RangeEvent",
    "RangeHourly",
    "RangeHourlyBase",
    "RangeMonthly",
    "infer_bulk_complete_from_fs",
    "most_common",
]

# Luigi's small internals of the listing inference, importable from here as there.
_INTERNALS = (_constrain_glob, _get_filesystems_and_globs, _get_per_location_glob, _list_existing)

logger = logging.getLogger("luigi-interface")


class RangeEvent(Event):
    """Events a range task fires on itself each time it works out its requirements.

    Callbacks (``@RangeDaily.event_handler(RangeEvent.COMPLETE_COUNT)``) receive ``(of_family, value)``.
    The window is the range's points in time, reaching back to ``start`` and up to ``stop`` when given
    even beyond the moving window; values are counts of jobs:

    - ``DELAY``: how many points of the window lie from the oldest missing one to the end (0 when none is
      missing): how far behind the data is.
    - ``COMPLETE_COUNT``: the window's size minus the missing instances; it grows as a backlog is worked off.
    - ``COMPLETE_FRACTION``: that count over the window's size (1 for an empty window).
    """

    COMPLETE_COUNT = "event.tools.range.complete.count"
    COMPLETE_FRACTION = "event.tools.range.complete.fraction"
    DELAY = "event.tools.range.delay"


class RangeBase(WrapperTask):
    """Requires the missing instances of ``of`` between ``start`` and ``stop``, within a window around now.

    Subclasses fix the time unit: the conversions between datetimes and parameter values, the moving
    window (``moving_start``/``moving_stop``) and the points in time of a finite range.
    """

    of = TaskParameter(description="The task class to fill the range with; it takes a date-like parameter")
    of_params = DictParameter(default={}, description="Further parameters given to every instance of 'of'")
    # Each subclass redeclares the bounds with its own date-like parameter, so here they are any parameter.
    start: Parameter[Any] = OptionalParameter(
        default=None, description="First point of the range (inclusive)"
    )
    stop: Parameter[Any] = OptionalParameter(default=None, description="End of the range (exclusive)")
    reverse = BoolParameter(
        default=False,
        description="Catch up from the newest missing instance backwards instead of the oldest forwards",
    )
    task_limit = IntParameter(
        default=50,
        description="Require at most this many instances per run, so that a long backlog cannot flood "
        "the scheduler",
    )
    now = IntParameter(
        default=None,
        description="The current time in seconds since the epoch (UTC); default: when this task was created",
    )
    param_name = Parameter(
        default=None,
        positional=False,
        description="The parameter of 'of' that receives the date-like value; default: its first "
        "positional parameter not set in of_params",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._created_at = time.time()
        self._cached_requires: list[Task] | None = None
        self._of_call: tuple[dict[str, Any], str] | None = None

    @property
    def of_cls(self) -> type[Task]:
        """The ``of`` class (an older name for it, kept for subclasses written against it)."""
        return self.of

    # -- the time unit: implemented by subclasses ------------------------------------------------------

    def datetime_to_parameter(self, dt: datetime) -> Any:
        """The value of the ranged parameter for the point in time ``dt``."""
        raise NotImplementedError

    def parameter_to_datetime(self, p: Any) -> datetime:
        """The point in time a value of the ranged parameter stands for."""
        raise NotImplementedError

    def moving_start(self, now: datetime) -> datetime:
        """The earliest point in time considered at ``now``, whatever ``start`` says."""
        raise NotImplementedError

    def moving_stop(self, now: datetime) -> datetime:
        """The point in time (exclusive) past which nothing is considered at ``now``."""
        raise NotImplementedError

    def finite_datetimes(self, finite_start: datetime, finite_stop: datetime) -> list[datetime]:
        """The points in time of the unit in ``[finite_start, finite_stop)``, oldest first."""
        raise NotImplementedError

    # -- instances of `of` ------------------------------------------------------------------------------

    def datetime_to_parameters(self, dt: datetime) -> dict[str, Any]:
        """Every keyword argument of the ``of`` instance for ``dt``, ``of_params`` included."""
        return self._task_parameters(self.datetime_to_parameter(dt))

    def parameters_to_datetime(self, p: dict[str, Any]) -> datetime:
        """The point in time of the ``of`` instance with keyword arguments ``p``."""
        return self.parameter_to_datetime(p[self._param_name])

    @property
    def _param_name(self) -> str:
        return self._bound_of_call()[1]

    def _task_parameters(self, param: Any) -> dict[str, Any]:
        fixed, param_name = self._bound_of_call()
        return {**fixed, param_name: param}

    def _instantiate_task_cls(self, param: Any) -> Task:
        return self.of(**self._task_parameters(param))

    def _bound_of_call(self) -> tuple[dict[str, Any], str]:
        """(parsed of_params, name of the ranged parameter), checked against ``of`` once."""
        if getattr(self, "_of_call", None) is None:
            if not (isinstance(self.of, type) and issubclass(self.of, Task)):
                raise ParameterException(f"{self.task_family}: of={self.of!r} is not a task class")
            declared = dict(self.of.get_params())
            self._of_call = (self._parsed_of_params(declared), self._choose_param_name(declared))
        assert self._of_call is not None
        return self._of_call

    def _parsed_of_params(self, declared: dict[str, Any]) -> dict[str, Any]:
        """``of_params`` with text values parsed by the receiving parameter (JSON from the CLI gives text)."""
        parsed = {}
        for name, value in self.of_params.items():
            if name not in declared:
                raise ParameterException(
                    f"{self.task_family}: of_params names {name!r}, which is not a parameter of "
                    f"{self.of.get_task_family()} (its parameters: {', '.join(declared) or 'none'})"
                )
            try:
                parsed[name] = declared[name].parse(value) if isinstance(value, str) else value
            except ValueError as exc:
                raise ParameterException(f"{self.task_family}: of_params[{name!r}]: {exc}") from exc
        return parsed

    def _choose_param_name(self, declared: dict[str, Any]) -> str:
        family = self.of.get_task_family()
        if self.param_name is not None:
            if self.param_name not in declared:
                raise ParameterException(
                    f"{self.task_family}: param_name={self.param_name!r} is not a parameter of {family} "
                    f"(its parameters: {', '.join(declared) or 'none'})"
                )
            return self.param_name
        for name, param in declared.items():
            if param.positional and name not in self.of_params:
                return name
        raise ParameterException(
            f"{self.task_family}: {family} has no positional parameter (outside of_params) to range over; "
            "name one with param_name"
        )

    # -- requirements -----------------------------------------------------------------------------------

    def requires(self) -> list[Task]:
        """The missing instances of ``of`` to run now: ``task_limit`` at most, oldest first unless reverse.

        Worked out once per task object; the events of ``RangeEvent`` fire then.
        """
        if getattr(self, "_cached_requires", None) is None:
            self._cached_requires = self._missing_instances()
        assert self._cached_requires is not None
        return self._cached_requires

    def _missing_instances(self) -> list[Task]:
        self._check_bounds()
        finite_start, finite_stop = self._finite_bounds(self._current_datetime())
        datetimes = self.finite_datetimes(finite_start, finite_stop) if finite_start <= finite_stop else []
        family = self.of.get_task_family()
        missing: list[datetime] = []
        if datetimes:
            logger.debug(
                "Checking which %s instances in %s are complete", family, self._format_range(datetimes)
            )
            missing = sorted(self._missing_datetimes(datetimes))
            logger.debug(
                "Range %s lacked %d of %d %s instances",
                self._format_range(datetimes),
                len(missing),
                len(datetimes),
                family,
            )
        else:
            logger.debug("Empty range: no %s instances expected", family)
        self._emit_metrics(missing, finite_start, finite_stop)
        chosen = self._limited(missing)
        if chosen:
            logger.debug(
                "Requiring %d missing %s instances in %s", len(chosen), family, self._format_range(chosen)
            )
        return [self._instantiate_task_cls(self.datetime_to_parameter(dt)) for dt in chosen]

    def _check_bounds(self) -> None:
        if self.start is None and self.stop is None:
            raise ParameterException(
                f"{self.task_family}: at least one of start and stop needs to be specified"
            )
        if self.start is None and not self.reverse:
            raise ParameterException(
                f"{self.task_family}: either start needs to be specified or reverse needs to be True"
            )
        if self.start is not None and self.stop is not None and self.start > self.stop:
            raise ParameterException(
                f"{self.task_family}: can't have start > stop (start={self.start}, stop={self.stop})"
            )
        if self.task_limit is None or self.task_limit < 0:
            raise ParameterException(f"{self.task_family}: task_limit={self.task_limit} must be 0 or more")

    def _current_datetime(self) -> datetime:
        """``now`` (or the creation time) as a naive UTC datetime, the convention of the date parameters."""
        created = getattr(self, "_created_at", None)
        seconds = self.now if self.now is not None else (created if created is not None else time.time())
        return datetime.fromtimestamp(seconds, tz=timezone.utc).replace(tzinfo=None)

    def _finite_bounds(self, now: datetime) -> tuple[datetime, datetime]:
        """``[start, stop)`` narrowed to the moving window around ``now``."""
        finite_start = self.moving_start(now)
        if self.start is not None:
            finite_start = max(self.parameter_to_datetime(self.start), finite_start)
        finite_stop = self.moving_stop(now)
        if self.stop is not None:
            finite_stop = min(self.parameter_to_datetime(self.stop), finite_stop)
        return finite_start, finite_stop

    def _limited(self, missing: list[datetime]) -> list[datetime]:
        """The ``task_limit`` oldest of ``missing`` in order, or with ``reverse`` the newest, newest first."""
        if self.reverse:
            return missing[max(len(missing) - self.task_limit, 0) :][::-1]
        return missing[: self.task_limit]

    def _format_range(self, datetimes: Sequence[datetime]) -> str:
        """``[first, last]`` in the ranged parameter's format, e.g. ``[2020-03-04, 2020-03-09]``."""
        ranged = dict(self.of.get_params())[self._param_name]
        first, last = (
            ranged.serialize(self.datetime_to_parameter(dt)) for dt in (datetimes[0], datetimes[-1])
        )
        return f"[{first}, {last}]"

    # -- which instances are missing -----------------------------------------------------------------

    def missing_datetimes(self, finite_datetimes: list[datetime]) -> list[datetime]:
        """The members of ``finite_datetimes`` whose instance is not complete, asking each instance."""
        return [
            dt
            for dt in finite_datetimes
            if not self._instantiate_task_cls(self.datetime_to_parameter(dt)).complete()
        ]

    def _missing_datetimes(self, finite_datetimes: list[datetime]) -> list[datetime]:
        """Call ``missing_datetimes``, also in its old form ``(task_cls, finite_datetimes)``."""
        if _positional_arity(self.missing_datetimes) == 2:
            warnings.warn(
                "missing_datetimes(task_cls, finite_datetimes) is deprecated; override "
                "missing_datetimes(finite_datetimes) and use self.of instead",
                DeprecationWarning,
                stacklevel=3,
            )
            return list(self.missing_datetimes(self.of, finite_datetimes))  # type: ignore[call-arg, arg-type]
        return list(self.missing_datetimes(finite_datetimes))

    # A strftime pattern giving, for a point in time, a regex whose groups find it in an output path.
    datetime_regex = "(%Y).*(%m).*(%d)"

    def _infer_missing_datetimes(self, finite_datetimes: list[datetime]) -> list[datetime]:
        """Missing datetimes from ``bulk_complete``, else filesystem listings, else each ``complete()``."""
        fixed, param_name = self._bound_of_call()
        values = [self.datetime_to_parameter(dt) for dt in finite_datetimes]
        try:
            complete = bulk_complete_values(self.of, fixed, param_name, values)
        except NotImplementedError:
            pass
        else:
            complete_datetimes = {self.parameter_to_datetime(value) for value in complete}
            return [dt for dt in finite_datetimes if dt not in complete_datetimes]
        try:
            return infer_bulk_complete_from_fs(
                finite_datetimes,
                lambda dt: self._instantiate_task_cls(self.datetime_to_parameter(dt)),
                lambda dt: dt.strftime(self.datetime_regex),
            )
        except NotImplementedError as exc:
            logger.info("Asking each %s instance whether it is complete: %s", self.of.get_task_family(), exc)
        return RangeBase.missing_datetimes(self, finite_datetimes)

    def _emit_metrics(
        self, missing_datetimes: list[datetime], finite_start: datetime, finite_stop: datetime
    ) -> None:
        """Fire DELAY, COMPLETE_COUNT and COMPLETE_FRACTION for this range (see ``RangeEvent``)."""
        window_start = finite_start if self.start is None else self.parameter_to_datetime(self.start)
        window_stop = finite_stop if self.stop is None else self.parameter_to_datetime(self.stop)
        window_start, window_stop = min(window_start, finite_start), max(window_stop, finite_stop)
        window = self.finite_datetimes(window_start, window_stop) if window_start <= window_stop else []
        family = self.of.get_task_family()
        first_missing = min(missing_datetimes) if missing_datetimes else None
        delay = sum(1 for dt in window if first_missing is not None and dt >= first_missing)
        complete = len(window) - len(missing_datetimes)
        self.trigger_event(RangeEvent.DELAY, family, delay)
        self.trigger_event(RangeEvent.COMPLETE_COUNT, family, complete)
        self.trigger_event(RangeEvent.COMPLETE_FRACTION, family, complete / len(window) if window else 1)


def _positional_arity(method: Any) -> int:
    """How many positional arguments a bound method takes (without defaults); -1 if it cannot tell."""
    try:
        parameters = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return -1
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in parameters if p.kind in positional and p.default is inspect.Parameter.empty)


def _regular_points(
    first: datetime, finite_start: datetime, finite_stop: datetime, step: timedelta
) -> list[datetime]:
    """``first + k * step`` for k = 0, 1, ... that fall in ``[finite_start, finite_stop)``."""
    points = []
    point = first
    while point < finite_stop:
        if point >= finite_start:
            points.append(point)
        point += step
    return points


class RangeDailyBase(RangeBase):
    """Requires the missing days of ``of`` (a task with a DateParameter), asking each day's ``complete()``.

    The window runs from ``days_back`` days before now to ``days_forward`` days after, so today is
    included; ``start``/``stop`` narrow it.
    """

    start = DateParameter(
        default=None, description="First date of the range (inclusive); none: open backwards (needs reverse)"
    )
    stop = DateParameter(default=None, description="Date the range ends before (exclusive); none: up to now")
    days_back = IntParameter(
        default=100,
        description="How many days before now the window reaches, even when start is older: a bound on the "
        "work of one run. Raise it to backfill further back",
    )
    days_forward = IntParameter(default=0, description="How many days after now the window reaches")

    def datetime_to_parameter(self, dt: datetime) -> date:
        return dt.date()

    def parameter_to_datetime(self, p: date) -> datetime:
        return datetime(p.year, p.month, p.day)

    def moving_start(self, now: datetime) -> datetime:
        return now - timedelta(days=self.days_back)

    def moving_stop(self, now: datetime) -> datetime:
        return now + timedelta(days=self.days_forward)

    def finite_datetimes(self, finite_start: datetime, finite_stop: datetime) -> list[datetime]:
        """Midnight of every day in the range."""
        first = datetime(finite_start.year, finite_start.month, finite_start.day)
        return _regular_points(first, finite_start, finite_stop, timedelta(days=1))


class RangeHourlyBase(RangeBase):
    """Requires the missing hours of ``of`` (a task with a DateHourParameter), asking each ``complete()``."""

    start = DateHourParameter(
        default=None, description="First hour of the range (inclusive); none: open backwards (needs reverse)"
    )
    stop = DateHourParameter(
        default=None, description="Hour the range ends before (exclusive); none: up to now"
    )
    hours_back = IntParameter(
        default=100 * 24,
        description="How many hours before now the window reaches, even when start is older: a bound on the "
        "work of one run. Raise it to backfill further back",
    )
    hours_forward = IntParameter(default=0, description="How many hours after now the window reaches")

    def datetime_to_parameter(self, dt: datetime) -> datetime:
        return dt

    def parameter_to_datetime(self, p: datetime) -> datetime:
        return p

    def moving_start(self, now: datetime) -> datetime:
        return now - timedelta(hours=self.hours_back)

    def moving_stop(self, now: datetime) -> datetime:
        return now + timedelta(hours=self.hours_forward)

    def finite_datetimes(self, finite_start: datetime, finite_stop: datetime) -> list[datetime]:
        """The start of every hour in the range."""
        first = datetime(finite_start.year, finite_start.month, finite_start.day, finite_start.hour)
        return _regular_points(first, finite_start, finite_stop, timedelta(hours=1))


class RangeByMinutesBase(RangeBase):
    """Requires the missing ``minutes_interval`` slots of ``of`` (a task with a DateMinuteParameter)."""

    start = DateMinuteParameter(
        default=None,
        description="First minute of the range (inclusive); none: open backwards (needs reverse)",
    )
    stop = DateMinuteParameter(
        default=None, description="Minute the range ends before (exclusive); none: up to now"
    )
    minutes_back = IntParameter(
        default=60 * 24,
        description="How many minutes before now the window reaches, even when start is older: a bound on "
        "the work of one run",
    )
    minutes_forward = IntParameter(default=0, description="How many minutes after now the window reaches")
    minutes_interval = IntParameter(
        default=1,
        description="Minutes between instances; it must divide 60 evenly (1, 2, 5, 10, 15, 30, ...)",
    )

    def datetime_to_parameter(self, dt: datetime) -> datetime:
        return dt

    def parameter_to_datetime(self, p: datetime) -> datetime:
        return p

    def moving_start(self, now: datetime) -> datetime:
        return now - timedelta(minutes=self.minutes_back)

    def moving_stop(self, now: datetime) -> datetime:
        return now + timedelta(minutes=self.minutes_forward)

    def finite_datetimes(self, finite_start: datetime, finite_stop: datetime) -> list[datetime]:
        """Every ``minutes_interval``-th minute of each hour (counted from :00) in the range."""
        interval = self.minutes_interval
        if not 0 < interval < 60 or 60 % interval:
            raise ParameterException(
                f"{self.task_family}: minutes_interval={interval} must be from 1 to 59 and divide 60 evenly"
            )
        minute = finite_start.minute - finite_start.minute % interval
        first = finite_start.replace(minute=minute, second=0, microsecond=0)
        return _regular_points(first, finite_start, finite_stop, timedelta(minutes=interval))


class RangeDaily(RangeDailyBase):
    """``RangeDailyBase`` that learns what is missing from ``bulk_complete`` or filesystem listings."""

    datetime_regex = "(%Y).*(%m).*(%d)"

    def missing_datetimes(self, finite_datetimes: list[datetime]) -> list[datetime]:
        return self._infer_missing_datetimes(finite_datetimes)


class RangeHourly(RangeHourlyBase):
    """``RangeHourlyBase`` that learns what is missing from ``bulk_complete`` or filesystem listings."""

    datetime_regex = "(%Y).*(%m).*(%d).*(%H)"

    def missing_datetimes(self, finite_datetimes: list[datetime]) -> list[datetime]:
        return self._infer_missing_datetimes(finite_datetimes)


class RangeByMinutes(RangeByMinutesBase):
    """``RangeByMinutesBase`` that learns what is missing from ``bulk_complete`` or filesystem listings."""

    datetime_regex = "(%Y).*(%m).*(%d).*(%H).*(%M)"

    def missing_datetimes(self, finite_datetimes: list[datetime]) -> list[datetime]:
        return self._infer_missing_datetimes(finite_datetimes)


def _month_start(dt: datetime) -> datetime:
    return datetime(dt.year, dt.month, 1)


def _add_months(month_start: datetime, months: int) -> datetime:
    year, month_index = divmod(month_start.year * 12 + month_start.month - 1 + months, 12)
    return datetime(year, month_index + 1, 1)


class RangeMonthly(RangeBase):
    """Requires the missing months of ``of`` (a task with a MonthParameter), asking each ``complete()``.

    The window runs from ``months_back`` months before the current month up to the current month
    (exclusive, as it has not ended) plus ``months_forward``.
    """

    start = MonthParameter(
        default=None, description="First month of the range (inclusive); none: open backwards (needs reverse)"
    )
    stop = MonthParameter(
        default=None, description="Month the range ends before (exclusive); none: up to now"
    )
    months_back = IntParameter(
        default=13,
        description="How many months before the current one the window reaches, even when start is older",
    )
    months_forward = IntParameter(
        default=0, description="How many months after the current one the window reaches"
    )

    def datetime_to_parameter(self, dt: datetime) -> date:
        return date(dt.year, dt.month, 1)

    def parameter_to_datetime(self, p: date) -> datetime:
        return datetime(p.year, p.month, 1)

    def moving_start(self, now: datetime) -> datetime:
        return _add_months(_month_start(now), -self.months_back)

    def moving_stop(self, now: datetime) -> datetime:
        return _add_months(_month_start(now), self.months_forward)

    def finite_datetimes(self, finite_start: datetime, finite_stop: datetime) -> list[datetime]:
        """The first day of every month in the range."""
        months = []
        month = _month_start(finite_start)
        while month < _month_start(finite_stop):
            if month >= finite_start:
                months.append(month)
            month = _add_months(month, 1)
        return months
