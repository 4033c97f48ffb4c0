"""Date, time, date interval and duration parameters: formats, snapping to a grid, and enumeration."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from luigi import date_interval
from luigi.parameter import (
    DateHourParameter,
    DateIntervalParameter,
    DateMinuteParameter,
    DateParameter,
    DateSecondParameter,
    MonthParameter,
    ParameterException,
    TimeDeltaParameter,
    YearParameter,
)

dates = st.dates(min_value=datetime.date(1, 1, 1), max_value=datetime.date(9990, 12, 31))
datetimes = st.datetimes(min_value=datetime.datetime(1, 1, 2), max_value=datetime.datetime(9990, 12, 31))


def test_date_parameter_parses_and_serializes_iso_dates():
    param = DateParameter()
    assert param.parse("2024-02-29") == datetime.date(2024, 2, 29)
    assert param.serialize(datetime.date(2024, 2, 29)) == "2024-02-29"


def test_date_parameter_rejects_impossible_dates_naming_the_format():
    with pytest.raises(ValueError, match=r"'2024-13-45' is not a valid date \(expected YYYY-MM-DD\)"):
        DateParameter().parse("2024-13-45")


def test_date_parameter_normalizes_datetimes_to_dates():
    assert DateParameter().normalize(datetime.datetime(2024, 3, 5, 17, 30)) == datetime.date(2024, 3, 5)
    assert DateParameter().normalize(None) is None


def test_date_parameter_snaps_down_to_the_interval_grid():
    param = DateParameter(interval=7, start=datetime.date(2024, 1, 1))
    assert param.normalize(datetime.date(2024, 1, 10)) == datetime.date(2024, 1, 8)
    assert param.normalize(datetime.date(2024, 1, 8)) == datetime.date(2024, 1, 8)
    assert param.next_in_enumeration(datetime.date(2024, 1, 8)) == datetime.date(2024, 1, 15)


def test_date_parameter_enumerates_by_day():
    assert DateParameter().next_in_enumeration(datetime.date(2024, 2, 28)) == datetime.date(2024, 2, 29)


@given(dates)
def test_date_parameter_round_trips_including_early_years(value):
    param = DateParameter()
    assert param.parse(param.serialize(value)) == value


def test_month_parameter_parses_to_the_first_of_the_month():
    param = MonthParameter()
    assert param.parse("2024-02") == datetime.date(2024, 2, 1)
    assert param.serialize(datetime.date(2024, 2, 1)) == "2024-02"
    assert param.normalize(datetime.date(2024, 2, 17)) == datetime.date(2024, 2, 1)


def test_month_parameter_accepts_a_month_interval():
    assert MonthParameter().normalize(date_interval.Month(2024, 5)) == datetime.date(2024, 5, 1)


def test_month_parameter_snaps_to_interval_months_from_start():
    param = MonthParameter(interval=3, start=datetime.date(2024, 1, 1))
    assert param.normalize(datetime.date(2024, 6, 30)) == datetime.date(2024, 4, 1)
    assert param.normalize(datetime.date(2023, 12, 1)) == datetime.date(2023, 10, 1)
    assert param.next_in_enumeration(datetime.date(2024, 11, 1)) == datetime.date(2025, 2, 1)


def test_month_parameter_rejects_bad_months():
    with pytest.raises(ValueError, match=r"'2024-13' is not a valid month \(expected YYYY-MM\)"):
        MonthParameter().parse("2024-13")


@given(dates)
def test_month_parameter_round_trips(value):
    param = MonthParameter()
    month = param.normalize(value)
    assert param.normalize(param.parse(param.serialize(month))) == month


def test_year_parameter_snaps_to_january_first():
    param = YearParameter()
    assert param.parse("2024") == datetime.date(2024, 1, 1)
    assert param.normalize(datetime.date(2024, 7, 4)) == datetime.date(2024, 1, 1)
    assert param.normalize(date_interval.Year(2023)) == datetime.date(2023, 1, 1)
    assert param.serialize(datetime.date(2024, 1, 1)) == "2024"
    assert param.next_in_enumeration(datetime.date(2024, 1, 1)) == datetime.date(2025, 1, 1)


def test_year_parameter_rejects_non_years():
    with pytest.raises(ValueError, match=r"'20x4' is not a valid year \(expected YYYY\)"):
        YearParameter().parse("20x4")


def test_date_hour_parameter_uses_the_t_hour_format():
    param = DateHourParameter()
    assert param.parse("2024-03-05T07") == datetime.datetime(2024, 3, 5, 7)
    assert param.serialize(datetime.datetime(2024, 3, 5, 7)) == "2024-03-05T07"


def test_date_hour_parameter_drops_minutes_and_snaps_to_the_interval():
    assert DateHourParameter().normalize(datetime.datetime(2024, 3, 5, 7, 59, 1, 5)) == datetime.datetime(
        2024, 3, 5, 7
    )
    param = DateHourParameter(interval=6)
    assert param.normalize(datetime.datetime(2024, 3, 5, 11, 30)) == datetime.datetime(2024, 3, 5, 6)
    assert param.next_in_enumeration(datetime.datetime(2024, 3, 5, 18)) == datetime.datetime(2024, 3, 6, 0)


def test_date_hour_parameter_keeps_the_time_zone_of_aware_values():
    tz = datetime.timezone(datetime.timedelta(hours=2))
    value = DateHourParameter().normalize(datetime.datetime(2024, 3, 5, 7, 45, tzinfo=tz))
    assert value == datetime.datetime(2024, 3, 5, 7, tzinfo=tz)


def test_date_hour_parameter_rejects_bad_hours():
    with pytest.raises(
        ValueError, match=r"'2024-03-05T25' is not a valid date and hour \(expected YYYY-MM-DDTHH\)"
    ):
        DateHourParameter().parse("2024-03-05T25")


def test_date_minute_parameter_uses_the_hour_minute_format():
    param = DateMinuteParameter()
    assert param.parse("2024-03-05T0730") == datetime.datetime(2024, 3, 5, 7, 30)
    assert param.serialize(datetime.datetime(2024, 3, 5, 7, 30)) == "2024-03-05T0730"
    assert param.normalize(datetime.datetime(2024, 3, 5, 7, 30, 59)) == datetime.datetime(2024, 3, 5, 7, 30)


def test_date_minute_parameter_accepts_the_deprecated_h_form_with_a_warning():
    with pytest.warns(DeprecationWarning, match='Using "H" between hours and minutes is deprecated'):
        value = DateMinuteParameter().parse("2024-03-05T07H30")
    assert value == datetime.datetime(2024, 3, 5, 7, 30)


def test_date_minute_parameter_rejects_bad_text():
    with pytest.raises(
        ValueError, match=r"'2024-03-05 07:30' is not a valid date and minute \(expected YYYY-MM-DDTHHMM\)"
    ):
        DateMinuteParameter().parse("2024-03-05 07:30")


def test_date_minute_parameter_snaps_to_interval_minutes():
    param = DateMinuteParameter(interval=15)
    assert param.normalize(datetime.datetime(2024, 3, 5, 7, 44)) == datetime.datetime(2024, 3, 5, 7, 30)
    assert param.next_in_enumeration(datetime.datetime(2024, 3, 5, 7, 45)) == datetime.datetime(2024, 3, 5, 8)


def test_date_second_parameter_uses_the_compact_time_format():
    param = DateSecondParameter()
    assert param.parse("2024-03-05T073015") == datetime.datetime(2024, 3, 5, 7, 30, 15)
    assert param.serialize(datetime.datetime(2024, 3, 5, 7, 30, 15)) == "2024-03-05T073015"
    assert param.next_in_enumeration(datetime.datetime(2024, 3, 5, 7, 30, 59)) == datetime.datetime(
        2024, 3, 5, 7, 31
    )


def test_date_second_parameter_rejects_bad_text():
    with pytest.raises(ValueError, match="'yesterday' is not a valid date and time"):
        DateSecondParameter().parse("yesterday")


@pytest.mark.parametrize("param_class", [DateHourParameter, DateMinuteParameter, DateSecondParameter])
@given(value=datetimes)
def test_datetime_parameters_round_trip_normalized_values(param_class, value):
    param = param_class()
    normalized = param.normalize(value)
    assert normalized <= value
    assert param.normalize(param.parse(param.serialize(normalized))) == normalized


def test_datetime_parameters_normalize_text_and_dates():
    assert DateHourParameter().normalize("2024-03-05T07") == datetime.datetime(2024, 3, 5, 7)
    assert DateHourParameter().normalize(datetime.date(2024, 3, 5)) == datetime.datetime(2024, 3, 5)
    assert DateParameter().normalize("2024-03-05") == datetime.date(2024, 3, 5)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024", date_interval.Year(2024)),
        ("2024-03", date_interval.Month(2024, 3)),
        ("2024-W10", date_interval.Week(2024, 10)),
        ("2024-03-05", date_interval.Date(2024, 3, 5)),
        (
            "2024-03-01-2024-03-15",
            date_interval.Custom(datetime.date(2024, 3, 1), datetime.date(2024, 3, 15)),
        ),
    ],
)
def test_date_interval_parameter_tries_each_kind_of_interval(text, expected):
    param = DateIntervalParameter()
    value = param.parse(text)
    assert value == expected
    assert param.serialize(value) == text


def test_date_interval_parameter_rejects_unknown_forms_listing_the_accepted_ones():
    with pytest.raises(ValueError, match=r"'March' is not a valid date interval \(expected YYYY, YYYY-MM"):
        DateIntervalParameter().parse("March")


def test_date_interval_parameter_rejects_impossible_dates():
    with pytest.raises(ValueError, match="'2024-02-30' is not a valid date"):
        DateIntervalParameter().parse("2024-02-30")


def test_date_interval_parameter_enumerates_to_the_next_interval():
    assert DateIntervalParameter().next_in_enumeration(date_interval.Month(2024, 12)) == date_interval.Month(
        2025, 1
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90", datetime.timedelta(seconds=90)),
        ("1.5", datetime.timedelta(seconds=1.5)),
        ("P2W", datetime.timedelta(weeks=2)),
        ("P1DT2H3M4S", datetime.timedelta(days=1, hours=2, minutes=3, seconds=4)),
        ("PT30M", datetime.timedelta(minutes=30)),
        ("1 w 2 d 3 h 4 m 5 s", datetime.timedelta(weeks=1, days=2, hours=3, minutes=4, seconds=5)),
        ("2 days 3 hours", datetime.timedelta(days=2, hours=3)),
        (
            "1 week 1 day 1 hour 1 minute 1 second",
            datetime.timedelta(weeks=1, days=1, hours=1, minutes=1, seconds=1),
        ),
        ("5m", datetime.timedelta(minutes=5)),
    ],
)
def test_time_delta_parameter_accepts_seconds_iso_and_simple_forms(text, expected):
    assert TimeDeltaParameter().parse(text) == expected


@pytest.mark.parametrize("text", ["", "P", "PT", "soon", "5 ms", "1 d 2 w", "P1X"])
def test_time_delta_parameter_rejects_other_text_naming_it(text):
    with pytest.raises(ParameterException, match=rf"^Invalid time delta - could not parse {text}$"):
        TimeDeltaParameter().parse(text)


def test_time_delta_parameter_rejects_durations_too_large_for_timedelta():
    with pytest.raises(ParameterException, match="^Invalid time delta - could not parse 1e30$"):
        TimeDeltaParameter().parse("1e30")


def test_time_delta_parameter_serializes_in_the_simple_form():
    param = TimeDeltaParameter()
    value = datetime.timedelta(weeks=1, days=2, hours=3, minutes=4, seconds=5)
    assert param.serialize(value) == "1 w 2 d 3 h 4 m 5 s"
    assert param.serialize(datetime.timedelta(0)) == "0 w 0 d 0 h 0 m 0 s"


@given(st.timedeltas())
def test_time_delta_parameter_round_trips_every_timedelta(value):
    param = TimeDeltaParameter()
    assert param.parse(param.serialize(value)) == value


def test_time_delta_parameter_warns_on_values_that_are_not_timedeltas():
    param = TimeDeltaParameter()
    with pytest.warns(UserWarning, match='"wait" with value "5" is not of type timedelta'):
        param._warn_on_wrong_param_type("wait", 5)
