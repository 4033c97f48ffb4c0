"""Durable scheduler state: what survives a restart of luigid, and how a damaged state file is handled."""

from __future__ import annotations

import gc
import logging
import math
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers.postgres import fresh_schema, require_postgres

from luigi import configuration
from luigi.database import Migration
from luigi.scheduler import ManualClock, Scheduler, SchedulerConfig
from luigi.scheduler.store import (
    NullStore,
    SqlStore,
    StateStoreError,
    StateVersionError,
    open_store_from_config,
    schema,
)

START = 1_000_000.0
WORKER = "w1"


def store_at(location: Path | str) -> SqlStore:
    """A store on a SQLite file (a Path) or a database URL."""
    return SqlStore.for_file(location) if isinstance(location, Path) else SqlStore(location)


def open_scheduler(location: Path | str, clock: ManualClock, **options) -> Scheduler:
    """What luigid does at start: a scheduler on the store, loaded."""
    sch = Scheduler(SchedulerConfig(**options), clock=clock, store=store_at(location))
    sch.load()
    return sch


@pytest.fixture
def state_file(tmp_path: Path) -> Path:
    return tmp_path / "state.sqlite"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def location(request: pytest.FixtureRequest, state_file: Path) -> Iterator[Path | str]:
    """Where the state goes: the same behaviour is expected of every backend."""
    if request.param == "sqlite":
        yield state_file
        return
    with fresh_schema(require_postgres()) as url:
        yield url


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


def status_of(sch: Scheduler, task_id: str) -> str | None:
    task = sch.task_list("", limit=False).get(task_id)
    return task["status"] if task else None


# -- what survives a restart --------------------------------------------------------------------------------


def test_a_running_task_stays_running_for_its_worker_after_a_restart_and_can_finish(location, clock):
    before = open_scheduler(location, clock)
    before.add_task(worker=WORKER, task_id="A", family="A")
    assert before.get_work(worker=WORKER)["task_id"] == "A"
    before.flush()  # left open, as after kill -9

    after = open_scheduler(location, clock)
    task = after.task_list("RUNNING")["A"]
    assert task["worker_running"] == WORKER
    assert [t["task_id"] for t in after.get_work(worker=WORKER, current_tasks=["A"])["running_tasks"]] == [
        "A"
    ]
    after.add_task(worker=WORKER, task_id="A", status="DONE")
    after.flush()

    assert status_of(open_scheduler(location, clock), "A") == "DONE"


def test_grants_made_ahead_keep_their_marks_across_a_restart_so_a_lost_worker_fails_only_what_it_started(
    location, clock
):
    before = open_scheduler(location, clock, worker_disconnect_delay=60, retry_delay=900)
    for task_id in ("A", "B", "C", "D"):
        before.add_task(worker=WORKER, task_id=task_id, family=task_id, runnable=True)
    reply = before.get_work(worker=WORKER, current_tasks=[], assume_done=["X"], max_tasks=4)
    grants = [reply["task_id"], *(more["task_id"] for more in reply["more_tasks"])]
    before.add_task(worker=WORKER, task_id=grants[0], status="DONE")  # the second one has started now
    before.flush()  # left open, as after kill -9

    after = open_scheduler(location, clock, worker_disconnect_delay=60, retry_delay=900)
    clock.advance(61)  # the worker never comes back
    after.prune()
    statuses = {task_id: status_of(after, task_id) for task_id in grants}
    assert statuses == {grants[0]: "DONE", grants[1]: "FAILED", grants[2]: "PENDING", grants[3]: "PENDING"}


def test_pending_work_is_granted_again_after_a_restart(location, clock):
    before = open_scheduler(location, clock)
    before.add_task(worker=WORKER, task_id="Root", deps=["Leaf"], priority=5)
    before.add_task(worker=WORKER, task_id="Leaf")
    before.add_task(worker=WORKER, task_id="Other")
    before.close()

    after = open_scheduler(location, clock)
    assert after.get_work(worker=WORKER)["task_id"] == "Leaf"  # priority 5 flowed to the dependency
    after.add_task(worker=WORKER, task_id="Leaf", status="DONE")
    assert after.get_work(worker=WORKER)["task_id"] == "Root"
    assert after.count_pending(WORKER)["n_pending_tasks"] == 1


def test_a_worker_that_never_returns_loses_its_running_task_after_the_disconnect_delay(location, clock):
    before = open_scheduler(location, clock, worker_disconnect_delay=60, retry_delay=900)
    before.add_task(worker=WORKER, task_id="A")
    before.get_work(worker=WORKER)
    before.flush()
    clock.advance(3600)  # luigid was down for an hour: the worker is not blamed for that

    after = open_scheduler(location, clock, worker_disconnect_delay=60, retry_delay=900)
    after.prune()
    assert status_of(after, "A") == "RUNNING"
    clock.advance(61)
    after.prune()
    assert status_of(after, "A") == "FAILED"


def test_a_worker_that_keeps_pinging_keeps_its_running_task(location, clock):
    before = open_scheduler(location, clock, worker_disconnect_delay=60)
    before.add_task(worker=WORKER, task_id="A")
    before.get_work(worker=WORKER)
    before.close()

    after = open_scheduler(location, clock, worker_disconnect_delay=60)
    for _ in range(5):
        clock.advance(30)
        after.ping(worker=WORKER)
        after.prune()
    assert after.task_list("RUNNING")["A"]["worker_running"] == WORKER


def test_resources_set_at_run_time_survive_and_the_others_follow_the_config(location, clock):
    before = open_scheduler(location, clock, resources={"db": 1, "cpu": 4})
    assert before.update_resource("db", 3)
    before.update_resources(gpu=2)
    before.close()

    after = open_scheduler(location, clock, resources={"db": 1, "cpu": 8})
    capacities = {r["name"]: r["num_total"] for r in after.resource_list()}
    assert capacities == {"db": 3, "cpu": 8, "gpu": 2}


def test_failures_still_count_towards_disabling_after_a_restart(location, clock):
    options = dict(retry_count=2, disable_window=3600, retry_delay=1)
    before = open_scheduler(location, clock, **options)
    before.add_task(worker=WORKER, task_id="A", owners=["ops@example.com"])
    before.add_task(worker=WORKER, task_id="A", status="FAILED", expl="first")
    before.close()

    after = Scheduler(
        SchedulerConfig(**options), clock=clock, store=store_at(location), notifier=lambda *a: None
    )
    after.load()
    after.add_task(worker=WORKER, task_id="A", status="FAILED", expl="second")
    assert status_of(after, "A") == "DISABLED"
    assert after.fetch_error("A")["error"] == "second"


def test_pause_disabled_workers_and_unbounded_batchers_survive(location, clock):
    before = open_scheduler(location, clock)
    before.add_task_batcher(worker=WORKER, task_family="B", batched_args=["n"], max_batch_size=math.inf)
    for n in range(3):
        before.add_task(worker=WORKER, task_id=f"B{n}", family="B", params={"n": str(n)}, batchable=True)
    before.add_task(worker="w2", task_id="C")
    before.disable_worker(worker="w2")
    before.pause()
    before.close()

    after = open_scheduler(location, clock)
    assert after.is_paused() == {"paused": True}
    assert after.get_work(worker="w2")["worker_state"] == "disabled"
    after.unpause()
    reply = after.get_work(worker=WORKER)
    assert reply["batch_task_ids"] == ["B0", "B1", "B2"]
    assert reply["task_params"] == {"n": ["0", "1", "2"]}


def test_what_a_running_task_reports_about_itself_survives(location, clock):
    before = open_scheduler(location, clock, resources={"db": 2})
    before.add_task(worker=WORKER, task_id="A", resources={"db": 2}, tracking_url="http://t/1")
    before.get_work(worker=WORKER)
    before.decrease_running_task_resources(task_id="A", decrease_resources={"db": 1})
    before.set_task_status_message(task_id="A", status_message="half way")
    before.set_task_progress_percentage(task_id="A", progress_percentage=50)
    before.add_scheduler_message_response(task_id="A", message_id="m1", response="yes")
    before.add_scheduler_message_response(task_id="A", message_id="m2", response="no")
    before.get_scheduler_message_response(task_id="A", message_id="m2")
    before.set_worker_processes(worker=WORKER, n=3)
    before.close()

    after = open_scheduler(location, clock, resources={"db": 2})
    assert after.get_running_task_resources("A")["resources"] == {"db": 1}
    assert after.get_task_status_message("A")["statusMessage"] == "half way"
    assert after.get_task_progress_percentage("A")["progressPercentage"] == 50
    assert after.task_list("RUNNING")["A"]["tracking_url"] == "http://t/1"
    assert after.get_scheduler_message_response(task_id="A", message_id="m1") == {"response": "yes"}
    assert after.get_scheduler_message_response(task_id="A", message_id="m2") == {"response": None}
    assert after.ping(worker=WORKER)["rpc_messages"] == [{"name": "set_worker_processes", "kwargs": {"n": 3}}]


def test_removed_tasks_and_silent_workers_stay_gone(location, clock):
    before = open_scheduler(location, clock, worker_disconnect_delay=60, remove_delay=100)
    before.add_task(worker=WORKER, task_id="A")
    clock.advance(61)
    before.prune()  # the worker is gone, the task is due for removal
    clock.advance(101)
    before.prune()
    before.close()

    after = open_scheduler(location, clock)
    assert after.task_list("") == {}
    assert after.worker_list() == []


# -- flushing ------------------------------------------------------------------------------------------


def count_commits(location: Path | str, store: SqlStore) -> Callable[[], int]:
    """How many transactions the store committed since this was called.

    SQLite: the file's ``data_version`` as another connection sees it (it moves once per commit by
    someone else); a database server: SQLAlchemy's commit events.
    """
    if isinstance(location, Path):
        observer = sqlite3.connect(location, isolation_level=None)
        version = lambda: observer.execute("PRAGMA data_version").fetchone()[0]  # noqa: E731
        start = version()
        return lambda: version() - start
    from sqlalchemy import event

    commits = [0]

    def on_commit(_conn):
        commits[0] += 1

    event.listen(store.engine, "commit", on_commit)
    return lambda: commits[0]


def test_flush_writes_only_when_something_changed(location, clock):
    store = store_at(location)
    sch = Scheduler(SchedulerConfig(), clock=clock, store=store)
    sch.load()
    commits = count_commits(location, store)

    sch.flush()
    sch.task_list("")
    sch.count_pending(worker=WORKER)
    sch.flush()
    sch.checkpoint()  # a SQLite file is written when its journal is folded; a server database at flush
    assert commits() == 0

    sch.add_task(worker=WORKER, task_id="A")
    sch.add_task(worker=WORKER, task_id="B")
    sch.flush()
    sch.checkpoint()
    assert commits() == 1


def test_a_failed_flush_keeps_the_changes_for_the_next_one(location, clock, monkeypatch):
    store = store_at(location)
    sch = Scheduler(SchedulerConfig(), clock=clock, store=store)
    sch.load()
    sch.add_task(worker=WORKER, task_id="A")
    real = store.record_changes

    def unavailable(state, changes):
        raise StateStoreError("database unavailable")

    monkeypatch.setattr(store, "record_changes", unavailable)
    with pytest.raises(StateStoreError):
        sch.flush()
    monkeypatch.setattr(store, "record_changes", real)
    sch.flush()

    assert status_of(open_scheduler(location, clock), "A") == "PENDING"


def test_a_write_the_sqlite_file_refuses_is_rolled_back_whole_and_kept_for_the_next_fold(state_file, clock):
    sch = open_scheduler(state_file, clock)
    sch.add_task(worker=WORKER, task_id="A")
    sch.flush()
    sch.checkpoint()
    outside = sqlite3.connect(state_file, isolation_level=None)
    outside.execute("ALTER TABLE workers RENAME TO workers_away")  # tasks are written first, then workers

    sch.add_task(worker="another-worker", task_id="B")
    sch.flush()  # journaled: the file is written by the checkpoint
    with pytest.raises(StateStoreError, match="no such table: workers"):
        sch.checkpoint()
    assert outside.execute("SELECT id FROM tasks").fetchall() == [("A",)]  # B's row was rolled back

    outside.execute("ALTER TABLE workers_away RENAME TO workers")
    outside.close()
    sch.checkpoint()
    assert set(open_scheduler(state_file, clock).task_list("")) == {"A", "B"}


def test_a_scheduler_that_did_not_load_replaces_the_stored_state(location, clock):
    old = open_scheduler(location, clock)
    old.add_task(worker=WORKER, task_id="Old")
    old.close()

    fresh = Scheduler(SchedulerConfig(), clock=clock, store=store_at(location))
    fresh.add_task(worker=WORKER, task_id="New")
    fresh.close()

    assert list(open_scheduler(location, clock).task_list("")) == ["New"]


def test_the_in_process_scheduler_keeps_nothing_and_tracks_nothing(clock):
    sch = Scheduler(SchedulerConfig(), clock=clock)
    sch.add_task(worker=WORKER, task_id="A")
    sch.load()
    sch.flush()
    sch.dump()
    sch.close()
    assert status_of(sch, "A") == "PENDING"
    assert sch._state.changes is None  # no dirty sets growing in local mode


def test_a_closed_store_refuses_further_use(location, clock):
    sch = open_scheduler(location, clock)
    sch.close()
    sch.add_task(worker=WORKER, task_id="A")
    with pytest.raises(StateStoreError, match="closed"):
        sch.flush()


# -- damaged, foreign or newer files ------------------------------------------------------------------


def corrupt_copies(path: Path) -> list[Path]:
    return sorted(path.parent.glob(f"{path.name}.corrupt-*"))


def test_a_garbage_state_file_is_moved_aside_and_the_scheduler_starts_empty(state_file, clock, caplog):
    garbage = b"this is not a database\x00" * 100
    state_file.write_bytes(garbage)

    with caplog.at_level(logging.WARNING, logger="luigi.scheduler"):
        sch = open_scheduler(state_file, clock)

    assert sch.task_list("") == {}
    [moved] = corrupt_copies(state_file)
    assert moved.read_bytes() == garbage
    assert str(moved) in caplog.text and "could not be read" in caplog.text
    sch.add_task(worker=WORKER, task_id="A")
    sch.close()
    assert status_of(open_scheduler(state_file, clock), "A") == "PENDING"


def test_a_truncated_state_file_is_moved_aside(state_file, clock):
    sch = open_scheduler(state_file, clock)
    for n in range(500):
        sch.add_task(worker=WORKER, task_id=f"T{n}", params={"padding": "x" * 100})
    sch.close()
    with state_file.open("r+b") as f:
        f.truncate(state_file.stat().st_size // 2)

    assert open_scheduler(state_file, clock).task_list("") == {}
    assert len(corrupt_copies(state_file)) == 1


def test_another_programs_database_is_moved_aside(state_file, clock):
    with sqlite3.connect(state_file) as conn:
        conn.execute("CREATE TABLE recipes (name TEXT)")
    conn.close()

    assert open_scheduler(state_file, clock).task_list("") == {}
    assert len(corrupt_copies(state_file)) == 1


def test_a_row_of_the_wrong_shape_is_skipped_and_the_rest_of_the_file_loads(state_file, clock, caplog):
    sch = open_scheduler(state_file, clock)
    sch.add_task(worker=WORKER, task_id="A")
    sch.add_task(worker=WORKER, task_id="B", status="DONE")
    sch.close()
    with sqlite3.connect(state_file) as conn:
        conn.execute("UPDATE tasks SET status = 'EXPLODED' WHERE id = 'A'")
    conn.close()

    with caplog.at_level(logging.WARNING, logger="luigi.scheduler"):
        after = open_scheduler(state_file, clock)
    assert {task_id: task["status"] for task_id, task in after.task_list("").items()} == {"B": "DONE"}
    assert "'A'" in caplog.text and "status" in caplog.text and "EXPLODED" in caplog.text
    assert "skipped" in caplog.text
    assert corrupt_copies(state_file) == []  # one bad row never costs the rest of the state


def test_a_damaged_row_costs_only_itself_among_the_rows_read_with_it(state_file, clock, caplog):
    sch = open_scheduler(state_file, clock)
    for task_id in ("A", "B", "C", "D"):
        sch.add_task(worker=WORKER, task_id=task_id, params={"n": task_id})
    sch.close()
    with sqlite3.connect(state_file) as conn:  # texts that would read as other rows' if run together
        conn.execute("""UPDATE tasks SET params = '{"n":"B"},{"n":"X"}' WHERE id = 'B'""")
        conn.execute("UPDATE tasks SET created = 'soon' WHERE id = 'C'")
    conn.close()

    with caplog.at_level(logging.WARNING, logger="luigi.scheduler"):
        after = open_scheduler(state_file, clock)
    assert {task_id: task["params"] for task_id, task in after.task_list("").items()} == {
        "A": {"n": "A"},
        "D": {"n": "D"},
    }
    assert "'B' column params" in caplog.text and "'C' column created" in caplog.text
    assert corrupt_copies(state_file) == []


def test_tasks_load_in_their_stored_order_whatever_order_the_database_returns_rows(location, clock):
    before = open_scheduler(location, clock)
    for task_id in ("A", "B", "C"):
        before.add_task(worker=WORKER, task_id=task_id)
    before.close()
    reordered = "UPDATE tasks SET seq = CASE id WHEN 'A' THEN 2 WHEN 'B' THEN 0 ELSE 1 END"
    with store_at(location).engine.begin() as conn:  # what dict order a flush of an older version left
        conn.exec_driver_sql(reordered)

    after = open_scheduler(location, clock)
    assert list(after._state.tasks) == ["B", "C", "A"]
    after.add_task(worker=WORKER, task_id="D")  # a new task goes last, also after the next restart
    after.close()
    assert list(open_scheduler(location, clock)._state.tasks) == ["B", "C", "A", "D"]


def test_a_row_whose_place_is_damaged_still_loads_and_goes_last(state_file, clock):
    before = open_scheduler(state_file, clock)
    for task_id in ("A", "B", "C"):
        before.add_task(worker=WORKER, task_id=task_id)
    before.close()
    with sqlite3.connect(state_file) as conn:
        conn.execute("UPDATE tasks SET seq = 'first' WHERE id = 'A'")
    conn.close()

    assert list(open_scheduler(state_file, clock)._state.tasks) == ["B", "C", "A"]


def test_parameters_hand_written_with_spaces_still_load(state_file, clock):
    before = open_scheduler(state_file, clock)
    before.add_task(worker=WORKER, task_id="A", params={"day": "2024-01-01"})
    before.close()
    with sqlite3.connect(state_file) as conn:
        conn.execute("""UPDATE tasks SET params = ' { "day": "2024-01-02", "n": 1.5 } ' WHERE id = 'A'""")
    conn.close()

    assert open_scheduler(state_file, clock).task_list("")["A"]["params"] == {"day": "2024-01-02", "n": 1.5}


def test_the_cyclic_collector_is_held_off_while_a_state_loads_and_runs_again_after(state_file, clock):
    seen = []

    class Watching(SqlStore):
        def load(self, state) -> None:
            seen.append(gc.isenabled())
            super().load(state)

    sch = Scheduler(SchedulerConfig(), clock=clock, store=Watching.for_file(state_file))
    sch.load()
    assert seen == [False]
    assert gc.isenabled()


def test_a_task_id_no_database_can_hold_is_left_out_and_the_rest_is_stored(state_file, clock, caplog):
    sch = open_scheduler(state_file, clock)
    sch.add_task(worker=WORKER, task_id="Good")
    with caplog.at_level(logging.ERROR, logger="luigi.scheduler"):
        sch.add_task(worker=WORKER, task_id="Evil_\ud800", family="Evil")  # in-process: no RPC check
        sch.add_task(worker=WORKER, task_id="Later")
        sch.close()
    assert "Evil_\\ud800" in caplog.text and "cannot be stored" in caplog.text

    after = open_scheduler(state_file, clock)
    assert sorted(after.task_list("")) == ["Good", "Later"]
    assert corrupt_copies(state_file) == []


def test_tasks_naming_a_worker_missing_from_the_file_are_stored_without_it(state_file, clock):
    before = open_scheduler(state_file, clock)
    before.add_task(worker=WORKER, task_id="A")
    before.close()
    with sqlite3.connect(state_file) as conn:
        conn.execute("DELETE FROM workers")
    conn.close()

    middle = open_scheduler(state_file, clock)
    middle.ping(worker=WORKER)  # the same worker id comes back: a new worker, not the old stakeholder
    middle.close()

    assert open_scheduler(state_file, clock).task_list("")["A"]["workers"] == []


def test_a_newer_schema_version_is_refused_naming_both_versions(state_file, clock):
    open_scheduler(state_file, clock).close()
    with sqlite3.connect(state_file) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.close()

    with pytest.raises(StateVersionError, match=rf"schema version 99.*up to {schema.SCHEMA_VERSION}"):
        open_scheduler(state_file, clock)
    assert corrupt_copies(state_file) == []  # refused, not touched


def test_an_older_schema_is_upgraded_by_the_numbered_migrations(state_file, clock, monkeypatch):
    before = open_scheduler(state_file, clock)
    before.add_task(worker=WORKER, task_id="A")
    before.close()

    def add_a_note(conn):
        conn.execute(schema.meta.insert(), [{"key": "note", "value": "added by a later version"}])

    later = schema.SCHEMA_VERSION + 1
    monkeypatch.setattr(schema, "MIGRATIONS", (*schema.MIGRATIONS, Migration(later, "a note", add_a_note)))
    after = open_scheduler(state_file, clock)
    assert status_of(after, "A") == "PENDING"
    after.close()
    with sqlite3.connect(state_file) as conn:
        meta = dict(conn.execute("SELECT key, value FROM meta"))
    conn.close()
    assert meta["schema_version"] == str(later)
    assert meta["note"] == "added by a later version"


def test_a_state_path_that_is_a_directory_gives_a_clear_error(tmp_path):
    (tmp_path / "state.sqlite").mkdir()
    sch = Scheduler(SchedulerConfig(), store=SqlStore.for_file(tmp_path / "state.sqlite"))
    with pytest.raises(StateStoreError, match="is a directory"):
        sch.load()
    with pytest.raises(StateStoreError, match="is a directory"):
        open_store_from_config(str(tmp_path))


def test_a_state_directory_that_cannot_be_created_gives_a_clear_error(tmp_path):
    (tmp_path / "plain-file").write_text("")
    store = SqlStore.for_file(tmp_path / "plain-file" / "state.sqlite")
    with pytest.raises(StateStoreError, match="Cannot create the directory.*state_path"):
        Scheduler(SchedulerConfig(), store=store).load()


# -- configuration ------------------------------------------------------------------------------------------


def test_the_sqlite_file_sits_beside_state_path_with_the_extension_replaced(tmp_path):
    configuration.get_config().set("scheduler", "state_path", str(tmp_path / "state.pickle"))
    assert open_store_from_config().path == tmp_path / "state.sqlite"
    assert open_store_from_config(str(tmp_path / "other")).path == tmp_path / "other.sqlite"


def test_state_url_overrides_state_path(tmp_path):
    configuration.get_config().set("scheduler", "state_path", str(tmp_path / "state.pickle"))
    configuration.get_config().set("scheduler", "state_url", f"sqlite:///{tmp_path / 'elsewhere.db'}")
    store = open_store_from_config()
    assert store.path == tmp_path / "elsewhere.db"
    assert store.where == str(tmp_path / "elsewhere.db")


def test_a_pickled_luigi_state_is_not_read_and_says_so(tmp_path, caplog):
    (tmp_path / "state.pickle").write_bytes(b"\x80\x04not really a pickle")
    with caplog.at_level(logging.WARNING, logger="luigi.scheduler"):
        store = open_store_from_config(str(tmp_path / "state.pickle"))
    assert "is not read" in caplog.text
    assert store.path == tmp_path / "state.sqlite"


def test_the_null_store_is_what_a_scheduler_gets_by_default():
    store = NullStore()
    assert not store.tracks_changes
    sch = Scheduler(SchedulerConfig(), store=store)
    sch.add_task(worker=WORKER, task_id="A")
    sch.load()
    assert status_of(sch, "A") == "PENDING"


@pytest.mark.postgres
def test_a_lost_database_connection_is_opened_again_and_nothing_is_lost(clock):
    from sqlalchemy import create_engine, text

    with fresh_schema(require_postgres()) as url:
        victim = f"{url}&application_name=luigi_store_victim"
        sch = Scheduler(SchedulerConfig(), clock=clock, store=SqlStore(victim))
        sch.load()
        sch.add_task(worker=WORKER, task_id="A")
        sch.flush()
        admin = create_engine(url)
        with admin.begin() as conn:  # cut the store's session off, as a database restart does
            conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = 'luigi_store_victim'"
                )
            )
        admin.dispose()

        sch.add_task(worker=WORKER, task_id="B")
        with pytest.raises(StateStoreError, match="Cannot write"):
            sch.flush()
        sch.flush()
        sch.close()
        after = open_scheduler(url, clock)
        assert sorted(after.task_list("")) == ["A", "B"]
        after.close()


def test_a_cancel_request_survives_a_restart_and_the_cancelled_failure_is_not_retried(location, clock):
    before = open_scheduler(location, clock, retry_delay=60)
    before.add_task(worker=WORKER, task_id="A", family="A")
    assert before.get_work(worker=WORKER)["task_id"] == "A"
    assert before.cancel_task(task_id="A")["cancel_requested"] is True
    before.flush()  # left open, as after kill -9

    restarted = open_scheduler(location, clock, retry_delay=60)
    assert restarted._state.tasks["A"].cancel_requested == START
    messages = restarted.ping(worker=WORKER)["rpc_messages"]
    assert [(m["name"], m["kwargs"]["task_id"]) for m in messages] == [("cancel_task", "A")]
    restarted.add_task(worker=WORKER, task_id="A", status="FAILED", expl='"Cancelled from the visualiser"')
    restarted.flush()

    again = open_scheduler(location, clock, retry_delay=60)
    clock.advance(600)
    again.ping(worker=WORKER)
    again.prune()
    assert status_of(again, "A") == "FAILED"
    again.forgive_failures(task_id="A")
    assert again.get_work(worker=WORKER)["task_id"] == "A"


# What each schema version added, undone to make a database as an older version wrote it.
_UNDO = {
    4: ["ALTER TABLE tasks DROP COLUMN granted_ahead", "DROP TABLE luigid_lease"],
    3: ["ALTER TABLE tasks DROP COLUMN cancel_requested"],
    2: ["ALTER TABLE tasks DROP COLUMN lost_lease"],
}


def _written_by_version(state_file, clock, version: int) -> None:
    """A state holding PENDING task A, as schema ``version`` wrote it."""
    before = open_scheduler(state_file, clock)
    before.add_task(worker=WORKER, task_id="A")
    before.close()
    with sqlite3.connect(state_file) as conn:
        for undone in range(4, version, -1):
            for statement in _UNDO[undone]:
                conn.execute(statement)
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(version),))
    conn.close()


def _schema_of(state_file) -> tuple[list[str], list[str], str]:
    """The tasks table's columns, the tables, and the recorded schema version."""
    with sqlite3.connect(state_file) as conn:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(tasks)")]
        tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    conn.close()
    return columns, tables, version


def test_a_version_3_database_gets_the_granted_ahead_column_and_the_lease_table(state_file, clock):
    _written_by_version(state_file, clock, 3)

    after = open_scheduler(state_file, clock)
    assert status_of(after, "A") == "PENDING"
    assert after._state.tasks["A"].granted_ahead is False
    after.close()
    columns, tables, _ = _schema_of(state_file)
    assert "granted_ahead" in columns
    assert "luigid_lease" in tables


def test_a_version_2_database_gets_the_cancel_requested_column_and_keeps_its_tasks(state_file, clock):
    _written_by_version(state_file, clock, 2)

    after = open_scheduler(state_file, clock)
    assert status_of(after, "A") == "PENDING"
    assert after._state.tasks["A"].cancel_requested is None
    after.close()
    columns, _, _ = _schema_of(state_file)
    assert "cancel_requested" in columns


def test_a_version_1_database_gets_the_lost_lease_column_and_keeps_its_tasks(state_file, clock):
    _written_by_version(state_file, clock, 1)

    after = open_scheduler(state_file, clock)
    assert status_of(after, "A") == "PENDING"
    assert after._state.tasks["A"].lost_lease is None
    after.close()
    columns, _, version = _schema_of(state_file)
    assert "lost_lease" in columns
    assert version == str(schema.SCHEMA_VERSION)
