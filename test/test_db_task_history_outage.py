"""Recording never stops scheduling: outages are survived, losses counted, memory bounded.

An unreachable database is a PostgreSQL URL on a port nobody listens on (the driver is needed, not a
server); a real outage stops and restarts a PostgreSQL server of the test's own.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
from helpers.luigid import free_port, wait_until
from helpers.postgres import private_cluster
from sqlalchemy import create_engine, func, select, text

from luigi.db_task_history import DbTaskHistory, TaskEvent, TaskRecord
from luigi.scheduler import Scheduler
from luigi.task_status import DONE, FAILED

HISTORY_LOG = "luigi.task_history"


def run_tasks(scheduler: Scheduler, family: str, count: int, outcome: str = DONE) -> None:
    """``count`` tasks of ``family`` through the scheduler: add, grant, finish (3 history events each)."""
    for n in range(count):
        task_id = f"{family}_{n}"
        scheduler.add_task(worker="w", task_id=task_id, family=family, params={"n": str(n)})
        assert scheduler.get_work(worker="w", host="host-a")["task_id"] == task_id
        expl = json.dumps("Traceback (most recent call last):\nOSError: disk") if outcome == FAILED else None
        scheduler.add_task(worker="w", task_id=task_id, status=outcome, expl=expl)


def unreachable_url() -> str:
    pytest.importorskip("psycopg")
    return f"postgresql+psycopg://nobody:secret@127.0.0.1:{free_port()}/nowhere"


def count_rows(url: str, table: Any) -> int:
    engine = create_engine(url)
    with engine.connect() as conn:
        total = int(conn.execute(select(func.count()).select_from(table)).scalar() or 0)
    engine.dispose()
    return total


def test_scheduling_goes_on_while_the_database_is_unreachable_and_the_outage_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=HISTORY_LOG)
    history = DbTaskHistory(unreachable_url(), flush_interval=0.02, retry_max_delay=0.05)
    try:
        scheduler = Scheduler(task_history=history)
        run_tasks(scheduler, "Offline", 20)

        assert scheduler.task_list(status=DONE, upstream_status="")  # every task finished
        wait_until(lambda: history.status().outage_since is not None, what="the outage to be noticed")
        assert not history.flush(timeout=0.3)
        status = history.status()
        assert (status.buffered, status.written, status.lost) == (60, 0, 0)
        assert "connect" in (status.last_error or "").lower() or status.last_error
        outage_lines = [
            r for r in caplog.records if r.levelno >= logging.ERROR and "unavailable" in r.getMessage()
        ]
        assert len(outage_lines) == 1
        assert "secret" not in outage_lines[0].getMessage()  # the password is hidden
    finally:
        history.close(timeout=0.5)


def test_events_past_the_buffer_are_dropped_counted_and_reported(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=HISTORY_LOG)
    history = DbTaskHistory(unreachable_url(), buffer_size=10, flush_interval=0.02, retry_max_delay=0.05)
    scheduler = Scheduler(task_history=history)
    run_tasks(scheduler, "Overflow", 20)

    status = history.status()
    assert (status.buffered, status.dropped, status.lost) == (10, 50, 50)
    full = [r for r in caplog.records if "buffer is full" in r.getMessage()]
    assert len(full) == 1
    history.close(timeout=0.5)
    assert history.status().dropped == 60  # the 10 still waiting could not be written either
    assert any("60 events in all were not recorded" in r.getMessage() for r in caplog.records)


def test_an_event_the_database_refuses_is_counted_and_the_others_are_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    DbTaskHistory(url).close()
    engine = create_engine(url)
    with engine.begin() as conn:  # a database-side rule this luigi cannot satisfy for one task
        conn.execute(
            text(
                "CREATE TRIGGER no_poison BEFORE INSERT ON tasks WHEN NEW.name = 'Poison' "
                "BEGIN SELECT RAISE(ABORT, 'poison is not allowed'); END"
            )
        )
    engine.dispose()

    history = DbTaskHistory(url, flush_interval=0.02)
    try:
        scheduler = Scheduler(task_history=history)
        run_tasks(scheduler, "Good", 3)
        run_tasks(scheduler, "Poison", 1)
        run_tasks(scheduler, "Fine", 2)
        assert history.flush(timeout=30)

        status = history.status()
        assert (status.written, status.rejected) == (15, 3)
        assert [name for name, _ in history.find_task_names()] == ["Fine", "Good"]
        assert any("poison is not allowed" in r.getMessage() for r in caplog.records)
    finally:
        history.close()


def test_the_writer_remembers_a_bounded_number_of_tasks_and_never_duplicates_a_record(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    history = DbTaskHistory(url, cache_size=5, batch_size=7, flush_interval=0.02)
    try:
        scheduler = Scheduler(task_history=history)
        for n in range(30):  # everything scheduled first, then run: each task is long evicted by then
            scheduler.add_task(worker="w", task_id=f"Many_{n}", family="Many", params={"n": str(n)})
        assert history.flush(timeout=30)
        for _ in range(30):
            assert scheduler.get_work(worker="w", host="h")["task_id"] is not None
        for n in range(30):
            scheduler.add_task(worker="w", task_id=f"Many_{n}", status=DONE)
        assert history.flush(timeout=30)

        assert history._writer._recorder.cached <= 5  # white-box: the bound is the point here
        assert count_rows(url, TaskRecord.__table__) == 30
        assert count_rows(url, TaskEvent.__table__) == 90
        assert [run.status for run in history.find_runs_by_name("Many", limit=100)] == [DONE] * 30
    finally:
        history.close()


@pytest.mark.postgres
@pytest.mark.slow
def test_events_recorded_while_postgres_is_down_are_written_when_it_returns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=HISTORY_LOG)
    with private_cluster(free_port()) as cluster:
        history = DbTaskHistory(cluster.url, flush_interval=0.02, retry_max_delay=0.2)
        try:
            scheduler = Scheduler(task_history=history)
            run_tasks(scheduler, "Before", 5)
            assert history.flush(timeout=30)

            cluster.stop()
            run_tasks(scheduler, "During", 5, outcome=FAILED)
            wait_until(lambda: history.status().outage_since is not None, what="the outage to be noticed")
            cluster.start()

            assert history.flush(timeout=60)
            status = history.status()
            assert (status.written, status.lost, status.outage_since) == (30, 0, None)
            assert count_rows(cluster.url, TaskEvent.__table__) == 30
            failed = history.find_runs_by_name("During")
            assert [(run.status, run.exception_type) for run in failed] == [(FAILED, "OSError")] * 5
            assert any("is back after" in r.getMessage() for r in caplog.records)
        finally:
            history.close()


def test_a_forked_child_records_on_its_own_without_repeating_the_parents_events(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    history = DbTaskHistory(url, flush_interval=60)  # nothing is written before the fork
    try:
        scheduler = Scheduler(task_history=history)
        scheduler.add_task(worker="w", task_id="Parent_1", family="Parent")
        pid = os.fork()
        if pid == 0:  # the child: its own writer thread, its own connections, an empty buffer
            scheduler.add_task(worker="w", task_id="Child_1", family="Child")
            os._exit(0 if history.flush(timeout=30) and history.status().written == 1 else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert history.flush(timeout=30)

        assert [name for name, _ in history.find_task_names()] == ["Child", "Parent"]
        assert count_rows(url, TaskEvent.__table__) == 2
    finally:
        history.close()
