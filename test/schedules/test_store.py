"""The schedules' SQLite file: a slot is claimed once, the watermark never goes back, a killed luigid's
open runs become lost, old runs are pruned, and a file from a newer luigi is refused."""

from __future__ import annotations

import sqlite3

import pytest

from luigi.database import StorageError
from luigi.schedules.store import RunKind, RunOutcome, ScheduleStore, StoredSchedule


@pytest.fixture
def store(tmp_path):
    opened = ScheduleStore(tmp_path / "state.schedules" / "schedules.sqlite")
    opened.open()
    opened.save_schedule("tick", StoredSchedule(paused=False, watermark=1000.0))
    yield opened
    opened.close()


def reopen(store: ScheduleStore) -> ScheduleStore:
    store.close()
    again = ScheduleStore(store.path)
    again.open()
    return again


def test_a_slot_is_claimed_once_even_after_reopening(store):
    first = store.claim("tick", RunKind.SLOT, 1002.0, 1002.0, now=1002.1)
    assert first is not None
    store = reopen(store)
    assert store.claim("tick", RunKind.SLOT, 1002.0, 1002.0, now=1003.0) is None
    assert store.schedule("tick") == StoredSchedule(False, 1002.0)
    assert [run.id for run in store.last_runs("tick", 10)] == [first]
    store.close()


def test_run_now_runs_have_no_slot_and_do_not_move_the_watermark(store):
    one = store.claim("tick", RunKind.MANUAL, None, 1500.0, now=1500.0)
    two = store.claim("tick", RunKind.MANUAL, None, 1501.0, now=1501.0)
    assert one != two
    assert store.schedule("tick").watermark == 1000.0


def test_the_watermark_never_moves_back(store):
    store.move_watermark("tick", 1010.0)
    store.move_watermark("tick", 1004.0)
    store.record_unrun("tick", RunOutcome.SKIPPED, [1006.0], now=1006.0, note="late")
    assert store.schedule("tick").watermark == 1010.0


def test_a_run_goes_from_starting_to_running_to_ended(store):
    run_id = store.claim("tick", RunKind.SLOT, 1002.0, 1002.0, now=1002.0)
    store.mark_started(run_id, pid=4242, started=1002.1)
    assert store.run("tick", run_id).outcome == RunOutcome.RUNNING.value
    store.finish(run_id, RunOutcome.ENDED, 1003.0, exit_code=4, meaning="unhandled_exception", log_bytes=10)
    run = store.run("tick", run_id)
    assert (run.outcome, run.exit_code, run.meaning, run.pid) == ("ended", 4, "unhandled_exception", 4242)
    assert store.run("other", run_id) is None


def test_runs_a_killed_luigid_left_open_become_lost(store):
    starting = store.claim("tick", RunKind.SLOT, 1002.0, 1002.0, now=1002.0)
    running = store.claim("tick", RunKind.SLOT, 1004.0, 1004.0, now=1004.0)
    store.mark_started(running, pid=1, started=1004.0)
    done = store.claim("tick", RunKind.SLOT, 1006.0, 1006.0, now=1006.0)
    store.finish(done, RunOutcome.ENDED, 1007.0, exit_code=0)
    store = reopen(store)
    assert sorted(store.lose_unfinished(now=2000.0)) == [starting, running]
    assert store.run("tick", running).outcome == RunOutcome.LOST.value
    assert store.run("tick", done).outcome == RunOutcome.ENDED.value
    store.close()


def test_pruning_keeps_the_newest_runs(store):
    ids = [store.claim("tick", RunKind.SLOT, 1000.0 + 2 * n, 0.0, now=0.0) for n in range(1, 8)]
    assert store.prune("tick", keep=3) == ids[:4]
    assert [run.id for run in store.last_runs("tick", 10)] == ids[:3:-1]
    assert store.run_count("tick") == 3


def test_a_file_written_by_a_newer_luigi_is_refused_unchanged(store):
    path = store.path
    store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    newer = ScheduleStore(path)
    with pytest.raises(StorageError, match="schema version 99.*Upgrade luigi"):
        newer.open()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta").fetchall() == [("99",)]


def test_a_directory_that_cannot_be_created_is_a_storage_error_naming_it(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    store = ScheduleStore(blocker / "sub" / "schedules.sqlite")
    with pytest.raises(StorageError, match="Cannot open the schedules' state .*schedules.sqlite"):
        store.open()


# The layout luigi wrote before deadlines (schema version 1), as it was.
VERSION_1 = """
CREATE TABLE meta ("key" VARCHAR NOT NULL, value TEXT NOT NULL, PRIMARY KEY ("key"));
CREATE TABLE schedules (
    name VARCHAR NOT NULL, paused BOOLEAN NOT NULL, watermark DOUBLE NOT NULL, PRIMARY KEY (name));
CREATE TABLE runs (
    id INTEGER NOT NULL, schedule VARCHAR NOT NULL, kind VARCHAR NOT NULL, slot DOUBLE,
    scheduled_time DOUBLE NOT NULL, outcome VARCHAR NOT NULL, claimed DOUBLE NOT NULL, started DOUBLE,
    ended DOUBLE, pid INTEGER, exit_code INTEGER, meaning TEXT, log_bytes INTEGER, note TEXT,
    PRIMARY KEY (id), CONSTRAINT one_run_per_slot UNIQUE (schedule, slot));
INSERT INTO meta VALUES ('schema_version', '1');
INSERT INTO schedules VALUES ('tick', 0, 1002.0);
INSERT INTO runs (schedule, kind, slot, scheduled_time, outcome, claimed, started, ended, exit_code)
    VALUES ('tick', 'slot', 1002.0, 1002.0, 'ended', 1002.0, 1002.1, 1003.0, 0);
"""


def test_a_file_from_before_deadlines_is_upgraded_in_place_keeping_its_runs(tmp_path):
    path = tmp_path / "schedules.sqlite"
    with sqlite3.connect(path) as conn:
        conn.executescript(VERSION_1)
    store = ScheduleStore(path)
    store.open()
    (old,) = store.last_runs("tick", 10)
    assert (old.outcome, old.deadline, old.late, old.as_json()["deadline"]) == ("ended", None, None, None)
    assert store.late_totals() == {"tick": 0}
    assert store.undecided() == []
    late = store.claim("tick", RunKind.SLOT, 1004.0, 1004.0, now=1004.0, deadline=1.0)
    assert store.record_verdict(late, True)
    assert store.late_totals() == {"tick": 1}
    store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchall() == [("2",)]


def test_a_verdict_is_recorded_once_and_the_late_count_outlives_pruning(store):
    late = store.claim("tick", RunKind.SLOT, 1002.0, 1002.0, now=1002.0, deadline=5.0)
    store.mark_started(late, pid=1, started=1002.5)
    on_time = store.claim("tick", RunKind.MANUAL, None, 1003.0, now=1003.0, deadline=5.0)
    plain = store.claim("tick", RunKind.SLOT, 1004.0, 1004.0, now=1004.0)
    assert [run.id for run in store.undecided()] == [late, on_time]
    assert store.run("tick", late).due == 1007.5
    assert store.record_verdict(late, True) is True
    assert store.record_verdict(late, False) is False  # decided already: kept, not counted twice
    assert store.record_verdict(on_time, False) is True
    assert [run.id for run in store.undecided()] == []
    assert [run.id for run in store.unalerted()] == [late]
    store.mark_alerted(late, 1008.0)
    store = reopen(store)
    assert store.unalerted() == []
    assert (store.run("tick", late).late, store.run("tick", on_time).late, store.run("tick", plain).late) == (
        True,
        False,
        None,
    )
    store.prune("tick", keep=1)
    assert store.late_totals() == {"tick": 1}
    store.close()
