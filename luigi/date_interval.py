"""Date intervals: a day, an ISO week, a month, a year or a custom range, as ``[date_a, date_b)``.

Each kind has a string form (``2024-03-05``, ``2024-W10``, ``2024-03``, ``2024``,
``2024-03-01-2024-03-15``) that ``parse`` reads back, and steps to its neighbours with ``prev``/``next``.
"""

from __future__ import annotations

import datetime
import re
from typing import Any


class DateInterval:
    """A half-open range of dates, ``date_a`` included and ``date_b`` excluded.

    Intervals of the same kind compare by their bounds; comparing intervals of different kinds, even with
    ``==``, raises ``TypeError("Date interval type mismatch")``. Anything that is not an interval is unequal.
    """

    def __init__(self, date_a: datetime.date, date_b: datetime.date) -> None:
        self.date_a = date_a
        self.date_b = date_b

    def dates(self) -> list[datetime.date]:
        """Every date in the interval, in order."""
        days = (self.date_b - self.date_a).days
        return [self.date_a + datetime.timedelta(days=i) for i in range(days)]

    def hours(self) -> list[datetime.datetime]:
        """Every whole hour in the interval, in order."""
        return [
            datetime.datetime.combine(day, datetime.time()) + datetime.timedelta(hours=hour)
            for day in self.dates()
            for hour in range(24)
        ]

    def prev(self) -> DateInterval:
        """The interval of the same kind that ends where this one starts."""
        return self.from_date(self.date_a - datetime.timedelta(days=1))

    def next(self) -> DateInterval:
        """The interval of the same kind that starts where this one ends."""
        return self.from_date(self.date_b)

    def to_string(self) -> str:
        raise NotImplementedError

    @classmethod
    def from_date(cls, d: datetime.date) -> DateInterval:
        """The interval of this kind that contains ``d``."""
        raise NotImplementedError

    @classmethod
    def parse(cls, s: str) -> DateInterval | None:
        """The interval written as ``s``, or None when ``s`` is not in this kind's format.

        Raises ValueError when the format matches but the date does not exist (e.g. month 13).
        """
        raise NotImplementedError

    def __contains__(self, date: object) -> bool:
        if isinstance(date, datetime.datetime):
            date = date.date()
        if not isinstance(date, datetime.date):
            return False
        return self.date_a <= date < self.date_b

    def __str__(self) -> str:
        return self.to_string()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.to_string()})"

    def _key(self) -> tuple[datetime.date, datetime.date]:
        return (self.date_a, self.date_b)

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._key()))

    def _key_against(self, other: object) -> tuple[datetime.date, datetime.date]:
        """The key of ``other``; intervals of different kinds cannot be compared (TypeError)."""
        if type(self) is not type(other):
            raise TypeError("Date interval type mismatch")
        assert isinstance(other, DateInterval)
        return other._key()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DateInterval):
            return False
        return self._key() == self._key_against(other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __lt__(self, other: Any) -> bool:
        if not isinstance(other, DateInterval):
            return NotImplemented
        return self._key() < self._key_against(other)

    def __le__(self, other: Any) -> bool:
        if not isinstance(other, DateInterval):
            return NotImplemented
        return self._key() <= self._key_against(other)

    def __gt__(self, other: Any) -> bool:
        if not isinstance(other, DateInterval):
            return NotImplemented
        return self._key() > self._key_against(other)

    def __ge__(self, other: Any) -> bool:
        if not isinstance(other, DateInterval):
            return NotImplemented
        return self._key() >= self._key_against(other)


def _build(kind: str, text: str, build: Any, *parts: int) -> Any:
    """Call ``build(*parts)``; a date that does not exist becomes a ValueError naming the text."""
    try:
        return build(*parts)
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"{text!r} is not a valid {kind}: {exc}") from exc


class Date(DateInterval):
    """A single day, written ``YYYY-MM-DD``."""

    _PATTERN = re.compile(r"(\d{4})-(\d{2})-(\d{2})", re.ASCII)

    def __init__(self, y: int, m: int, d: int) -> None:
        start = datetime.date(y, m, d)
        super().__init__(start, start + datetime.timedelta(days=1))

    def to_string(self) -> str:
        return _format_date(self.date_a)

    @classmethod
    def from_date(cls, d: datetime.date) -> Date:
        return cls(d.year, d.month, d.day)

    @classmethod
    def parse(cls, s: str) -> Date | None:
        match = cls._PATTERN.fullmatch(s)
        if match is None:
            return None
        return _build("date", s, cls, *map(int, match.groups()))


class Week(DateInterval):
    """An ISO 8601 week (Monday to Sunday), written ``YYYY-Www`` with the ISO year and week number."""

    _PATTERN = re.compile(r"(\d{4})-W(\d{2})", re.ASCII)

    def __init__(self, y: int, w: int) -> None:
        start = datetime.date.fromisocalendar(y, w, 1)
        super().__init__(start, start + datetime.timedelta(weeks=1))
        self.year = y
        self.week = w

    def to_string(self) -> str:
        return f"{self.year:04d}-W{self.week:02d}"

    @classmethod
    def from_date(cls, d: datetime.date) -> Week:
        year, week, _ = d.isocalendar()
        return cls(year, week)

    @classmethod
    def parse(cls, s: str) -> Week | None:
        match = cls._PATTERN.fullmatch(s)
        if match is None:
            return None
        return _build("ISO week", s, cls, *map(int, match.groups()))


class Month(DateInterval):
    """A calendar month, written ``YYYY-MM``."""

    _PATTERN = re.compile(r"(\d{4})-(\d{2})", re.ASCII)

    def __init__(self, y: int, m: int) -> None:
        start = datetime.date(y, m, 1)
        end = datetime.date(y + 1, 1, 1) if m == 12 else datetime.date(y, m + 1, 1)
        super().__init__(start, end)

    def to_string(self) -> str:
        return f"{self.date_a.year:04d}-{self.date_a.month:02d}"

    @classmethod
    def from_date(cls, d: datetime.date) -> Month:
        return cls(d.year, d.month)

    @classmethod
    def parse(cls, s: str) -> Month | None:
        match = cls._PATTERN.fullmatch(s)
        if match is None:
            return None
        return _build("month", s, cls, *map(int, match.groups()))


class Year(DateInterval):
    """A calendar year, written ``YYYY``."""

    _PATTERN = re.compile(r"\d{4}", re.ASCII)

    def __init__(self, y: int) -> None:
        super().__init__(datetime.date(y, 1, 1), datetime.date(y + 1, 1, 1))

    def to_string(self) -> str:
        return f"{self.date_a.year:04d}"

    @classmethod
    def from_date(cls, d: datetime.date) -> Year:
        return cls(d.year)

    @classmethod
    def parse(cls, s: str) -> Year | None:
        if cls._PATTERN.fullmatch(s) is None:
            return None
        return _build("year", s, cls, int(s))


class Custom(DateInterval):
    """Any non-empty range of days, written ``YYYY-MM-DD-YYYY-MM-DD`` (the end date is excluded).

    It has no neighbours: ``prev``/``next`` raise NotImplementedError.
    """

    _PATTERN = re.compile(r"(\d{4})-(\d{2})-(\d{2})-(\d{4})-(\d{2})-(\d{2})", re.ASCII)

    def __init__(self, date_a: datetime.date, date_b: datetime.date) -> None:
        if date_b <= date_a:
            raise ValueError(f"A custom date interval must end after it starts, got {date_a} to {date_b}")
        super().__init__(date_a, date_b)

    def to_string(self) -> str:
        return f"{_format_date(self.date_a)}-{_format_date(self.date_b)}"

    def prev(self) -> Custom:
        raise NotImplementedError("A custom date interval has no previous interval: build the one you need")

    def next(self) -> Custom:
        raise NotImplementedError("A custom date interval has no next interval: build the one you need")

    @classmethod
    def from_date(cls, d: datetime.date) -> Custom:
        raise NotImplementedError("A custom date interval cannot be derived from a single date")

    @classmethod
    def parse(cls, s: str) -> Custom | None:
        match = cls._PATTERN.fullmatch(s)
        if match is None:
            return None
        y1, m1, d1, y2, m2, d2 = map(int, match.groups())
        start = _build("date interval", s, datetime.date, y1, m1, d1)
        end = _build("date interval", s, datetime.date, y2, m2, d2)
        return _build("date interval", s, cls, start, end)


def _format_date(d: datetime.date) -> str:
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d}"
