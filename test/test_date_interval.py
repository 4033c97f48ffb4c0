"""Date intervals: parsing, printing, stepping, membership and ordering, as Luigi users write them."""

from __future__ import annotations

import datetime
import operator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from luigi import date_interval
from luigi.date_interval import Custom, Date, DateInterval, Month, Week, Year

dates = st.dates(min_value=datetime.date(1000, 1, 8), max_value=datetime.date(9997, 12, 24))


@pytest.mark.parametrize(
    ("kind", "text", "first", "end"),
    [
        (Date, "2024-02-29", datetime.date(2024, 2, 29), datetime.date(2024, 3, 1)),
        (Week, "2024-W10", datetime.date(2024, 3, 4), datetime.date(2024, 3, 11)),
        (Month, "2024-12", datetime.date(2024, 12, 1), datetime.date(2025, 1, 1)),
        (Year, "2024", datetime.date(2024, 1, 1), datetime.date(2025, 1, 1)),
        (Custom, "2024-03-01-2024-03-15", datetime.date(2024, 3, 1), datetime.date(2024, 3, 15)),
    ],
)
def test_each_kind_parses_its_string_form_and_prints_it_back(kind, text, first, end):
    interval = kind.parse(text)
    assert isinstance(interval, kind)
    assert (interval.date_a, interval.date_b) == (first, end)
    assert interval.to_string() == text
    assert str(interval) == text
    assert repr(interval) == f"{kind.__name__}({text})"


@pytest.mark.parametrize(
    ("kind", "text"),
    [(Date, "2024-03"), (Week, "2024-10"), (Month, "2024"), (Year, "24"), (Custom, "2024-03-01")],
)
def test_parse_returns_none_for_another_format(kind, text):
    assert kind.parse(text) is None


@pytest.mark.parametrize(
    ("kind", "text"),
    [(Date, "2024-13-45"), (Week, "2024-W54"), (Month, "2024-13"), (Custom, "2024-03-01-2024-02-30")],
)
def test_parse_of_an_impossible_date_raises_value_error_naming_it(kind, text):
    with pytest.raises(ValueError, match=text):
        kind.parse(text)


def test_dates_lists_every_day_and_hours_every_hour():
    interval = Custom(datetime.date(2024, 2, 28), datetime.date(2024, 3, 2))
    assert interval.dates() == [
        datetime.date(2024, 2, 28),
        datetime.date(2024, 2, 29),
        datetime.date(2024, 3, 1),
    ]
    hours = interval.hours()
    assert len(hours) == 72
    assert hours[0] == datetime.datetime(2024, 2, 28, 0)
    assert hours[-1] == datetime.datetime(2024, 3, 1, 23)
    assert len(Month(2024, 2).dates()) == 29


def test_prev_and_next_step_to_the_neighbouring_interval_of_the_same_kind():
    assert Date(2024, 3, 1).prev() == Date(2024, 2, 29)
    assert Week(2021, 1).prev() == Week(2020, 53)
    assert Month(2024, 1).prev() == Month(2023, 12)
    assert Month(2024, 12).next() == Month(2025, 1)
    assert Year(2024).next() == Year(2025)


def test_custom_interval_has_no_neighbours():
    interval = Custom(datetime.date(2024, 3, 1), datetime.date(2024, 3, 4))
    with pytest.raises(NotImplementedError):
        interval.next()
    with pytest.raises(NotImplementedError):
        interval.prev()


def test_custom_interval_must_end_after_it_starts():
    with pytest.raises(ValueError, match="must end after it starts"):
        Custom(datetime.date(2024, 3, 1), datetime.date(2024, 3, 1))


def test_week_uses_iso_years_around_new_year():
    assert Week.from_date(datetime.date(2021, 1, 1)) == Week(2020, 53)
    assert Week.from_date(datetime.date(2024, 12, 30)).to_string() == "2025-W01"


def test_contains_checks_the_half_open_range():
    month = Month(2024, 2)
    assert datetime.date(2024, 2, 1) in month
    assert datetime.date(2024, 2, 29) in month
    assert datetime.date(2024, 3, 1) not in month
    assert datetime.datetime(2024, 2, 10, 13, 30) in month
    assert "2024-02-10" not in month


def test_intervals_of_one_kind_order_by_their_dates():
    assert Date(2024, 1, 1) < Date(2024, 1, 2) <= Date(2024, 1, 2)
    assert Month(2024, 3) > Month(2024, 2)
    assert sorted([Year(2025), Year(2023), Year(2024)]) == [Year(2023), Year(2024), Year(2025)]


def test_intervals_of_different_kinds_cannot_be_compared():
    day = Date(2024, 1, 1)
    same_range = Custom(datetime.date(2024, 1, 1), datetime.date(2024, 1, 2))
    for compare in (operator.eq, operator.ne, operator.lt, operator.ge):
        with pytest.raises(TypeError, match="^Date interval type mismatch$"):
            compare(day, same_range)
    assert day != "2024-01-01"
    assert not day == "2024-01-01"  # noqa: SIM201 (the == path is the one under test)
    with pytest.raises(TypeError):
        _ = day < "2024-01-02"


def test_equal_intervals_hash_equal():
    assert hash(Month(2024, 2)) == hash(Month.parse("2024-02"))
    assert len({Year(2024), Year(2024), Year(2023)}) == 2


def test_the_base_class_leaves_the_format_to_subclasses():
    interval = DateInterval(datetime.date(2024, 1, 1), datetime.date(2024, 1, 3))
    assert interval.dates() == [datetime.date(2024, 1, 1), datetime.date(2024, 1, 2)]
    with pytest.raises(NotImplementedError):
        interval.to_string()


@pytest.mark.parametrize("kind", [Date, Week, Month, Year])
@given(day=dates)
def test_from_date_gives_the_interval_containing_the_date(kind, day):
    interval = kind.from_date(day)
    assert day in interval
    assert interval.date_a <= day < interval.date_b
    assert interval.next().prev() == interval
    assert interval.next().date_a == interval.date_b
    assert kind.parse(interval.to_string()) == interval


@given(start=dates, length=st.integers(min_value=1, max_value=400))
def test_custom_intervals_round_trip_through_their_string_form(start, length):
    interval = Custom(start, start + datetime.timedelta(days=length))
    assert Custom.parse(str(interval)) == interval
    assert len(interval.dates()) == length


def test_module_exposes_the_interval_kinds_by_luigi_names():
    assert {"DateInterval", "Date", "Week", "Month", "Year", "Custom"} <= set(vars(date_interval))
