"""Date and time parameters: dates, months, years, hours, minutes, seconds, date intervals, durations.

Dates and datetimes snap down to a grid (``start + k * interval`` units) on ``normalize``, so that nearby
values give the same task; ``next_in_enumeration`` steps one interval along that grid.
"""

from __future__ import annotations

import datetime
import re
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Any, TypeVar

from luigi import date_interval
from luigi.parameter.base import Parameter, namespace, warn

DateT = TypeVar("DateT", bound=datetime.date, covariant=True)

_EPOCH = datetime.datetime(1970, 1, 1)


def _format(value: datetime.date, fmt: str) -> str:
    """strftime with a four-digit year even before 1000 (so the result parses back)."""
    return value.strftime(fmt.replace("%Y", f"{value.year:04d}"))


class _DateParameterBase(Parameter[DateT]):
    """Shared parsing and formatting for the date-like parameters.

    Subclasses set ``date_format`` (strftime/strptime) and ``_expected`` (the same format for humans).
    """

    date_format = "%Y-%m-%d"
    _kind = "date"
    _expected = "YYYY-MM-DD"

    def __init__(self, interval: int = 1, start: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.interval = interval
        self.start = self._coerce_start(start if start is not None else _EPOCH)

    def _coerce_start(self, start: Any) -> Any:
        return start.date() if isinstance(start, datetime.datetime) else start

    def _strptime(self, s: str) -> datetime.datetime:
        try:
            return datetime.datetime.strptime(s, self.date_format)
        except (TypeError, ValueError):
            raise ValueError(f"{s!r} is not a valid {self._kind} (expected {self._expected})") from None

    def parse(self, s: str) -> Any:
        return self._strptime(s).date()

    def serialize(self, dt: Any) -> str:
        if dt is None:
            return str(dt)
        return _format(dt, self.date_format)

    def _as_date(self, value: Any) -> datetime.date:
        """Accept a date, a datetime, a date interval (its first day) or the text form."""
        if isinstance(value, str):
            value = self.parse(value)
        if isinstance(value, date_interval.DateInterval):
            value = value.date_a
        if isinstance(value, datetime.datetime):
            value = value.date()
        return value


class DateParameter(_DateParameterBase[datetime.date]):
    """A date, ``YYYY-MM-DD``; snaps down to ``start + k * interval`` days (start: 1970-01-01)."""

    def normalize(self, value: Any) -> datetime.date | None:
        if value is None:
            return None
        day = self._as_date(value)
        offset = (day - self.start).days % self.interval
        return day - datetime.timedelta(days=offset)

    def next_in_enumeration(self, value: Any) -> Any:
        return value + datetime.timedelta(days=self.interval)


def _add_months(day: datetime.date, months: int) -> datetime.date:
    """The first of the month ``months`` after ``day``'s month."""
    year, month_index = divmod(day.year * 12 + day.month - 1 + months, 12)
    return datetime.date(year, month_index + 1, 1)


class MonthParameter(_DateParameterBase[datetime.date]):
    """A month, ``YYYY-MM``, as the date of its first day; also accepts a ``date_interval.Month``."""

    date_format = "%Y-%m"
    _kind = "month"
    _expected = "YYYY-MM"

    def normalize(self, value: Any) -> datetime.date | None:
        if value is None:
            return None
        day = self._as_date(value)
        months = (day.year - self.start.year) * 12 + (day.month - self.start.month)
        return _add_months(self.start, months - months % self.interval)

    def next_in_enumeration(self, value: Any) -> Any:
        return _add_months(value, self.interval)


class YearParameter(_DateParameterBase[datetime.date]):
    """A year, ``YYYY``, as the date of its January 1st; also accepts a ``date_interval.Year``."""

    date_format = "%Y"
    _kind = "year"
    _expected = "YYYY"

    def normalize(self, value: Any) -> datetime.date | None:
        if value is None:
            return None
        day = self._as_date(value)
        year = day.year - (day.year - self.start.year) % self.interval
        return datetime.date(year, 1, 1)

    def next_in_enumeration(self, value: Any) -> Any:
        return value.replace(year=value.year + self.interval)


class _DatetimeParameterBase(_DateParameterBase[datetime.datetime]):
    """A datetime snapped down to ``start + k * interval * _granularity`` (start: 1970-01-01T00:00)."""

    _granularity = datetime.timedelta(hours=1)

    def _coerce_start(self, start: Any) -> Any:
        if isinstance(start, datetime.datetime):
            return start
        return datetime.datetime.combine(start, datetime.time())

    def parse(self, s: str) -> Any:
        return self._strptime(s)

    def normalize(self, value: Any) -> datetime.datetime | None:
        if value is None:
            return None
        if isinstance(value, str):
            value = self.parse(value)
        if not isinstance(value, datetime.datetime):
            value = datetime.datetime.combine(value, datetime.time())
        value = value.replace(microsecond=0)
        start = self.start
        if value.tzinfo is not None and start.tzinfo is None:
            start = start.replace(tzinfo=value.tzinfo)
        elif value.tzinfo is None and start.tzinfo is not None:
            value = value.replace(tzinfo=start.tzinfo)
        return value - (value - start) % (self._granularity * self.interval)

    def next_in_enumeration(self, value: Any) -> Any:
        return value + self._granularity * self.interval


class DateHourParameter(_DatetimeParameterBase):
    """A date and hour, ``YYYY-MM-DDTHH``."""

    date_format = "%Y-%m-%dT%H"
    _kind = "date and hour"
    _expected = "YYYY-MM-DDTHH"
    _granularity = datetime.timedelta(hours=1)


class DateMinuteParameter(_DatetimeParameterBase):
    """A date, hour and minute, ``YYYY-MM-DDTHHMM``; the old ``YYYY-MM-DDTHHHMM`` parses with a warning."""

    date_format = "%Y-%m-%dT%H%M"
    deprecated_date_format = "%Y-%m-%dT%HH%M"
    _kind = "date and minute"
    _expected = "YYYY-MM-DDTHHMM"
    _granularity = datetime.timedelta(minutes=1)

    def parse(self, s: str) -> Any:
        try:
            return self._strptime(s)
        except ValueError:
            try:
                value = datetime.datetime.strptime(s, self.deprecated_date_format)
            except (TypeError, ValueError):
                raise ValueError(f"{s!r} is not a valid {self._kind} (expected {self._expected})") from None
        warn('Using "H" between hours and minutes is deprecated, omit it instead.', DeprecationWarning)
        return value


class DateSecondParameter(_DatetimeParameterBase):
    """A date and time to the second, ``YYYY-MM-DDTHHMMSS``."""

    date_format = "%Y-%m-%dT%H%M%S"
    _kind = "date and time"
    _expected = "YYYY-MM-DDTHHMMSS"
    _granularity = datetime.timedelta(seconds=1)


_INTERVAL_KINDS: tuple[type[date_interval.DateInterval], ...] = (
    date_interval.Year,
    date_interval.Month,
    date_interval.Week,
    date_interval.Date,
    date_interval.Custom,
)


class DateIntervalParameter(Parameter[date_interval.DateInterval]):
    """A ``DateInterval``: ``YYYY``, ``YYYY-MM``, ``YYYY-Www``, ``YYYY-MM-DD`` or a custom range."""

    def parse(self, s: str) -> date_interval.DateInterval:
        if isinstance(s, str):
            for kind in _INTERVAL_KINDS:
                interval = kind.parse(s)
                if interval is not None:
                    return interval
        raise ValueError(
            f"{s!r} is not a valid date interval "
            "(expected YYYY, YYYY-MM, YYYY-Www, YYYY-MM-DD or YYYY-MM-DD-YYYY-MM-DD)"
        )

    def normalize(self, value: Any) -> Any:
        return self.parse(value) if isinstance(value, str) else value

    def next_in_enumeration(self, value: Any) -> Any:
        try:
            return value.next()
        except NotImplementedError:  # a Custom interval has no successor
            return None


_UNIT_MICROSECONDS = {
    "weeks": 7 * 24 * 3600 * 10**6,
    "days": 24 * 3600 * 10**6,
    "hours": 3600 * 10**6,
    "minutes": 60 * 10**6,
    "seconds": 10**6,
}
_MAX_MICROSECONDS = (datetime.timedelta.max - datetime.timedelta(0)) // datetime.timedelta(microseconds=1)
_NUMBER = r"\d+(?:\.\d+)?"
_PLAIN_SECONDS = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_ISO_WEEKS = re.compile(rf"P(?P<weeks>{_NUMBER})W", re.ASCII)
_ISO_DAY_TIME = re.compile(
    rf"P(?:(?P<days>{_NUMBER})D)?"
    rf"(?:T(?:(?P<hours>{_NUMBER})H)?(?:(?P<minutes>{_NUMBER})M)?(?:(?P<seconds>{_NUMBER})S)?)?",
    re.ASCII,
)
_SIMPLE = re.compile(
    r"(?P<sign>-)?\s*"
    rf"(?:(?P<weeks>{_NUMBER})\s*w(?:(?:ee)?ks?)?\s*)?"
    rf"(?:(?P<days>{_NUMBER})\s*d(?:ays?)?\s*)?"
    rf"(?:(?P<hours>{_NUMBER})\s*h(?:(?:ou)?rs?)?\s*)?"
    rf"(?:(?P<minutes>{_NUMBER})\s*m(?:in(?:ute)?s?)?\s*)?"
    rf"(?:(?P<seconds>{_NUMBER})\s*s(?:ec(?:ond)?s?)?)?",
    re.ASCII | re.IGNORECASE,
)


def _timedelta_from_units(amounts: dict[str, Decimal], negative: bool) -> datetime.timedelta:
    total = sum((amount * _UNIT_MICROSECONDS[unit] for unit, amount in amounts.items()), Decimal(0))
    if abs(total) > _MAX_MICROSECONDS:
        raise OverflowError("duration too large")
    micros = int(total.to_integral_value(rounding=ROUND_HALF_EVEN))
    return datetime.timedelta(microseconds=-micros if negative else micros)


def _match_timedelta(text: str) -> datetime.timedelta | None:
    """The duration ``text`` spells in one of the accepted forms, or None if it fits none of them."""
    if _PLAIN_SECONDS.fullmatch(text):
        return _timedelta_from_units({"seconds": Decimal(text)}, negative=False)
    for pattern in (_ISO_WEEKS, _ISO_DAY_TIME, _SIMPLE):
        match = pattern.fullmatch(text)
        if match is None:
            continue
        groups = match.groupdict()
        amounts = {unit: Decimal(groups[unit]) for unit in _UNIT_MICROSECONDS if groups.get(unit) is not None}
        if amounts:
            return _timedelta_from_units(amounts, negative=bool(groups.get("sign")))
    return None


class TimeDeltaParameter(Parameter[datetime.timedelta]):
    """A ``datetime.timedelta`` from seconds, ISO 8601 (``P1W``, ``P1DT2H``) or ``1 w 2 d 3 h 4 m 5 s``.

    Long unit names (``2 days 3 hours``) are accepted too; values serialize as ``"{w} w {d} d {h} h {m} m
    {s} s"`` (a leading ``-`` for negative durations, fractional seconds when there are microseconds).
    """

    def parse(self, input: str) -> datetime.timedelta:
        """The duration ``input`` spells; raises ``luigi.parameter.ParameterException`` (looked up when
        raised, a hook users' tests patch) when it spells none, or one too large."""
        text = input.strip() if isinstance(input, str) else ""
        try:
            value = _match_timedelta(text)
        except (OverflowError, InvalidOperation):
            value = None
        if value is None:
            raise namespace().ParameterException(f"Invalid time delta - could not parse {input}")
        return value

    def serialize(self, x: Any) -> str:
        if not isinstance(x, datetime.timedelta):
            return str(x)  # a wrong type (warned about when the task is built) still gets an id
        if x < datetime.timedelta(0):
            return "-" + self.serialize(-x)
        weeks, days = divmod(x.days, 7)
        hours, rest = divmod(x.seconds, 3600)
        minutes, seconds = divmod(rest, 60)
        secs = f"{seconds}.{x.microseconds:06d}".rstrip("0") if x.microseconds else str(seconds)
        return f"{weeks} w {days} d {hours} h {minutes} m {secs} s"

    def _warn_on_wrong_param_type(self, param_name: str, param_value: Any) -> None:
        if not isinstance(param_value, datetime.timedelta):
            warn(f'Parameter "{param_name}" with value "{param_value}" is not of type timedelta.')
