"""``luigi.contrib.sqla``: copies into a real SQLite file and the suite's real PostgreSQL server.

Each test defines its ``CopyToTable`` tasks, runs them with ``luigi.build(..., local_scheduler=True)``
and then reads the database with its own engine: the rows, the marker table, and what a failure left.
"""

from __future__ import annotations

import logging
import os
import pickle
import sys
from collections.abc import Iterator

import pytest
import sqlalchemy
from helpers.luigid import free_port
from helpers.postgres import fresh_schema, require_postgres
from helpers.services import require_module
from sqlalchemy.engine import make_url

import luigi
from luigi.contrib.sqla import (
    CopyFailedError,
    CopyToTable,
    DatabaseConnectionError,
    RowShapeError,
    SQLAlchemyTarget,
    TableCreationError,
    TableDefinitionError,
)
from luigi.event import Event

ROWS = [("alpha", 1), ("beta", 2), ("gamma", 3)]
NAME_VALUE = [
    (["name", sqlalchemy.String(64)], {"primary_key": True}),
    (["value", sqlalchemy.Integer], {}),
]
WRONG_PASSWORD = "Wr0ng-pa55word-for-luigi"


# -- databases --------------------------------------------------------------------------------------------


def _dispose_cached_engine(url: str) -> None:
    """Close the pooled connections luigi opened to ``url`` (the schema is dropped next)."""
    SQLAlchemyTarget(url, "any", "any").engine.dispose()


@pytest.fixture
def sqlite_url(tmp_path) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'copies.db'}"
    yield url
    _dispose_cached_engine(url)


@pytest.fixture
def postgres_url() -> Iterator[str]:
    server = require_postgres()
    with fresh_schema(server) as url:
        yield url
        _dispose_cached_engine(url)


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request) -> str:
    """A fresh, empty database of each kind: a SQLite file, and a new PostgreSQL schema."""
    return request.getfixturevalue(f"{request.param}_url")


def query(url: str, sql: str) -> list[tuple]:
    engine = sqlalchemy.create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(row) for row in conn.execute(sqlalchemy.text(sql))]
    finally:
        engine.dispose()


def execute(url: str, *statements: str) -> None:
    engine = sqlalchemy.create_engine(url)
    try:
        with engine.begin() as conn:
            for statement in statements:
                conn.execute(sqlalchemy.text(statement))
    finally:
        engine.dispose()


def has_table(url: str, name: str) -> bool:
    engine = sqlalchemy.create_engine(url)
    try:
        return sqlalchemy.inspect(engine).has_table(name)
    finally:
        engine.dispose()


def copy_task(url: str, table_name: str = "scores", rows=ROWS, **attributes):
    """A CopyToTable subclass into ``table_name`` at ``url`` copying ``rows``; ``attributes`` override."""

    class CopyScores(CopyToTable):
        connection_string = url
        table = table_name
        columns = NAME_VALUE

        def rows(self):
            yield from rows

    for name, value in attributes.items():
        setattr(CopyScores, name, value)
    return CopyScores


def build(*tasks) -> luigi.execution_summary.LuigiRunResult:
    return luigi.build(list(tasks), local_scheduler=True, detailed_summary=True)


def failures(events) -> list[BaseException]:
    seen, _ = events
    return [args[1] for name, args in seen if name == Event.FAILURE]


# -- copies -----------------------------------------------------------------------------------------------


def test_copy_with_declared_columns_creates_the_table_and_records_the_marker(db_url):
    task = copy_task(db_url)()

    result = build(task)

    assert result.scheduling_succeeded and result.status == luigi.LuigiStatusCode.SUCCESS
    assert query(db_url, "SELECT name, value FROM scores ORDER BY value") == ROWS
    [(update_id, target_table, inserted)] = query(db_url, "SELECT * FROM table_updates")
    assert (update_id, target_table) == (task.task_id, "scores")
    assert inserted is not None
    assert task.complete()


def test_copy_with_reflect_uses_the_existing_tables_definition(db_url):
    execute(db_url, "CREATE TABLE events (id INTEGER PRIMARY KEY, kind VARCHAR(20), weight REAL)")
    rows = [(1, "click", 0.5), (2, "view", 1.5)]
    Copy = copy_task(db_url, table_name="events", rows=rows, columns=[], reflect=True)

    assert build(Copy()).status == luigi.LuigiStatusCode.SUCCESS

    assert query(db_url, "SELECT id, kind, weight FROM events ORDER BY id") == rows


def test_rows_are_inserted_in_chunks_of_chunk_size(db_url):
    chunks: list[int] = []

    class ChunkedCopy(copy_task(db_url, rows=[(f"n{i}", i) for i in range(10)], chunk_size=3)):
        def copy(self, conn, ins_rows, table_bound):
            chunks.append(len(ins_rows))
            super().copy(conn, ins_rows, table_bound)

    assert build(ChunkedCopy()).status == luigi.LuigiStatusCode.SUCCESS

    assert chunks == [3, 3, 3, 1]
    assert query(db_url, "SELECT count(*), sum(value) FROM scores") == [(10, 45)]


def test_rerunning_a_finished_copy_is_a_no_op(db_url):
    calls = []

    class CountedCopy(copy_task(db_url)):
        def rows(self):
            calls.append(1)
            yield from ROWS

    assert build(CountedCopy()).status == luigi.LuigiStatusCode.SUCCESS
    second = build(CountedCopy())
    CountedCopy().run()  # even run() itself sees the marker inside its transaction

    assert second.status == luigi.LuigiStatusCode.SUCCESS
    assert "1 complete ones were encountered" in second.summary_text
    assert len(calls) == 1
    assert query(db_url, "SELECT count(*) FROM scores") == [(3,)]
    assert query(db_url, "SELECT count(*) FROM table_updates") == [(1,)]


def test_each_parameter_set_is_its_own_copy(sqlite_url):
    class DailyCopy(copy_task(sqlite_url)):
        day = luigi.IntParameter()

        def rows(self):
            yield (f"day{self.day}", self.day)

    assert build(DailyCopy(day=1), DailyCopy(day=2)).status == luigi.LuigiStatusCode.SUCCESS

    assert query(sqlite_url, "SELECT name FROM scores ORDER BY value") == [("day1",), ("day2",)]
    markers = {row[0] for row in query(sqlite_url, "SELECT update_id FROM table_updates")}
    assert markers == {DailyCopy(day=1).task_id, DailyCopy(day=2).task_id}


def test_default_rows_read_the_input_file_split_by_column_separator(tmp_path, sqlite_url):
    source = tmp_path / "scores.csv"
    source.write_text("alpha,1\nbeta,2\n")

    class Scores(luigi.ExternalTask):
        def output(self):
            return luigi.LocalTarget(str(source))

    class CopyCsv(CopyToTable):
        connection_string = sqlite_url
        table = "scores"
        columns = NAME_VALUE
        column_separator = ","

        def requires(self):
            return Scores()

    assert build(CopyCsv()).status == luigi.LuigiStatusCode.SUCCESS

    assert query(sqlite_url, "SELECT name, value FROM scores ORDER BY value") == [("alpha", 1), ("beta", 2)]


def test_the_marker_table_name_comes_from_the_sqlalchemy_section(sqlite_url):
    luigi.configuration.get_config().set("sqlalchemy", "marker_table", "copies_done")
    task = copy_task(sqlite_url)()

    assert build(task).status == luigi.LuigiStatusCode.SUCCESS

    assert query(sqlite_url, "SELECT update_id FROM copies_done") == [(task.task_id,)]
    assert not has_table(sqlite_url, "table_updates")


def test_a_schema_qualified_table_lands_in_that_schema(postgres_url):
    execute(postgres_url, "CREATE SCHEMA IF NOT EXISTS sqla_reports")
    try:
        assert build(copy_task(postgres_url, table_name="sqla_reports.scores")()).scheduling_succeeded
        assert query(postgres_url, "SELECT count(*) FROM sqla_reports.scores") == [(3,)]
    finally:
        _dispose_cached_engine(postgres_url)
        execute(postgres_url, "DROP SCHEMA sqla_reports CASCADE")


@pytest.mark.parametrize(("hidden", "expected"), [("psycopg", "psycopg2"), ("psycopg2", "psycopg")])
def test_a_plain_postgresql_url_uses_psycopg2_else_psycopg3(postgres_url, monkeypatch, hidden, expected):
    pytest.importorskip(expected)
    monkeypatch.setitem(sys.modules, hidden, None)  # only the other driver is installed
    plain = make_url(postgres_url).set(drivername="postgresql").render_as_string(hide_password=False)
    try:
        task = copy_task(plain)()

        assert build(task).status == luigi.LuigiStatusCode.SUCCESS

        engine = SQLAlchemyTarget(plain, "scores", "any").engine
        assert engine.dialect.driver == expected
        with engine.connect() as conn:
            rows = conn.execute(sqlalchemy.text("SELECT name, value FROM scores ORDER BY value"))
            assert [tuple(row) for row in rows] == ROWS
        assert task.complete()
    finally:
        _dispose_cached_engine(plain)


def test_copies_run_in_forked_worker_processes(postgres_url):
    class CopyFromChild(copy_task(postgres_url)):
        name = luigi.Parameter()

        def rows(self):
            yield (self.name, os.getpid())

    tasks = [CopyFromChild(name=f"task{i}") for i in range(3)]
    result = luigi.build(tasks, local_scheduler=True, workers=2, detailed_summary=True)

    assert result.status == luigi.LuigiStatusCode.SUCCESS
    pids = {value for _, value in query(postgres_url, "SELECT name, value FROM scores")}
    assert len(query(postgres_url, "SELECT * FROM scores")) == 3
    assert os.getpid() not in pids
    assert all(task.complete() for task in tasks)


def test_a_forked_child_gets_its_own_engine_and_leaves_the_parents_connections_alone(postgres_url):
    target = SQLAlchemyTarget(postgres_url, "scores", "update-1")
    target.touch()
    parent_engine = target.engine
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report whether it reused the parent's engine, and whether its own works
        try:
            answer = (target.engine is parent_engine, target.exists())
            os.write(write, pickle.dumps(answer))
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        reused, child_saw_marker = pickle.loads(pipe.read())
    os.waitpid(pid, 0)

    assert (reused, child_saw_marker) == (False, True)
    assert target.engine is parent_engine
    assert target.exists()  # the parent's pooled connection still works


def test_engines_are_shared_per_connection_settings_and_use_connect_args(postgres_url):
    first = SQLAlchemyTarget(postgres_url, "a", "1", connect_args={"application_name": "luigi-sqla"})
    second = SQLAlchemyTarget(postgres_url, "b", "2", connect_args={"application_name": "luigi-sqla"})
    plain = SQLAlchemyTarget(postgres_url, "a", "1")

    assert first.engine is second.engine
    assert plain.engine is not first.engine
    with first.engine.connect() as conn:
        name = conn.execute(sqlalchemy.text("SELECT current_setting('application_name')")).scalar()
    assert name == "luigi-sqla"
    first.engine.dispose()


def test_touch_and_exists_work_on_a_target_of_its_own(sqlite_url):
    target = SQLAlchemyTarget(sqlite_url, "reports", "reports-2024-01-01")

    assert not target.exists()
    assert not has_table(sqlite_url, "table_updates")  # checking does not create anything
    target.touch()
    target.touch()  # refreshes the time, no duplicate
    assert target.exists()
    assert query(sqlite_url, "SELECT update_id, target_table FROM table_updates") == [
        ("reports-2024-01-01", "reports")
    ]
    with pytest.raises(NotImplementedError, match="cannot be open"):
        target.open("r")


# -- failures ---------------------------------------------------------------------------------------------


def test_a_rows_generator_failing_half_way_leaves_neither_rows_nor_marker(db_url, events):
    _, listen = events
    listen(Event.FAILURE)

    def broken_rows():
        for number in range(7):
            yield (f"n{number}", number)
        raise OSError("source file truncated")

    Copy = copy_task(db_url, rows=broken_rows(), chunk_size=2)

    result = build(Copy())

    assert result.status == luigi.LuigiStatusCode.FAILED
    [error] = failures(events)
    assert isinstance(error, OSError) and str(error) == "source file truncated"
    assert query(db_url, "SELECT count(*) FROM scores") == [(0,)]
    assert query(db_url, "SELECT count(*) FROM table_updates") == [(0,)]
    assert not Copy().complete()

    Copy.rows = lambda self: iter(ROWS)
    assert build(Copy()).status == luigi.LuigiStatusCode.SUCCESS
    assert query(db_url, "SELECT count(*) FROM scores") == [(3,)]


def test_an_existing_table_with_other_columns_fails_naming_the_table(db_url, events):
    _, listen = events
    listen(Event.FAILURE)
    execute(
        db_url,
        "CREATE TABLE scores (label VARCHAR(10), amount INTEGER)",
        "INSERT INTO scores VALUES ('x', 9)",
    )

    result = build(copy_task(db_url)())

    assert result.status == luigi.LuigiStatusCode.FAILED
    [error] = failures(events)
    assert isinstance(error, TableDefinitionError)
    assert "Table 'scores'" in str(error)
    assert "label, amount" in str(error) and "lack the declared name, value" in str(error)
    assert query(db_url, "SELECT * FROM scores") == [("x", 9)]
    assert not has_table(db_url, "table_updates")


def test_a_row_with_the_wrong_number_of_values_fails_and_nothing_is_kept(sqlite_url, events):
    _, listen = events
    listen(Event.FAILURE)
    Copy = copy_task(sqlite_url, rows=[("alpha", 1), ("beta", 2, "extra")])

    assert build(Copy()).status == luigi.LuigiStatusCode.FAILED

    [error] = failures(events)
    assert isinstance(error, RowShapeError)
    assert "Row 2 for table 'scores' has 3 values, but the table has 2 columns (name, value)" in str(error)
    assert query(sqlite_url, "SELECT count(*) FROM scores") == [(0,)]


def test_a_row_the_database_refuses_rolls_back_the_whole_copy(db_url, events):
    _, listen = events
    listen(Event.FAILURE)
    rows = [("alpha", 1), ("beta", 2), ("alpha", 3)]  # name is the primary key

    assert build(copy_task(db_url, rows=rows, chunk_size=2)()).status == luigi.LuigiStatusCode.FAILED

    [error] = failures(events)
    assert isinstance(error, CopyFailedError)
    assert "Inserting rows 3-3 into table 'scores'" in str(error) and "rolled back" in str(error)
    assert query(db_url, "SELECT count(*) FROM scores") == [(0,)]
    assert query(db_url, "SELECT count(*) FROM table_updates") == [(0,)]


def test_reflect_without_the_table_fails_saying_to_create_it(sqlite_url, events):
    _, listen = events
    listen(Event.FAILURE)

    assert (
        build(copy_task(sqlite_url, table_name="events", reflect=True)()).status
        == luigi.LuigiStatusCode.FAILED
    )

    [error] = failures(events)
    assert isinstance(error, TableDefinitionError)
    assert "reflect = True but table 'events' does not exist" in str(error)


def test_no_columns_and_no_reflect_is_not_implemented(sqlite_url, events):
    _, listen = events
    listen(Event.FAILURE)

    assert build(copy_task(sqlite_url, columns=[])()).status == luigi.LuigiStatusCode.FAILED

    [error] = failures(events)
    assert isinstance(error, NotImplementedError) and "declares no columns for table 'scores'" in str(error)


def test_a_wrong_password_fails_clearly_without_showing_the_password(postgres_url, caplog):
    url = sqlalchemy.make_url(postgres_url).set(password=WRONG_PASSWORD)
    text_url = url.render_as_string(hide_password=False)
    Copy = copy_task(text_url)
    caplog.set_level(logging.DEBUG)

    result = build(Copy())

    assert result.status == luigi.LuigiStatusCode.SCHEDULING_FAILED
    assert "password authentication failed" in caplog.text
    assert "Cannot connect to postgresql+psycopg://luigi_test:***@127.0.0.1" in caplog.text
    assert "for table 'scores'" in caplog.text
    with pytest.raises(DatabaseConnectionError) as raised:
        Copy().output().exists()
    everything = [caplog.text, str(raised.value), repr(raised.value), repr(Copy().output()), Copy().task_id]
    assert not [shown for shown in everything if WRONG_PASSWORD in shown]
    assert not query(postgres_url, "SELECT 1 FROM pg_tables WHERE tablename = 'scores'")


def test_a_refused_connection_fails_naming_the_server_and_the_table():
    require_module("psycopg", "postgres")
    port = free_port()
    target = SQLAlchemyTarget(
        f"postgresql+psycopg://someone:{WRONG_PASSWORD}@127.0.0.1:{port}/db", "scores", "u1"
    )

    with pytest.raises(DatabaseConnectionError) as raised:
        target.touch()

    message = str(raised.value)
    assert (
        f"Cannot connect to postgresql+psycopg://someone:***@127.0.0.1:{port}/db for table 'scores'"
        in message
    )
    assert "refused" in message.lower() and WRONG_PASSWORD not in message
    assert WRONG_PASSWORD not in repr(target)


def test_echo_logs_the_statements_but_never_the_password(postgres_url, caplog):
    caplog.set_level(logging.INFO, logger="sqlalchemy.engine")

    assert build(copy_task(postgres_url, echo=True)()).status == luigi.LuigiStatusCode.SUCCESS

    assert "INSERT INTO scores" in caplog.text
    password = sqlalchemy.make_url(postgres_url).password
    assert f":{password}@" not in caplog.text


def test_a_sqlite_file_in_a_missing_folder_fails_naming_the_file(tmp_path):
    target = SQLAlchemyTarget(f"sqlite:///{tmp_path / 'missing' / 'copies.db'}", "scores", "u1")

    with pytest.raises(DatabaseConnectionError, match="folder exists") as raised:
        target.exists()

    assert f"{tmp_path / 'missing' / 'copies.db'} for table 'scores'" in str(raised.value)


def test_a_table_the_database_refuses_to_create_fails_naming_it(tmp_path, events):
    _, listen = events
    listen(Event.FAILURE)
    path = tmp_path / "readonly.db"
    execute(f"sqlite:///{path}", "CREATE TABLE other (x INTEGER)")
    read_only = f"sqlite:///file:{path}?mode=ro&uri=true"

    assert build(copy_task(read_only)()).status == luigi.LuigiStatusCode.FAILED

    [error] = failures(events)
    assert isinstance(error, TableCreationError)
    assert "Creating table 'scores'" in str(error) and "readonly database" in str(error)
    assert not has_table(f"sqlite:///{path}", "scores")
