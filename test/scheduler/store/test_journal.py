"""The write journal of a SQLite state file: flushes are journaled, folded in later, and replayed at start."""

from __future__ import annotations

import errno
import json
import logging
import math
import os
import re
import selectors
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from luigi.scheduler import ManualClock, Scheduler, SchedulerConfig
from luigi.scheduler.model.records import TaskRecord, WorkerRecord
from luigi.scheduler.settings import TaskRetryPolicy
from luigi.scheduler.store import CorruptStateError, SqlStore, StateStoreError, codec
from luigi.scheduler.store import journal as journal_module
from luigi.scheduler.store import sql as sql_module
from luigi.scheduler.store.journal import ANSWER_SLICE_KEYS, Journal
from luigi.scheduler.store.rows import RowChanges

START = 1_000_000.0
WORKER = "w1"
POLICY = TaskRetryPolicy(retry_count=3, disable_hard_timeout=999999999, disable_window=3600)


@pytest.fixture
def state_file(tmp_path: Path) -> Path:
    return tmp_path / "state.sqlite"


@pytest.fixture
def journal_file(state_file: Path) -> Path:
    return Path(f"{state_file}.journal")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


def open_scheduler(state_file: Path, clock: ManualClock, **options) -> Scheduler:
    """What luigid does at start: a scheduler on the SQLite file, loaded."""
    sch = Scheduler(SchedulerConfig(**options), clock=clock, store=SqlStore.for_file(state_file))
    sch.load()
    return sch


def statuses(sch: Scheduler) -> dict[str, str]:
    return {task_id: task["status"] for task_id, task in sch.task_list("", limit=False).items()}


def stored_task_ids(state_file: Path) -> set[str]:
    """The task rows the SQLite file holds, read by another connection."""
    conn = sqlite3.connect(state_file)
    try:
        return {task_id for (task_id,) in conn.execute("SELECT id FROM tasks")}
    finally:
        conn.close()


def corrupt_copies(path: Path) -> list[Path]:
    return sorted(path.parent.glob(f"{path.name}.corrupt-*"))


def task_values(task_id: str, status: str = "PENDING", seq: int = 0, **fields) -> tuple:
    """What a flush journals for a task: its field values, then its ``seq``."""
    task = TaskRecord(id=task_id, status=status, created=START, updated=START, retry_policy=POLICY)
    for name, value in fields.items():
        setattr(task, name, value)
    return (*codec.task_values(task), seq)


def worker_values(worker_id: str, seq: int = 0) -> tuple:
    return (*codec.worker_values(WorkerRecord(id=worker_id, started=START, last_active=START)), seq)


# -- RowChanges: what one journal line holds ------------------------------------------------------------


def test_merged_changes_keep_the_later_values_of_each_key_in_the_order_keys_first_appeared():
    merged = RowChanges(tasks={"A": task_values("A"), "B": task_values("B")})
    merged.merge(RowChanges(tasks={"C": task_values("C"), "A": task_values("A", "DONE")}))

    assert list(merged.tasks) == ["A", "B", "C"]
    assert merged.tasks["A"] == task_values("A", "DONE")
    assert len(merged) == 3


def test_a_deletion_wins_over_earlier_values_and_later_values_over_a_deletion():
    merged = RowChanges(tasks={"A": task_values("A"), "B": None}, workers={"w": worker_values("w")})
    merged.merge(RowChanges(tasks={"A": None, "B": task_values("B")}, workers={"w": None}))

    assert merged.tasks == {"A": None, "B": task_values("B")}
    assert merged.workers == {"w": None}


def test_a_workers_batchers_are_replaced_whole_and_pause_keeps_its_last_change():
    one = {"worker": "w", "family": "F", "batched_args": '["a"]', "max_batch_size": "2"}
    two = {"worker": "w", "family": "G", "batched_args": '["b"]', "max_batch_size": "3"}
    merged = RowChanges(batchers={"w": [one, two], "x": []}, paused=True)
    merged.merge(RowChanges(batchers={"w": [two]}))
    assert merged.batchers == {"w": [two], "x": []}
    assert merged.paused is True
    merged.merge(RowChanges(paused=False))
    assert merged.paused is False
    assert len(merged) == 3  # two workers' batchers and the pause flag


def test_journaled_values_make_the_same_rows_as_the_record_itself():
    values = task_values(
        "Tâche\n1",
        seq=7,
        deps={"b", "a"},
        workers={"w2": None, "w1": None},
        params={"n": 1, "xs": (1, 2)},
        expl='"quoted"',
        failure_times=[1.5, 2.5],
        retry=math.inf,
    )
    read_back = RowChanges.from_json(RowChanges(tasks={"Tâche\n1": values}).to_json())
    expected = {**codec.task_row_of(values), "seq": 7}
    assert (
        read_back.task_rows() == RowChanges(tasks={"Tâche\n1": values}).task_rows() == {"Tâche\n1": expected}
    )
    assert expected["deps"] == '["a","b"]' and expected["workers"] == '["w2","w1"]'


def test_changes_survive_their_journal_line_including_non_finite_floats_and_unicode():
    changes = RowChanges(
        tasks={"Tâche\n1": task_values("Tâche\n1", created=math.inf, updated=-math.inf), "gone": None},
        workers={"w": worker_values("w", seq=3)},
        resources={"db": {"name": "db", "seq": 0, "amount": "2"}},
        batchers={"w": []},
        paused=False,
    )
    line = changes.to_json()

    assert "\n" not in line
    read_back = RowChanges.from_json(line)
    assert read_back.task_rows() == changes.task_rows() and read_back.worker_rows() == changes.worker_rows()
    assert (read_back.resources, read_back.batchers, read_back.paused) == (
        changes.resources,
        {"w": []},
        False,
    )
    nan_line = RowChanges(tasks={"N": task_values("N", retry=math.nan)}).to_json()
    assert math.isnan(RowChanges.from_json(nan_line).task_rows()["N"]["retry"])


@pytest.mark.parametrize(
    "line, problem",
    [
        ('{"v": 1, "tasks": {', "not JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"v": 3}', "format version 3, expected at most 2"),
        ('{"v": 1, "runs": []}', "runs in a line of format version 1"),
        ('{"v": 2, "runs": {}}', "runs is {}, expected a list of runs"),
        ('{"v": 2, "runs": [{"ids": ["A"]}]}', "expected an object of values and ids"),
        ('{"v": 2, "runs": [{"values": [1], "ids": [], "first_seq": 0}]}', "expected a list of task ids"),
        ('{"v": 2, "runs": [{"values": [1], "ids": ["A"]}]}', "expected first_seq or a list of seqs"),
        ('{"v": 2, "runs": [{"values": [1], "ids": ["A"], "seqs": [1, 2]}]}', "has 1 ids and 2 seqs"),
        ('{"v": 2, "runs": [{"values": [1], "ids": ["A"], "first_seq": 0}]}', "expected a list of 36 values"),
        ('{"v": 1, "extra": {}}', "unknown entries ['extra']"),
        ('{"v": 1, "tasks": []}', "tasks is [], expected an object of value lists"),
        (
            '{"v": 1, "tasks": {"A": {"id": "A"}}}',
            "tasks row 'A' is {'id': 'A'}, expected a list of 36 values",
        ),
        ('{"v": 1, "workers": {"w": [1]}}', "workers row 'w' is [1], expected a list of 9 values"),
        ('{"v": 1, "batchers": {"w": {}}}', "batchers of 'w' are {}, expected a list of rows"),
        ('{"v": 1, "paused": "yes"}', "paused is 'yes', expected true, false or null"),
    ],
)
def test_a_journal_line_of_the_wrong_shape_is_refused_naming_the_problem(line, problem):
    with pytest.raises(CorruptStateError) as caught:
        RowChanges.from_json(line)
    assert problem in str(caught.value)


@pytest.mark.parametrize(
    "change, problem",
    [
        ({"status": "RESTING"}, "tasks row 'A' column status: got 'RESTING'"),
        ({"status": None}, "tasks row 'A' column status is None"),
        ({"id": "B"}, "tasks row 'A' has id 'B'"),
        ({"deps": 3}, "tasks row 'A': "),
        ({"created": "yesterday"}, "tasks row 'A' column created"),
    ],
)
def test_a_journaled_task_that_would_not_load_is_refused_naming_the_row_and_column(change, problem):
    task = TaskRecord(id="A", status="PENDING", created=START, updated=START, retry_policy=POLICY)
    values = dict(zip([name for name, _ in codec.TASK_FIELDS], codec.task_values(task), strict=True))
    values.update(change)
    line = RowChanges(tasks={"A": (*values.values(), 0)}).to_json()
    with pytest.raises(CorruptStateError, match=re.escape(problem)):
        RowChanges.from_json(line)


# -- the journal file -----------------------------------------------------------------------------------


def test_a_journal_reads_back_its_whole_lines_and_is_emptied_by_clear(tmp_path):
    journal = Journal(tmp_path / "j")
    assert journal.read() == []  # not created until the first append
    journal.append('{"a": 1}')
    journal.append('{"b": "x"}')
    assert journal.read() == ['{"a": 1}', '{"b": "x"}']
    journal.clear()
    assert journal.read() == []
    journal.append("after")
    journal.close()
    assert (tmp_path / "j").read_bytes() == b"after\n"


def test_an_append_cut_short_by_a_full_disk_leaves_no_partial_line(tmp_path, monkeypatch):
    journal = Journal(tmp_path / "j")
    journal.append("first")
    real_write = os.write

    def half_then_full(fd, data):
        if len(data) > 4:
            return real_write(fd, bytes(data[:4]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(journal_module.os, "write", half_then_full)
    with pytest.raises(StateStoreError, match=r"Cannot append to the scheduler journal .*No space left"):
        journal.append("second line")
    monkeypatch.setattr(journal_module.os, "write", real_write)

    assert (tmp_path / "j").read_bytes() == b"first\n"
    journal.append("third")
    assert journal.read() == ["first", "third"]
    journal.close()


# -- flushes are journaled and replayed -------------------------------------------------------------------


def test_flushed_changes_wait_in_the_journal_and_a_new_store_on_the_file_replays_them(
    state_file, journal_file, clock
):
    before = open_scheduler(state_file, clock, resources={"db": 1})
    before.add_task(worker=WORKER, task_id="A", family="A")
    before.add_task(worker=WORKER, task_id="B", family="B")
    before.flush()
    assert before.get_work(worker=WORKER)["task_id"] in ("A", "B")
    before.add_task(worker=WORKER, task_id="Gone")
    before.flush()
    before.add_task_batcher(worker=WORKER, task_family="A", batched_args=["n"], max_batch_size=math.inf)
    before.update_resource("db", 3)
    before.pause()
    before.add_task(worker="w2", task_id="C")
    before.disable_worker(worker="w2")
    before.flush()
    assert stored_task_ids(state_file) == set()  # nothing folded yet: the journal holds it all
    assert len(journal_file.read_text().splitlines()) == 3

    after = open_scheduler(state_file, clock, resources={"db": 1})  # `before` is left open, as after kill -9

    assert statuses(after) == statuses(before)
    assert after.task_list("RUNNING") == before.task_list("RUNNING")
    assert after.is_paused() == {"paused": True}
    assert {r["name"]: r["num_total"] for r in after.resource_list()} == {"db": 3}
    assert after.get_work(worker="w2")["worker_state"] == "disabled"
    assert after._state.batchers == {WORKER: {"A": (["n"], math.inf)}}
    assert journal_file.read_bytes() == b""
    assert stored_task_ids(state_file) == {"A", "B", "Gone", "C"}


def test_a_task_removed_after_it_was_journaled_is_gone_after_the_replay(state_file, clock):
    before = open_scheduler(state_file, clock, worker_disconnect_delay=60, remove_delay=100)
    before.add_task(worker=WORKER, task_id="A")
    before.add_task(worker="w2", task_id="B")
    before.flush()
    before.checkpoint()  # A and B are in the file
    clock.advance(61)
    before.ping(worker="w2")
    before.prune()
    clock.advance(101)
    before.ping(worker="w2")
    before.prune()
    before.flush()
    assert "A" not in statuses(before)

    after = open_scheduler(state_file, clock)
    assert statuses(after) == {"B": "PENDING"}
    assert stored_task_ids(state_file) == {"B"}


def wait_for_line(stream, deadline_seconds: float = 60.0) -> str:
    """The child's next line of output, or an AssertionError once the deadline has passed."""
    selector = selectors.DefaultSelector()
    selector.register(stream, selectors.EVENT_READ)
    deadline = time.monotonic() + deadline_seconds
    received = b""
    try:
        while b"\n" not in received:
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                raise AssertionError(f"no line from the child within {deadline_seconds}s (got {received!r})")
            chunk = os.read(stream.fileno(), 4096)
            if not chunk:
                raise AssertionError(f"the child exited before writing a line (got {received!r})")
            received += chunk
    finally:
        selector.close()
    return received.decode().splitlines()[0]


def test_flushes_acknowledged_before_a_kill_9_are_all_there_after_a_restart(state_file, journal_file):
    child = textwrap.dedent(
        f"""
        import sys
        from luigi.scheduler import Scheduler, SchedulerConfig
        from luigi.scheduler.store import SqlStore
        sch = Scheduler(SchedulerConfig(), store=SqlStore.for_file({str(state_file)!r}))
        sch.load()
        for n in range(20):
            sch.add_task(worker="w1", task_id=f"T{{n}}")
            sch.flush()
        sch.get_work(worker="w1")
        sch.flush()
        sch.add_task(worker="w1", task_id="T19", status="DONE")
        sch.add_task(worker="w1", task_id="T18", status="FAILED", expl="boom")
        sch.flush()
        print("flushed", flush=True)
        sys.stdin.read()  # wait to be killed
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", child], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=Path.cwd()
    )
    try:
        assert proc.stdout is not None
        assert wait_for_line(proc.stdout) == "flushed"
        assert stored_task_ids(state_file) == set()  # everything is still in the journal
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()

    after = open_scheduler(state_file, ManualClock(START))
    found = statuses(after)
    running = [task_id for task_id, status in found.items() if status == "RUNNING"]
    assert found.pop("T19") == "DONE"
    assert found.pop("T18") == "FAILED"
    assert after.fetch_error("T18")["error"] == "boom"
    assert len(running) == 1 and sorted(found.values()) == ["PENDING"] * 17 + ["RUNNING"]
    assert journal_file.read_bytes() == b""


def test_a_last_line_cut_short_by_a_kill_is_ignored_with_a_warning(state_file, journal_file, clock, caplog):
    before = open_scheduler(state_file, clock)
    before.add_task(worker=WORKER, task_id="A")
    before.flush()
    line = RowChanges(tasks={"B": None}).to_json().encode()
    with journal_file.open("ab") as journal:
        journal.write(line[: len(line) // 2])

    with caplog.at_level(logging.WARNING, logger="luigi.scheduler"):
        after = open_scheduler(state_file, clock)

    assert statuses(after) == {"A": "PENDING"}
    assert str(journal_file) in caplog.text and "cut short" in caplog.text
    assert journal_file.read_bytes() == b""
    assert corrupt_copies(journal_file) == []


@pytest.mark.parametrize("bad_line", [b'{"v": 1, "tasks": {"X": 42}}', b"\xff\xfe not text"])
def test_a_damaged_journal_is_applied_up_to_the_damage_then_moved_aside(
    state_file, journal_file, clock, caplog, bad_line
):
    before = open_scheduler(state_file, clock)
    before.add_task(worker=WORKER, task_id="Folded")
    before.flush()
    before.checkpoint()
    before.add_task(worker=WORKER, task_id="B")
    before.flush()
    before.add_task(worker=WORKER, task_id="C")
    before.flush()
    first, second = journal_file.read_bytes().splitlines(keepends=True)
    damaged = first + bad_line + b"\n" + second
    journal_file.write_bytes(damaged)

    with caplog.at_level(logging.WARNING, logger="luigi.scheduler"):
        after = open_scheduler(state_file, clock)

    assert statuses(after) == {"Folded": "PENDING", "B": "PENDING"}  # C came after the damage
    [moved] = corrupt_copies(journal_file)
    assert moved.read_bytes() == damaged
    assert str(journal_file) in caplog.text and str(moved) in caplog.text and str(state_file) in caplog.text
    assert "line 2" in caplog.text
    after.add_task(worker=WORKER, task_id="D")
    after.flush()
    assert statuses(open_scheduler(state_file, clock)) == {
        "Folded": "PENDING",
        "B": "PENDING",
        "D": "PENDING",
    }


def test_a_damaged_database_is_moved_aside_with_its_journal(state_file, journal_file, clock, caplog):
    before = open_scheduler(state_file, clock)
    before.add_task(worker=WORKER, task_id="A")
    before.flush()
    before.close()
    before = open_scheduler(state_file, clock)
    before.add_task(worker=WORKER, task_id="B")
    before.flush()  # left open, as after kill -9
    journaled = journal_file.read_bytes()
    state_file.write_bytes(b"this is not a database\x00" * 100)

    with caplog.at_level(logging.WARNING, logger="luigi.scheduler"):
        after = open_scheduler(state_file, clock)

    assert statuses(after) == {}
    [moved] = [path for path in corrupt_copies(state_file) if re.search(r"\.corrupt-[0-9T]+$", path.name)]
    assert Path(f"{moved}.journal").read_bytes() == journaled
    assert str(moved) in caplog.text and "journal" in caplog.text
    assert not journal_file.exists() or journal_file.read_bytes() == b""


def test_a_journal_the_database_cannot_take_now_stops_the_start_and_keeps_both_files(
    state_file, journal_file, clock, monkeypatch
):
    before = open_scheduler(state_file, clock)
    before.add_task(worker=WORKER, task_id="A")
    before.flush()  # left open, as after kill -9
    journaled = journal_file.read_bytes()

    def locked(conn, write):
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(sql_module, "_in_sqlite_transaction", locked)
    with pytest.raises(StateStoreError, match=r"Cannot write the scheduler journal .*database is locked"):
        open_scheduler(state_file, clock)
    monkeypatch.undo()

    assert journal_file.read_bytes() == journaled
    assert corrupt_copies(state_file) == []
    assert statuses(open_scheduler(state_file, clock)) == {"A": "PENDING"}


def test_the_first_write_of_a_store_that_did_not_load_makes_the_journal_obsolete(
    state_file, journal_file, clock
):
    old = open_scheduler(state_file, clock)
    old.add_task(worker=WORKER, task_id="Old")
    old.flush()  # journaled, never folded
    assert journal_file.read_bytes() != b""

    fresh = Scheduler(SchedulerConfig(), clock=clock, store=SqlStore.for_file(state_file))
    fresh.add_task(worker=WORKER, task_id="New")
    fresh.flush()

    assert journal_file.read_bytes() == b""
    assert stored_task_ids(state_file) == {"New"}
    assert statuses(open_scheduler(state_file, clock)) == {"New": "PENDING"}


def test_a_journal_that_cannot_be_written_fails_the_flush_and_the_next_flush_writes_the_changes(
    state_file, journal_file, clock
):
    sch = open_scheduler(state_file, clock)
    journal_file.mkdir()  # nothing can be appended to a directory
    sch.add_task(worker=WORKER, task_id="A")
    with pytest.raises(
        StateStoreError, match=f"Cannot append to the scheduler journal {re.escape(str(journal_file))}"
    ):
        sch.flush()

    journal_file.rmdir()
    sch.flush()
    assert statuses(open_scheduler(state_file, clock)) == {"A": "PENDING"}


# -- folding ----------------------------------------------------------------------------------------------


def commit_counter(state_file: Path):
    """How many transactions others committed to the file since this was called (its data_version)."""
    observer = sqlite3.connect(state_file, isolation_level=None)
    start = observer.execute("PRAGMA data_version").fetchone()[0]
    return lambda: observer.execute("PRAGMA data_version").fetchone()[0] - start, observer


def test_a_checkpoint_writes_every_journaled_flush_in_one_transaction_and_empties_the_journal(
    state_file, journal_file, clock
):
    sch = open_scheduler(state_file, clock)
    commits, observer = commit_counter(state_file)
    for n in range(5):
        sch.add_task(worker=WORKER, task_id=f"T{n}")
        sch.flush()
    sch.add_task(worker=WORKER, task_id="T0", status="DONE")
    sch.flush()
    assert commits() == 0

    sch.checkpoint()
    assert commits() == 1
    assert journal_file.read_bytes() == b""
    status = dict(observer.execute("SELECT id, status FROM tasks"))
    assert status == {"T0": "DONE", "T1": "PENDING", "T2": "PENDING", "T3": "PENDING", "T4": "PENDING"}
    sch.checkpoint()
    assert commits() == 1  # nothing pending: nothing written
    observer.close()


def test_a_failed_fold_keeps_the_journal_and_a_later_fold_or_a_restart_writes_everything(
    state_file, journal_file, clock, caplog
):
    sch = open_scheduler(state_file, clock)
    sch.add_task(worker=WORKER, task_id="A")
    sch.flush()
    sch.checkpoint()
    outside = sqlite3.connect(state_file, isolation_level=None)
    outside.execute("ALTER TABLE tasks RENAME TO tasks_away")
    sch.add_task(worker=WORKER, task_id="B")
    sch.flush()
    journaled = journal_file.read_bytes()

    with caplog.at_level(logging.WARNING, logger="luigi.scheduler"):
        with pytest.raises(
            StateStoreError, match=rf"Cannot fold the scheduler journal {re.escape(str(journal_file))}"
        ):
            sch.checkpoint()
        sch.close()  # folds again, fails again: logged, not raised
    assert journal_file.read_bytes() == journaled
    assert caplog.text.count("Cannot fold") == 1  # raised once (its caller logs it), logged once at close

    outside.execute("ALTER TABLE tasks_away RENAME TO tasks")
    outside.close()
    assert statuses(open_scheduler(state_file, clock)) == {"A": "PENDING", "B": "PENDING"}


def test_a_fold_that_fails_once_succeeds_at_the_next_checkpoint(state_file, journal_file, clock):
    sch = open_scheduler(state_file, clock)
    outside = sqlite3.connect(state_file, isolation_level=None)
    outside.execute("ALTER TABLE workers RENAME TO workers_away")
    sch.add_task(worker=WORKER, task_id="A")
    sch.flush()
    with pytest.raises(StateStoreError, match="no such table: workers"):
        sch.checkpoint()
    sch.add_task(worker=WORKER, task_id="B")
    sch.flush()

    outside.execute("ALTER TABLE workers_away RENAME TO workers")
    outside.close()
    sch.checkpoint()
    assert stored_task_ids(state_file) == {"A", "B"}
    assert journal_file.read_bytes() == b""


def test_a_flush_that_brings_the_pending_changes_to_the_cap_folds_the_oldest_slice_itself(
    state_file, journal_file, clock, monkeypatch
):
    monkeypatch.setattr(journal_module, "PENDING_CAP", 50)
    monkeypatch.setattr(journal_module, "CAP_SLICE_KEYS", 10)
    sch = open_scheduler(state_file, clock)
    for n in range(48):  # with the worker's row: 49 keys
        sch.add_task(worker=WORKER, task_id=f"T{n}")
    sch.flush()
    assert stored_task_ids(state_file) == set()

    sch.add_task(worker=WORKER, task_id="T48")
    sch.flush()
    assert stored_task_ids(state_file) == {f"T{n}" for n in range(10)}
    assert journal_file.read_bytes() != b""  # 40 keys still wait in it
    assert set(statuses(open_scheduler(state_file, clock))) == {f"T{n}" for n in range(49)}


def test_a_flush_that_brings_the_journal_to_its_size_cap_folds_everything(
    state_file, journal_file, clock, monkeypatch
):
    monkeypatch.setattr(journal_module, "JOURNAL_BYTES_CAP", 100_000)
    sch = open_scheduler(state_file, clock)
    sch.add_task(worker=WORKER, task_id="A")
    sch.flush()
    while journal_file.stat().st_size + 2_000 < 100_000:  # one key changed again and again: a long file
        sch.set_task_status_message(task_id="A", status_message="x" * 1_000)
        sch.flush()
    assert stored_task_ids(state_file) == set()

    sch.set_task_status_message(task_id="A", status_message="last" * 1_000)
    sch.flush()
    assert stored_task_ids(state_file) == {"A"}
    assert journal_file.read_bytes() == b""
    assert statuses(open_scheduler(state_file, clock)) == {"A": "PENDING"}


def test_a_flush_changing_too_many_tasks_for_one_line_goes_straight_into_the_file_and_wins_over_the_journal(
    state_file, journal_file, clock, monkeypatch
):
    monkeypatch.setattr(sql_module, "DIRECT_WRITE_KEYS", 50)
    sch = open_scheduler(state_file, clock)
    sch.add_task(worker=WORKER, task_id="A", priority=1)
    sch.flush()
    assert journal_file.read_text().count("\n") == 1 and stored_task_ids(state_file) == set()

    # 60 tasks of their own (no run of equal ones) and a wrapper over them and A, A's priority raised.
    deps = ["A", *(f"D{i}" for i in range(60))]
    for n, task_id in enumerate(deps[1:]):
        sch.add_task(worker=WORKER, task_id=task_id, family="D", params={"n": str(n)})
    sch.add_task(worker=WORKER, task_id="Wrapper", deps=deps, priority=5)
    sch.flush()

    assert (
        journal_file.read_bytes() == b""
    )  # folded first, then the flush written in a transaction of its own
    assert stored_task_ids(state_file) == {"Wrapper", *deps}
    after = open_scheduler(state_file, clock)
    assert after._state.tasks["A"].priority == 5  # the journal's older row of A did not come back
    assert statuses(after) == statuses(sch)


def test_a_wrapper_naming_many_unknown_dependencies_journals_them_as_one_run_that_a_restart_loads(
    state_file, journal_file, clock, monkeypatch
):
    monkeypatch.setattr(sql_module, "DIRECT_WRITE_KEYS", 100)
    sch = open_scheduler(state_file, clock)
    deps = [f"Leaf_{n}" for n in range(500)]
    sch.add_task(worker=WORKER, task_id="Wide", deps=deps, priority=3)
    sch.flush()

    line = json.loads(journal_file.read_text().splitlines()[-1])
    assert [len(run["ids"]) for run in line["runs"]] == [500] and list(line["tasks"]) == ["Wide"]
    after = open_scheduler(state_file, clock)  # `sch` is left open, as after kill -9: a replay
    assert stored_task_ids(state_file) == {"Wide", *deps}
    assert statuses(after) == {"Wide": "PENDING", **dict.fromkeys(deps, "UNKNOWN")}
    assert after.task_list("UNKNOWN", "", limit=False) == sch.task_list("UNKNOWN", "", limit=False)
    assert list(after._state.tasks) == list(sch._state.tasks)  # the order of the records is kept


def test_a_later_change_of_a_task_in_a_journaled_run_wins_at_a_fold_and_at_a_replay(
    state_file, journal_file, clock, monkeypatch
):
    monkeypatch.setattr(sql_module, "DIRECT_WRITE_KEYS", 100)
    monkeypatch.setattr(journal_module, "PENDING_CAP", 10**9)  # nothing folded before the test asks
    deps = [f"Leaf_{n}" for n in range(300)]

    def wrapper_then_two_leaves(sch: Scheduler) -> list[str]:
        sch.add_task(worker=WORKER, task_id="Wide", deps=deps)
        sch.flush()
        run_ids = json.loads(journal_file.read_text().splitlines()[-1])["runs"][0]["ids"]
        sch.add_task(worker=WORKER, task_id=run_ids[-5], family="Leaf", params={"n": "5"})
        sch.add_task(worker=WORKER, task_id=run_ids[-50], family="Leaf", status="DONE")
        sch.flush()
        return run_ids

    sch = open_scheduler(state_file, clock)
    run_ids = wrapper_then_two_leaves(sch)
    sch.checkpoint(limit=100)  # 100 of the run (from its end), less the two whose newer rows are pending
    assert stored_task_ids(state_file) == set(run_ids[-100:]) - {run_ids[-5], run_ids[-50]}
    sch._store.close()  # folds the rest
    after = open_scheduler(state_file, clock)
    assert after.task_list("", "", limit=False) == sch.task_list("", "", limit=False)
    assert (statuses(after)[run_ids[-5]], statuses(after)[run_ids[-50]]) == ("PENDING", "DONE")

    # The same lines replayed at a start, before any fold (`sch` left open, as after kill -9).
    journal_file = journal_file.with_name("again.sqlite.journal")
    sch = open_scheduler(state_file.with_name("again.sqlite"), clock)
    run_ids = wrapper_then_two_leaves(sch)
    replayed = open_scheduler(state_file.with_name("again.sqlite"), clock)
    assert replayed.task_list("", "", limit=False) == sch.task_list("", "", limit=False)
    assert (statuses(replayed)[run_ids[-5]], statuses(replayed)[run_ids[-50]]) == ("PENDING", "DONE")


def test_the_same_wrapper_sent_again_after_a_client_timeout_makes_and_journals_nothing_more(
    state_file, journal_file, clock
):
    sch = open_scheduler(state_file, clock)
    deps = [f"Leaf_{n}" for n in range(20_000)]
    sch.add_task(worker=WORKER, task_id="Wide", deps=deps, runnable=False)
    sch.flush()
    journaled = journal_file.stat().st_size
    tasks = dict(sch._state.tasks)

    sch.add_task(worker=WORKER, task_id="Wide", deps=deps, runnable=False)  # the client's resend
    assert not sch._state.changes  # nothing to write: not even the wrapper's row of 20,000 ids
    sch.flush()
    assert journal_file.stat().st_size == journaled
    assert all(sch._state.tasks[task_id] is task for task_id, task in tasks.items())


def test_closing_folds_the_journal_and_a_store_without_a_file_has_no_journal(state_file, journal_file, clock):
    sch = open_scheduler(state_file, clock)
    sch.add_task(worker=WORKER, task_id="A")
    sch.close()
    assert stored_task_ids(state_file) == {"A"}
    assert journal_file.read_bytes() == b""
    assert SqlStore.for_file(state_file).journal_path == journal_file
    assert SqlStore("sqlite://").journal_path is None


def test_a_fold_due_only_waits_for_enough_pending_changes(state_file, journal_file, clock):
    sch = open_scheduler(state_file, clock)
    for n in range(ANSWER_SLICE_KEYS - 2):  # with the worker's row: one key short
        sch.add_task(worker=WORKER, task_id=f"T{n}")
        sch.flush()
    sch.checkpoint(due_only=True)
    assert journal_file.read_bytes() != b"" and stored_task_ids(state_file) == set()
    sch.add_task(worker=WORKER, task_id="Last")
    sch.flush()
    sch.checkpoint(due_only=True)
    assert journal_file.read_bytes() == b"" and len(stored_task_ids(state_file)) == ANSWER_SLICE_KEYS - 1


def test_a_fold_due_only_takes_a_short_slice_of_the_oldest_changes_from_a_backlog(
    state_file, journal_file, clock
):
    sch = open_scheduler(state_file, clock)
    for n in range(3 * ANSWER_SLICE_KEYS):
        sch.add_task(worker=WORKER, task_id=f"T{n}")
    sch.flush()
    sch.checkpoint(due_only=True)
    assert stored_task_ids(state_file) == {f"T{n}" for n in range(ANSWER_SLICE_KEYS)}
    assert journal_file.read_bytes() != b""


def test_a_limited_fold_writes_the_oldest_keys_and_empties_the_journal_only_once_none_is_left(
    state_file, journal_file, clock
):
    sch = open_scheduler(state_file, clock)
    for n in range(5):
        sch.add_task(worker=WORKER, task_id=f"T{n}")
    sch.flush()

    sch.checkpoint(limit=2)
    assert stored_task_ids(state_file) == {"T0", "T1"}
    sch.checkpoint(limit=2)
    assert stored_task_ids(state_file) == {"T0", "T1", "T2", "T3"}
    assert journal_file.read_bytes() != b""
    sch.checkpoint(limit=2)  # T4 and the worker's row: the last of them
    assert stored_task_ids(state_file) == {f"T{n}" for n in range(5)}
    assert journal_file.read_bytes() == b""


def test_keys_folded_in_slices_and_changed_again_are_replayed_to_their_last_values(
    state_file, journal_file, clock
):
    before = open_scheduler(state_file, clock)
    for n in range(4):
        before.add_task(worker=WORKER, task_id=f"T{n}", family="T", params={"n": str(n)})
    before.flush()
    before.checkpoint(limit=2)  # T0 and T1 are in the file as PENDING
    before.add_task(worker=WORKER, task_id="T0", status="DONE")
    before.add_task(worker=WORKER, task_id="T2", status="DONE")
    before.flush()
    before.checkpoint(limit=1)  # the oldest pending key, T2 (DONE), is in the file
    before.add_task(worker=WORKER, task_id="T2", status="FAILED", expl="again")
    before.flush()

    after = open_scheduler(state_file, clock)  # `before` is left open, as after kill -9
    assert statuses(after) == {"T0": "DONE", "T1": "PENDING", "T2": "FAILED", "T3": "PENDING"}
    assert statuses(after) == statuses(before)
    assert journal_file.read_bytes() == b""


def test_a_slice_that_cannot_be_written_stays_pending_in_its_place(state_file, journal_file, clock):
    sch = open_scheduler(state_file, clock)
    for n in range(4):
        sch.add_task(worker=WORKER, task_id=f"T{n}")
    sch.flush()
    outside = sqlite3.connect(state_file, isolation_level=None)
    outside.execute("ALTER TABLE tasks RENAME TO tasks_away")
    with pytest.raises(StateStoreError, match="no such table: tasks"):
        sch.checkpoint(limit=2)
    outside.execute("ALTER TABLE tasks_away RENAME TO tasks")
    outside.close()

    sch.checkpoint(limit=2)
    assert stored_task_ids(state_file) == {"T0", "T1"}
    sch.checkpoint()
    assert stored_task_ids(state_file) == {f"T{n}" for n in range(4)}
    assert journal_file.read_bytes() == b""


def test_a_journal_line_written_before_lost_lease_existed_is_replayed(state_file, journal_file, clock):
    before = open_scheduler(state_file, clock)
    before.add_task(worker=WORKER, task_id="A", family="A")
    before.flush()
    entry = json.loads(journal_file.read_text().splitlines()[0])
    values = entry["tasks"]["A"]
    del values[-3:-1]  # lost_lease and cancel_requested, the last fields before seq: what version 1 journaled
    json_line = json.dumps(entry)
    journal_file.write_text(json_line + "\n")

    after = open_scheduler(state_file, clock)
    assert statuses(after) == {"A": "PENDING"}
    assert after._state.tasks["A"].lost_lease is None
    assert after._state.tasks["A"].cancel_requested is None
