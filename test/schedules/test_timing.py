"""Which slot is due, what is skipped, what a restart catches up: the pure decisions, on times passed in."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from luigi.schedules.timing import (
    CronCadence,
    Decision,
    EveryCadence,
    Missed,
    ScheduleView,
    Startup,
    count_between,
    decide,
    on_startup,
    slots_between,
)

BERLIN = ZoneInfo("Europe/Berlin")
EVERY_2S = EveryCadence(2.0, "2s")


def at(text: str, zone: ZoneInfo = BERLIN) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=zone).timestamp()


def test_every_slots_are_whole_multiples_of_the_period_since_the_epoch():
    assert EVERY_2S.next_after(1001.0) == 1002.0
    assert EVERY_2S.next_after(1002.0) == 1004.0  # strictly after
    assert EVERY_2S.last_at_or_before(1003.9) == 1002.0
    assert slots_between(EVERY_2S, 1000.0, 1007.0, limit=10) == [1002.0, 1004.0, 1006.0]
    assert EveryCadence(3600.0, "1h").next_after(at("2024-05-01T10:20:00", ZoneInfo("UTC"))) == at(
        "2024-05-01T11:00:00", ZoneInfo("UTC")
    )


def test_cron_slots_follow_the_timezone_across_a_daylight_saving_change():
    six_am = CronCadence("0 6 * * *", BERLIN)
    # Berlin moves its clocks forward on 2024-03-31: 06:00 stays 06:00 local, one hour less in UTC.
    slots = slots_between(six_am, at("2024-03-30T07:00:00"), at("2024-04-01T07:00:00"), limit=10)
    assert slots == [at("2024-03-31T06:00:00"), at("2024-04-01T06:00:00")]
    assert slots[1] - slots[0] == 86400.0
    assert six_am.last_at_or_before(at("2024-04-01T06:00:00")) == at("2024-04-01T06:00:00")
    assert six_am.last_at_or_before(at("2024-04-01T05:59:59")) == at("2024-03-31T06:00:00")


def test_counting_slots_matches_listing_them():
    cron = CronCadence("*/5 * * * *", ZoneInfo("UTC"))
    assert count_between(cron, 0.0, 3600.0) == len(slots_between(cron, 0.0, 3600.0, 100)) == 12
    assert count_between(EVERY_2S, 1000.0, 1007.0) == 3
    assert count_between(EVERY_2S, 1000.0, 1000.5) == 0


def test_nothing_is_due_before_the_next_slot():
    assert decide(EVERY_2S, ScheduleView(watermark=1000.0), now=1001.9) == Decision()


def test_the_due_slot_starts_when_nothing_runs():
    decision = decide(EVERY_2S, ScheduleView(watermark=1000.0), now=1002.01)
    assert decision == Decision(start=1002.0)
    assert decision.watermark == 1002.0


def test_a_slot_that_comes_while_a_run_is_going_is_skipped_not_started():
    decision = decide(EVERY_2S, ScheduleView(watermark=1002.0, running=True), now=1004.2)
    assert decision == Decision(skip=(1004.0,))
    assert decision.watermark == 1004.0


def test_several_due_slots_start_the_oldest_and_skip_the_rest():
    decision = decide(EVERY_2S, ScheduleView(watermark=1000.0), now=1006.5)
    assert decision == Decision(start=1002.0, skip=(1004.0, 1006.0))
    assert decision.watermark == 1006.0


def test_a_paused_schedule_lets_its_slots_pass_unrecorded():
    decision = decide(EVERY_2S, ScheduleView(watermark=1000.0, paused=True), now=1007.0)
    assert decision == Decision(passed=1006.0)
    assert decision.watermark == 1006.0


def test_catching_up_runs_the_missed_slots_one_at_a_time_oldest_first():
    view = ScheduleView(watermark=1000.0, catching_up=True)
    assert decide(EVERY_2S, view, now=1007.0) == Decision(start=1002.0, catching_up=True)
    running = ScheduleView(watermark=1002.0, running=True, catching_up=True)
    assert decide(EVERY_2S, running, now=1007.0) == Decision(catching_up=True)  # waits, skips nothing
    last = ScheduleView(watermark=1006.0, running=True, catching_up=True)
    assert decide(EVERY_2S, last, now=1007.0) == Decision(catching_up=True)
    drained = ScheduleView(watermark=1006.0, catching_up=True)
    assert decide(EVERY_2S, drained, now=1007.0) == Decision(catching_up=False)


def test_a_new_schedule_starts_from_now_and_misses_nothing():
    assert on_startup(EVERY_2S, None, started_at=1005.0, catchup=True) == Startup(1005.0)


def test_a_restart_between_two_slots_misses_nothing():
    assert on_startup(EVERY_2S, 1004.0, started_at=1005.5, catchup=False) == Startup(1004.0)


def test_without_catchup_the_slots_missed_while_down_are_passed_over_as_one_stretch():
    startup = on_startup(EVERY_2S, 1000.0, started_at=1009.0, catchup=False)
    assert startup == Startup(1008.0, missed=Missed(count=4, first=1002.0, last=1008.0))


def test_with_catchup_the_slots_missed_while_down_are_queued():
    startup = on_startup(EVERY_2S, 1000.0, started_at=1009.0, catchup=True)
    assert startup == Startup(1000.0, catching_up=True)
    assert decide(EVERY_2S, ScheduleView(startup.watermark, catching_up=True), 1009.0).start == 1002.0
