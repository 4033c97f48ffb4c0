"""Schema versions: a Luigi history database is upgraded and read back; a newer one is refused.

The Luigi layouts are created here from the documented columns (LUIGI_COMPAT f.7), filled with rows
as Luigi writes them, and then opened with ``DbTaskHistory``, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import datetime
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.postgres import fresh_schema, require_postgres
from sqlalchemy import create_engine, text

from luigi.db_task_history import LATEST_VERSION, DbTaskHistory, HistorySchemaError
from luigi.scheduler import Scheduler
from luigi.task_status import DONE, FAILED, PENDING, RUNNING

T0 = datetime.datetime(2023, 5, 1, 12, 0, 0)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'luigi-history.db'}"
    else:
        with fresh_schema(require_postgres()) as schema_url:
            yield schema_url


def create_luigi_layout(url: str, with_task_id: bool = True, value_type: str = "TEXT") -> None:
    """Luigi's three tables as documented; ``with_task_id=False`` is the layout before ``tasks.task_id``."""
    engine = create_engine(url)
    serial = "SERIAL" if engine.dialect.name == "postgresql" else "INTEGER"
    task_id_column = "task_id VARCHAR(200), " if with_task_id else ""
    statements = [
        f"CREATE TABLE tasks (id {serial} NOT NULL PRIMARY KEY, {task_id_column}"
        "name VARCHAR(128), host VARCHAR(128))",
        "CREATE INDEX ix_tasks_name ON tasks (name)",
        "CREATE TABLE task_parameters (task_id INTEGER NOT NULL REFERENCES tasks (id), "
        f"name VARCHAR(128) NOT NULL, value {value_type}, PRIMARY KEY (task_id, name))",
        f"CREATE TABLE task_events (id {serial} NOT NULL PRIMARY KEY, task_id INTEGER REFERENCES tasks (id), "
        "event_name VARCHAR(20), ts TIMESTAMP NOT NULL)",
        "CREATE INDEX ix_task_events_task_id ON task_events (task_id)",
        "CREATE INDEX ix_task_events_ts ON task_events (ts)",
    ]
    if with_task_id:
        statements.append("CREATE INDEX ix_tasks_task_id ON tasks (task_id)")
    with engine.begin() as conn:
        for statement in statements:
            conn.execute(text(statement))
    engine.dispose()


def insert_luigi_rows(url: str, with_task_id: bool = True) -> None:
    """Two tasks as Luigi records them: one DONE after 90 s, one FAILED after 30 s."""
    engine = create_engine(url)
    minute = datetime.timedelta(minutes=1)
    with engine.begin() as conn:
        for row_id, task_id, status, took in (
            (1, "Copy_2023_05_01_abc", DONE, 90),
            (2, "Copy_2023_05_02_def", FAILED, 30),
        ):
            columns, values = ("id, task_id, name, host", ":id, :task_id, 'Copy', 'old-host'")
            if not with_task_id:
                columns, values = ("id, name, host", ":id, 'Copy', 'old-host'")
            conn.execute(
                text(f"INSERT INTO tasks ({columns}) VALUES ({values})"), {"id": row_id, "task_id": task_id}
            )
            day = f"2023-05-0{row_id}"
            conn.execute(
                text("INSERT INTO task_parameters (task_id, name, value) VALUES (:t, 'date', :v)"),
                {"t": row_id, "v": day},
            )
            start = T0 + row_id * 10 * minute
            for event, ts in (
                (PENDING, start - minute),
                (RUNNING, start),
                (status, start + datetime.timedelta(seconds=took)),
            ):
                conn.execute(
                    text("INSERT INTO task_events (task_id, event_name, ts) VALUES (:t, :e, :ts)"),
                    {"t": row_id, "e": event, "ts": ts},
                )
        if engine.dialect.name == "postgresql":  # explicit ids were given: move the sequence past them
            conn.execute(text("SELECT setval('tasks_id_seq', 2)"))
    engine.dispose()


def schema_versions(url: str) -> list[int]:
    engine = create_engine(url)
    with engine.connect() as conn:
        versions = [
            row[0] for row in conn.execute(text("SELECT version FROM luigi_history_schema ORDER BY 1"))
        ]
    engine.dispose()
    return versions


def test_a_luigi_history_database_is_upgraded_and_its_rows_read_back(url: str) -> None:
    create_luigi_layout(url)
    insert_luigi_rows(url)

    history = DbTaskHistory(url, flush_interval=0.05, keep_days=0)  # keep 2023's rows
    try:
        done, failed = history.find_all_by_name("Copy")[::-1]
        assert (done.task_id, done.host, done.parameters["date"].value) == (
            "Copy_2023_05_01_abc",
            "old-host",
            "2023-05-01",
        )
        assert [event.event_name for event in done.events] == [DONE, RUNNING, PENDING]
        assert [event.event_name for event in failed.events] == [FAILED, RUNNING, PENDING]
        assert history.find_all_by_parameters("Copy", date="2023-05-02")[0].id == failed.id
        assert [(run.status, run.duration) for run in history.find_runs_by_name("Copy")] == [
            (DONE, 90.0),
            (FAILED, 30.0),
        ]
        assert schema_versions(url) == list(range(1, LATEST_VERSION + 1))

        scheduler = Scheduler(task_history=history)  # the same task runs again: appended to its record
        scheduler.add_task(
            worker="w", task_id="Copy_2023_05_02_def", family="Copy", params={"date": "2023-05-02"}
        )
        assert scheduler.get_work(worker="w", host="new-host")["task_id"] == "Copy_2023_05_02_def"
        scheduler.add_task(worker="w", task_id="Copy_2023_05_02_def", status=DONE)
        assert history.flush(timeout=30)
        again = history.find_task_by_task_id("Copy_2023_05_02_def")
        assert again.id == failed.id and again.host == "new-host"
        assert [event.event_name for event in again.events][:3] == [DONE, RUNNING, PENDING]
        assert [(run.status, run.retry) for run in again.runs] == [(DONE, 1), (FAILED, 0)]
    finally:
        history.close()


def test_a_luigi_database_from_before_task_ids_gains_the_column(url: str) -> None:
    create_luigi_layout(url, with_task_id=False, value_type="VARCHAR(256)")
    insert_luigi_rows(url, with_task_id=False)

    history = DbTaskHistory(url, keep_days=0)
    try:
        records = history.find_all_by_name("Copy")
        assert [record.task_id for record in records] == [None, None]
        assert {record.parameters["date"].value for record in records} == {"2023-05-01", "2023-05-02"}
        long_value = "v" * 1000  # fits now that values are TEXT
        scheduler = Scheduler(task_history=history)
        scheduler.add_task(worker="w", task_id="Copy_long", family="Copy", params={"date": long_value})
        assert history.flush(timeout=30)
        assert history.find_task_by_task_id("Copy_long").parameters["date"].value == long_value
        assert history.status().lost == 0
    finally:
        history.close()


def test_opening_again_applies_no_migration_twice(url: str) -> None:
    DbTaskHistory(url).close()
    DbTaskHistory(url).close()

    assert schema_versions(url) == list(range(1, LATEST_VERSION + 1))


def test_a_database_written_by_a_newer_luigi_is_refused_with_a_clear_message(url: str) -> None:
    DbTaskHistory(url).close()
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO luigi_history_schema (version, description, applied_at) "
                "VALUES (:v, 'future', :at)"
            ),
            {"v": LATEST_VERSION + 1, "at": T0},
        )
    engine.dispose()

    with pytest.raises(HistorySchemaError) as refused:
        DbTaskHistory(url)
    message = str(refused.value)
    assert f"schema version {LATEST_VERSION + 1}" in message and "newer" in message
    assert "Upgrade luigi" in message and "password" not in message


def test_luigid_refuses_a_newer_history_database_in_one_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    DbTaskHistory(url).close()
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE luigi_history_schema SET version = version + 100"))
    engine.dispose()
    config = tmp_path / "luigi.cfg"
    config.write_text(f"[scheduler]\nrecord_task_history = true\n\n[task_history]\ndb_connection = {url}\n")

    luigid = Path(sys.executable).parent / "luigid"
    done = subprocess.run(
        [str(luigid), "--port", "0", "--state-path", str(tmp_path / "state.pickle")],
        env={"PATH": "/usr/bin:/bin", "LUIGI_CONFIG_PATH": str(config), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 1
    [refusal] = [line for line in done.stderr.splitlines() if line.startswith("luigid: ")]
    assert refusal.startswith("luigid: The task history database") and "newer" in refusal
    assert "Traceback" not in done.stderr
