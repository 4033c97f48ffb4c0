"""Which instances the Range* tasks require: windows, limits, order, parameters, events, errors."""

from __future__ import annotations

import types
from datetime import date, datetime, timezone

import pytest

import luigi.tools.range as range_module
from luigi.cmdline_parser import CmdlineParser
from luigi.parameter import (
    DateHourParameter,
    DateMinuteParameter,
    DateParameter,
    IntParameter,
    MonthParameter,
    Parameter,
    ParameterException,
)
from luigi.task import Task
from luigi.task_register import TaskClassException
from luigi.tools.range import (
    RangeByMinutesBase,
    RangeDaily,
    RangeDailyBase,
    RangeEvent,
    RangeHourlyBase,
    RangeMonthly,
)


def epoch(*args: int) -> int:
    """Seconds since the epoch for a UTC wall-clock time, the unit of the ``now`` parameter."""
    return int(datetime(*args, tzinfo=timezone.utc).timestamp())


NOW = epoch(2024, 1, 10, 12, 30)


def tracked_task(parameter: Parameter, done: set | None = None, name: str = "Report") -> type[Task]:
    """A task class over one date-like parameter; an instance is complete when its value is in ``done``."""
    finished = done if done is not None else set()

    def complete(self: Task) -> bool:
        return self.when in finished

    return type(name, (Task,), {"when": parameter, "complete": complete, "__module__": __name__})


def required(range_task: Task) -> list:
    return [task.when for task in range_task.requires()]


def days(*numbers: int, month: int = 1) -> list[date]:
    return [date(2024, month, number) for number in numbers]


# -- daily windows ---------------------------------------------------------------------------------------


def test_daily_range_requires_every_day_from_start_up_to_and_including_today():
    report = tracked_task(DateParameter())
    assert required(RangeDailyBase(of=report, start=date(2024, 1, 5), now=NOW)) == days(5, 6, 7, 8, 9, 10)


def test_daily_range_stop_is_exclusive():
    report = tracked_task(DateParameter())
    assert required(
        RangeDailyBase(of=report, start=date(2024, 1, 5), stop=date(2024, 1, 8), now=NOW)
    ) == days(5, 6, 7)


def test_daily_range_skips_complete_days():
    report = tracked_task(DateParameter(), done={date(2024, 1, 6), date(2024, 1, 8)})
    assert required(RangeDailyBase(of=report, start=date(2024, 1, 5), now=NOW)) == days(5, 7, 9, 10)


def test_days_back_bounds_how_far_back_an_old_start_reaches():
    report = tracked_task(DateParameter())
    range_task = RangeDailyBase(of=report, start=date(2023, 1, 1), days_back=3, now=NOW)
    assert required(range_task) == days(8, 9, 10)


def test_days_forward_extends_the_window_past_today():
    report = tracked_task(DateParameter())
    range_task = RangeDailyBase(of=report, start=date(2024, 1, 9), days_forward=2, now=NOW)
    assert required(range_task) == days(9, 10, 11, 12)


def test_a_backfill_with_start_and_stop_in_the_future_of_the_window_requires_nothing():
    report = tracked_task(DateParameter())
    range_task = RangeDailyBase(of=report, start=date(2024, 2, 1), stop=date(2024, 2, 5), now=NOW)
    assert range_task.requires() == []
    assert range_task.complete()


def test_the_range_is_complete_once_every_required_instance_is():
    done: set = set()
    report = tracked_task(DateParameter(), done)
    range_task = RangeDailyBase(of=report, start=date(2024, 1, 9), now=NOW)
    assert not range_task.complete()
    done.update(days(9, 10))
    assert range_task.complete()


# -- limits and order ------------------------------------------------------------------------------------


def test_task_limit_requires_the_oldest_missing_days_first():
    report = tracked_task(DateParameter(), done={date(2024, 1, 2)})
    range_task = RangeDailyBase(of=report, start=date(2024, 1, 1), task_limit=3, now=NOW)
    assert required(range_task) == days(1, 3, 4)


def test_reverse_requires_the_newest_missing_days_newest_first():
    report = tracked_task(DateParameter(), done={date(2024, 1, 9)})
    range_task = RangeDailyBase(of=report, start=date(2024, 1, 1), task_limit=3, reverse=True, now=NOW)
    assert required(range_task) == days(10, 8, 7)


def test_reverse_with_only_a_stop_works_back_through_the_moving_window():
    report = tracked_task(DateParameter())
    range_task = RangeDailyBase(of=report, stop=date(2024, 1, 10), reverse=True, days_back=3, now=NOW)
    assert required(range_task) == days(9, 8)


def test_a_task_limit_of_zero_requires_nothing_in_either_direction():
    report = tracked_task(DateParameter())
    forward = RangeDailyBase(of=report, start=date(2024, 1, 1), task_limit=0, now=NOW)
    backward = RangeDailyBase(of=report, start=date(2024, 1, 1), task_limit=0, reverse=True, now=NOW)
    assert forward.requires() == []
    assert backward.requires() == []


# -- errors ----------------------------------------------------------------------------------------------


def test_neither_start_nor_stop_is_an_error():
    report = tracked_task(DateParameter())
    with pytest.raises(ParameterException, match="at least one of start and stop"):
        RangeDailyBase(of=report, now=NOW).requires()


def test_stop_without_start_needs_reverse():
    report = tracked_task(DateParameter())
    with pytest.raises(ParameterException, match="reverse needs to be True"):
        RangeDailyBase(of=report, stop=date(2024, 1, 5), now=NOW).requires()


def test_start_after_stop_is_an_error_naming_both():
    report = tracked_task(DateParameter())
    with pytest.raises(ParameterException, match=r"start > stop \(start=2024-01-05, stop=2024-01-01\)"):
        RangeDailyBase(of=report, start=date(2024, 1, 5), stop=date(2024, 1, 1), now=NOW).requires()


def test_a_negative_task_limit_is_an_error():
    report = tracked_task(DateParameter())
    with pytest.raises(ParameterException, match="task_limit=-1"):
        RangeDailyBase(of=report, start=date(2024, 1, 5), task_limit=-1, now=NOW).requires()


# -- other units -----------------------------------------------------------------------------------------


def test_hourly_range_requires_each_hour_including_the_current_one():
    hourly = tracked_task(DateHourParameter(), done={datetime(2024, 1, 10, 10)})
    range_task = RangeHourlyBase(of=hourly, start=datetime(2024, 1, 10, 8), now=NOW)
    assert required(range_task) == [datetime(2024, 1, 10, hour) for hour in (8, 9, 11, 12)]


def test_hours_back_bounds_the_hourly_window():
    hourly = tracked_task(DateHourParameter())
    range_task = RangeHourlyBase(of=hourly, start=datetime(2024, 1, 1), hours_back=2, now=NOW)
    assert required(range_task) == [datetime(2024, 1, 10, 11), datetime(2024, 1, 10, 12)]


def test_by_minutes_range_steps_by_minutes_interval_aligned_to_the_hour():
    minutely = tracked_task(DateMinuteParameter())
    range_task = RangeByMinutesBase(
        of=minutely, start=datetime(2024, 1, 10, 11, 50), minutes_interval=15, now=epoch(2024, 1, 10, 12, 31)
    )
    assert required(range_task) == [
        datetime(2024, 1, 10, 12, 0),
        datetime(2024, 1, 10, 12, 15),
        datetime(2024, 1, 10, 12, 30),
    ]


@pytest.mark.parametrize("interval", [0, 7, 60])
def test_a_minutes_interval_that_does_not_divide_an_hour_is_an_error(interval):
    minutely = tracked_task(DateMinuteParameter())
    range_task = RangeByMinutesBase(
        of=minutely, start=datetime(2024, 1, 10, 12), minutes_interval=interval, now=NOW
    )
    with pytest.raises(ParameterException, match=f"minutes_interval={interval}"):
        range_task.requires()


def test_monthly_range_stops_before_the_current_month():
    monthly = tracked_task(MonthParameter(), done={date(2023, 11, 1)})
    range_task = RangeMonthly(of=monthly, start=date(2023, 10, 1), now=epoch(2024, 2, 15))
    assert required(range_task) == [date(2023, 10, 1), date(2023, 12, 1), date(2024, 1, 1)]


def test_months_back_and_months_forward_move_the_monthly_window():
    monthly = tracked_task(MonthParameter())
    range_task = RangeMonthly(
        of=monthly, start=date(2020, 1, 1), months_back=2, months_forward=1, now=epoch(2024, 2, 15)
    )
    assert required(range_task) == [date(2023, 12, 1), date(2024, 1, 1), date(2024, 2, 1)]


def test_monthly_stop_is_exclusive():
    monthly = tracked_task(MonthParameter())
    range_task = RangeMonthly(
        of=monthly, start=date(2023, 10, 1), stop=date(2023, 12, 1), now=epoch(2024, 2, 15)
    )
    assert required(range_task) == [date(2023, 10, 1), date(2023, 11, 1)]


# -- parameters passed to `of` ---------------------------------------------------------------------------


class RegionalReport(Task):
    region = Parameter()
    day = DateParameter()
    copies = IntParameter(default=1)

    def complete(self):
        return False


def test_of_params_are_passed_to_every_instance():
    range_task = RangeDailyBase(
        of=RegionalReport, of_params={"region": "eu", "copies": 3}, start=date(2024, 1, 9), now=NOW
    )
    assert range_task.requires() == [
        RegionalReport(region="eu", day=date(2024, 1, 9), copies=3),
        RegionalReport(region="eu", day=date(2024, 1, 10), copies=3),
    ]


def test_of_params_given_as_text_are_parsed_by_the_receiving_parameter():
    range_task = RangeDailyBase(
        of=RegionalReport, of_params={"region": "eu", "copies": "3"}, start=date(2024, 1, 10), now=NOW
    )
    assert range_task.requires()[0].copies == 3


def test_the_ranged_parameter_defaults_to_the_first_positional_one_not_in_of_params():
    range_task = RangeDailyBase(
        of=RegionalReport, of_params={"region": "eu"}, start=date(2024, 1, 10), now=NOW
    )
    assert [task.day for task in range_task.requires()] == [date(2024, 1, 10)]


def test_param_name_selects_the_ranged_parameter():
    class TwoDates(Task):
        created = DateParameter(default=date(2000, 1, 1))
        reported = DateParameter()

        def complete(self):
            return False

    range_task = RangeDailyBase(of=TwoDates, param_name="reported", start=date(2024, 1, 10), now=NOW)
    assert range_task.requires() == [TwoDates(reported=date(2024, 1, 10))]


def test_an_of_params_key_that_of_lacks_is_an_error_listing_its_parameters():
    range_task = RangeDailyBase(
        of=RegionalReport, of_params={"colour": "red"}, start=date(2024, 1, 10), now=NOW
    )
    with pytest.raises(ParameterException, match=r"'colour'.*RegionalReport.*region, day, copies"):
        range_task.requires()


def test_a_param_name_that_of_lacks_is_an_error():
    range_task = RangeDailyBase(of=RegionalReport, param_name="date", start=date(2024, 1, 10), now=NOW)
    with pytest.raises(ParameterException, match="param_name='date' is not a parameter of RegionalReport"):
        range_task.requires()


# -- the clock -------------------------------------------------------------------------------------------


def test_now_defaults_to_the_time_the_range_task_was_created(monkeypatch):
    report = tracked_task(DateParameter())
    monkeypatch.setattr(range_module, "time", types.SimpleNamespace(time=lambda: float(NOW)))
    range_task = RangeDailyBase(of=report, start=date(2024, 1, 9))
    monkeypatch.setattr(range_module, "time", types.SimpleNamespace(time=lambda: float(epoch(2024, 3, 1))))
    assert required(range_task) == days(9, 10)


def test_an_unset_now_keeps_the_task_id_stable_across_runs(monkeypatch):
    report = tracked_task(DateParameter())
    monkeypatch.setattr(range_module, "time", types.SimpleNamespace(time=lambda: float(NOW)))
    first = RangeDaily(of=report, start=date(2024, 1, 9)).task_id
    monkeypatch.setattr(range_module, "time", types.SimpleNamespace(time=lambda: float(NOW + 86400)))
    assert RangeDaily(of=report, start=date(2024, 1, 9)).task_id == first


# -- events ----------------------------------------------------------------------------------------------


def record_range_events(range_cls: type[Task]) -> list[tuple[str, str, float]]:
    fired: list[tuple[str, str, float]] = []
    for event in (RangeEvent.COMPLETE_COUNT, RangeEvent.COMPLETE_FRACTION, RangeEvent.DELAY):
        range_cls.event_handler(event)(
            lambda family, value, event=event: fired.append((event, family, value))
        )
    return fired


@pytest.fixture
def restore_event_handlers():
    saved = {
        cls: {event: set(cbs) for event, cbs in events.items()}
        for cls, events in Task._event_callbacks.items()
    }
    yield
    Task._event_callbacks.clear()
    Task._event_callbacks.update(saved)


def test_events_report_the_delay_and_complete_count_and_fraction_in_jobs(restore_event_handlers):
    report = tracked_task(DateParameter(), done={date(2024, 1, 9), date(2024, 1, 10)}, name="EventReport")
    fired = record_range_events(RangeDailyBase)
    RangeDailyBase(of=report, start=date(2024, 1, 7), now=NOW).requires()
    assert fired == [
        (RangeEvent.DELAY, "EventReport", 4),  # Jan 7 (the first missing day) to Jan 10: four jobs
        (RangeEvent.COMPLETE_COUNT, "EventReport", 2),
        (RangeEvent.COMPLETE_FRACTION, "EventReport", 0.5),
    ]


def test_the_event_window_reaches_back_to_start_beyond_the_moving_window(restore_event_handlers):
    report = tracked_task(DateParameter(), name="EventReport")
    fired = record_range_events(RangeDailyBase)
    # days_back=3 checks Jan 8, 9 and 10 only; the window counts every day from start, 2023-01-01.
    RangeDailyBase(of=report, start=date(2023, 1, 1), days_back=3, now=NOW).requires()
    assert fired == [
        (RangeEvent.DELAY, "EventReport", 3),
        (RangeEvent.COMPLETE_COUNT, "EventReport", 375 - 3),
        (RangeEvent.COMPLETE_FRACTION, "EventReport", (375 - 3) / 375),
    ]


def test_events_fire_once_per_range_task_however_often_requirements_are_asked_for(restore_event_handlers):
    report = tracked_task(DateParameter(), name="EventReport")
    fired = record_range_events(RangeDaily)
    range_task = RangeDaily(of=report, start=date(2024, 1, 9), now=NOW)
    range_task.requires()
    range_task.complete()
    range_task.deps()
    assert len(fired) == 3


def test_an_empty_range_reports_nothing_missing(restore_event_handlers):
    report = tracked_task(DateParameter(), name="EventReport")
    fired = record_range_events(RangeDailyBase)
    RangeDailyBase(of=report, start=date(2024, 2, 1), now=NOW).requires()
    assert fired == [
        (RangeEvent.DELAY, "EventReport", 0),
        (RangeEvent.COMPLETE_COUNT, "EventReport", 0),
        (RangeEvent.COMPLETE_FRACTION, "EventReport", 1),
    ]


def test_range_event_names_are_luigis():
    assert RangeEvent.COMPLETE_COUNT == "event.tools.range.complete.count"
    assert RangeEvent.COMPLETE_FRACTION == "event.tools.range.complete.fraction"
    assert RangeEvent.DELAY == "event.tools.range.delay"


# -- subclassing -----------------------------------------------------------------------------------------


def test_a_subclass_overriding_missing_datetimes_in_the_old_two_argument_form_still_works():
    report = tracked_task(DateParameter())

    class OldStyleRange(RangeDailyBase):
        def missing_datetimes(self, task_cls, finite_datetimes):
            assert task_cls is report
            return finite_datetimes[:1]

    with pytest.warns(DeprecationWarning, match="missing_datetimes"):
        assert required(OldStyleRange(of=report, start=date(2024, 1, 8), now=NOW)) == days(8)


# -- the command line ------------------------------------------------------------------------------------


def test_the_command_line_names_of_by_family_and_passes_of_params_as_json():
    args = ["RangeDaily", "--of", "RegionalReport", "--of-params", '{"region": "eu", "copies": "2"}',
            "--start", "2024-01-09", "--now", str(NOW)]  # fmt: skip
    with CmdlineParser.global_instance(args) as parser:
        range_task = parser.get_task_obj()
    assert range_task.of is RegionalReport
    assert range_task.requires() == [
        RegionalReport(region="eu", day=date(2024, 1, 9), copies=2),
        RegionalReport(region="eu", day=date(2024, 1, 10), copies=2),
    ]


# -- ids, names and formats shared with Luigi (LUIGI_COMPAT j.10) -----------------------------------------


class D(Task):
    when = DateParameter()


def test_a_range_task_id_is_luigis_with_param_name_serialised_as_none():
    range_task = RangeDailyBase(of=D, start=date(2021, 6, 7))
    assert range_task.task_id == "RangeDailyBase_100_0_None_1bcf7c6183"
    assert "param_name=None" in repr(range_task)
    assert range_task.to_str_params()["param_name"] == "None"
    assert type(RangeDailyBase.param_name) is Parameter
    assert RangeDailyBase.param_name.positional is False


def test_there_is_no_range_monthly_base_family_and_range_monthly_is_a_range_base():
    assert not hasattr(range_module, "RangeMonthlyBase")
    assert RangeMonthly.__bases__ == (range_module.RangeBase,)
    with pytest.raises(TaskClassException, match="No task RangeMonthlyBase"):
        with CmdlineParser.global_instance(["RangeMonthlyBase", "--of", "D"]):
            pass


def test_format_range_writes_the_first_and_last_point_in_the_of_parameters_format():
    daily = RangeDailyBase(of=D, start=date(2020, 3, 4))
    assert daily._format_range([datetime(2020, 3, 4), datetime(2020, 3, 9)]) == "[2020-03-04, 2020-03-09]"
    hourly_task = tracked_task(DateHourParameter(), name="H")
    hourly = RangeHourlyBase(of=hourly_task, start=datetime(2020, 3, 4, 5))
    assert hourly._format_range([datetime(2020, 3, 4, 5), datetime(2020, 3, 5, 6)]) == (
        "[2020-03-04T05, 2020-03-05T06]"
    )
    monthly_task = tracked_task(MonthParameter(), name="M")
    monthly = RangeMonthly(of=monthly_task, start=date(2020, 3, 1))
    assert monthly._format_range([datetime(2020, 3, 1), datetime(2021, 7, 1)]) == "[2020-03, 2021-07]"
