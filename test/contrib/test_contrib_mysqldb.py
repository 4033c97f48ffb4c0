"""luigi.contrib.mysqldb against a real MariaDB server (test/helpers/mariadb_server.py), via luigi.build."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from helpers.luigid import free_port
from helpers.mariadb_server import MariaDB, mariadb_server  # noqa: F401 - a fixture
from helpers.patched_driver import exists_through_patched_connect, last_query

import luigi
from luigi import Event, LuigiStatusCode
from luigi.contrib import mysqldb
from luigi.contrib.optional import MissingExtraError
from luigi.contrib.rdbms import DatabaseConnectionError, TableCopyError

WRONG_PASSWORD = "not-the-password-91c2"


class Database:
    """The test's own database on the server, and what the tasks are pointed at."""

    def __init__(self, server: MariaDB, name: str) -> None:
        self.server = server
        self.name = name

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        return self.server.query(sql, params, database=self.name)

    def table_exists(self, table: str) -> bool:
        return bool(
            self.query(
                "SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND table_name = %s",
                (self.name, table),
            )
        )

    def markers(self) -> list[tuple]:
        if not self.table_exists("table_updates"):
            return []
        return self.query("SELECT update_id, target_table FROM table_updates ORDER BY update_id")

    def configure(self, password: str | None = None, port: int | None = None) -> None:
        config = luigi.configuration.get_config()
        config.set("mysql_test", "host", self.server.host)
        config.set("mysql_test", "port", str(port or self.server.port))
        config.set("mysql_test", "database", self.name)
        config.set("mysql_test", "user", self.server.user)
        config.set("mysql_test", "password", password or self.server.password)


@pytest.fixture
def db(mariadb_server: MariaDB) -> Iterator[Database]:  # noqa: F811 - the fixture imported above
    with mariadb_server.fresh_database() as name:
        database = Database(mariadb_server, name)
        database.configure()
        yield database


def _setting(name: str) -> str:
    return luigi.configuration.get_config().get("mysql_test", name)


class ServerSettings:
    """Connection settings from config, as users keep them: not parameters, so never in task ids."""

    @property
    def host(self) -> str:
        return _setting("host")

    @property
    def port(self) -> int:
        return int(_setting("port"))

    @property
    def database(self) -> str:
        return _setting("database")

    @property
    def user(self) -> str:
        return _setting("user")

    @property
    def password(self) -> str:
        return _setting("password")


class Scores(ServerSettings, mysqldb.CopyToTable):
    """Inserts five rows (one NULL, some non-ASCII) into ``scores``, creating it."""

    day = luigi.Parameter()
    table = "scores"
    columns = [("name", "VARCHAR(64)"), ("score", "INT")]
    bulk_size = 2
    runs: list[str] = []

    def rows(self):
        type(self).runs.append(self.day)
        yield ("plain", 1)
        yield ("ünïcødé ✓", 2)
        yield ("quote ' and \\ backslash", 3)
        yield (None, 4)
        yield ("last", None)


class FailingHalfway(Scores):
    """Two batches of two rows reach the server, then rows() raises."""

    def rows(self):
        yield from [("a", 1), ("b", 2), ("c", 3), ("d", 4), ("e", 5)]
        raise RuntimeError("upstream file is truncated")


class NamesOnly(Scores):
    """Plain column names: the table must exist already."""

    columns = ["name", "score"]


@pytest.fixture
def failures(events) -> list[Any]:
    seen, listen = events
    listen(Event.FAILURE)
    yield seen


def _exceptions(failures) -> list[BaseException]:
    return [args[1] for _, args in failures]


def test_copy_inserts_rows_and_marks_the_update(db: Database) -> None:
    task = Scores(day="2024-01-01")

    assert luigi.build([task], local_scheduler=True) is True

    assert db.query("SELECT name, score FROM scores ORDER BY score IS NULL, score") == [
        ("plain", 1),
        ("ünïcødé ✓", 2),
        ("quote ' and \\ backslash", 3),
        (None, 4),
        ("last", None),
    ]
    assert db.markers() == [(task.task_id, "scores")]


def test_rerunning_a_finished_copy_is_a_no_op(db: Database) -> None:
    Scores.runs = []
    assert luigi.build([Scores(day="d1")], local_scheduler=True) is True

    result = luigi.build([Scores(day="d1")], local_scheduler=True, detailed_summary=True)

    assert result.status == LuigiStatusCode.SUCCESS
    assert Scores.runs == ["d1"]
    assert db.query("SELECT count(*) FROM scores") == [(5,)]


def test_rows_failing_after_some_batches_leave_nothing_and_drop_the_created_table(
    db: Database, failures
) -> None:
    assert luigi.build([FailingHalfway(day="d")], local_scheduler=True) is False

    assert [str(exc) for exc in _exceptions(failures)] == ["upstream file is truncated"]
    assert not db.table_exists("scores")
    assert db.markers() == []


def test_rows_failing_after_some_batches_leave_an_existing_table_as_it_was(db: Database) -> None:
    db.query("CREATE TABLE scores (name VARCHAR(64), score INT)")
    db.query("INSERT INTO scores VALUES ('old', 0)")

    assert luigi.build([FailingHalfway(day="d")], local_scheduler=True) is False

    assert db.query("SELECT name, score FROM scores") == [("old", 0)]
    assert db.markers() == []


def test_a_table_with_other_columns_gives_one_error_naming_the_table(db: Database, failures) -> None:
    db.query("CREATE TABLE scores (player VARCHAR(64), points INT)")

    assert luigi.build([Scores(day="d")], local_scheduler=True) is False

    (error,) = _exceptions(failures)
    assert isinstance(error, TableCopyError)
    message = str(error)
    assert f"table 'scores' of MySQL database '{db.name}'" in message
    assert "['player', 'points']" in message and "['name', 'score']" in message
    assert error.__cause__ is None and error.__context__ is None
    assert db.query("SELECT count(*) FROM scores") == [(0,)]
    assert db.markers() == []


def test_plain_column_names_load_into_an_existing_table(db: Database) -> None:
    db.query("CREATE TABLE scores (name VARCHAR(64), score INT, extra INT DEFAULT 7)")

    assert luigi.build([NamesOnly(day="d")], local_scheduler=True) is True

    assert db.query("SELECT count(*), min(extra) FROM scores") == [(5, 7)]


def test_plain_column_names_cannot_create_a_missing_table(db: Database, failures) -> None:
    assert luigi.build([NamesOnly(day="d")], local_scheduler=True) is False

    (error,) = _exceptions(failures)
    assert isinstance(error, NotImplementedError)
    assert "'scores' does not exist" in str(error)
    assert not db.table_exists("scores")


def test_wrong_password_fails_naming_host_and_database_but_not_the_password(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    db.configure(password=WRONG_PASSWORD)
    task = Scores(day="d")

    with caplog.at_level(logging.DEBUG):
        assert luigi.build([task], local_scheduler=True) is False

    with pytest.raises(DatabaseConnectionError) as raised:
        task.complete()
    message = str(raised.value)
    assert f"'{db.name}' at {db.server.host}:{db.server.port}" in message
    assert "Access denied" in message
    assert message in caplog.text
    for text in (message, caplog.text, repr(task.output()), str(task.output()), task.task_id):
        assert WRONG_PASSWORD not in text
    assert not db.table_exists("scores")


def test_refused_connection_names_the_server(db: Database) -> None:
    port = free_port()
    db.configure(port=port)

    with pytest.raises(DatabaseConnectionError, match=f"at 127.0.0.1:{port}"):
        Scores(day="d").output().exists()
    assert luigi.build([Scores(day="d")], local_scheduler=True) is False


def test_touch_and_exists_on_the_target(db: Database) -> None:
    target = mysqldb.MySqlTarget(
        f"{db.server.host}:{db.server.port}", db.name, db.server.user, db.server.password, "t", "u-1"
    )

    assert target.exists() is False
    target.touch()
    target.touch()  # touching twice keeps one marker row
    assert target.exists() is True
    assert db.markers() == [("u-1", "t")]
    assert db.server.password not in repr(target) + str(target)


def test_mysql_connector_is_the_driver_when_installed_as_in_luigi(db: Database) -> None:
    connector = pytest.importorskip("mysql.connector")
    assert mysqldb.driver().module is connector

    assert luigi.build([Scores(day="d")], local_scheduler=True) is True

    assert db.query("SELECT count(*) FROM scores") == [(5,)]


def test_a_patched_mysql_connector_connect_is_the_connection_the_target_uses() -> None:
    pytest.importorskip("mysql.connector")
    target = mysqldb.MySqlTarget("db.example:3307", "warehouse", "loader", "pw", "scores", "u-1")

    connect, answers = exists_through_patched_connect(target, "mysql.connector.connect")

    assert answers == [True, False]
    kwargs = connect.call_args.kwargs
    assert {k: kwargs[k] for k in ("host", "port", "database", "user", "password")} == {
        "host": "db.example",
        "port": 3307,
        "database": "warehouse",
        "user": "loader",
        "password": "pw",
    }
    query, params = last_query(connect)
    assert query.startswith("SELECT 1 FROM table_updates") and params == ("u-1",)


def test_pymysql_is_the_fallback_when_mysql_connector_is_absent(db: Database, monkeypatch) -> None:
    pymysql = pytest.importorskip("pymysql")
    monkeypatch.setitem(sys.modules, "mysql.connector", None)
    assert mysqldb.driver().module is pymysql

    assert luigi.build([Scores(day="d")], local_scheduler=True) is True
    assert luigi.build([FailingHalfway(day="other")], local_scheduler=True) is False

    assert db.query("SELECT count(*) FROM scores") == [(5,)]
    assert len(db.markers()) == 1


def test_no_driver_installed_names_the_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pymysql", None)
    monkeypatch.setitem(sys.modules, "mysql.connector", None)
    target = mysqldb.MySqlTarget("127.0.0.1", "db", "u", "p", "t", "id")

    with pytest.raises(MissingExtraError, match=r"luigi\[mysql\]"):
        target.exists()


def test_the_marker_table_has_luigis_columns(db: Database) -> None:
    assert luigi.build([Scores(day="d")], local_scheduler=True) is True

    columns = db.query(
        "SELECT column_name, column_type, is_nullable, column_key FROM information_schema.columns "
        "WHERE table_schema = %s AND table_name = 'table_updates' ORDER BY ordinal_position",
        (db.name,),
    )
    assert [
        (name, type_.split("(")[0] if name == "id" else type_, null, key)
        for name, type_, null, key in columns
    ] == [
        ("id", "bigint", "NO", "MUL"),
        ("update_id", "varchar(128)", "NO", "PRI"),
        ("target_table", "varchar(128)", "YES", ""),
        ("inserted", "timestamp", "YES", ""),
    ]


def test_an_existing_marker_table_is_kept(db: Database) -> None:
    target = mysqldb.MySqlTarget(
        f"{db.server.host}:{db.server.port}", db.name, db.server.user, db.server.password, "t", "u-1"
    )
    target.create_marker_table()
    target.create_marker_table()  # Luigi's CREATE TABLE, its "already exists" ignored
    target.touch()
    assert db.markers() == [("u-1", "t")]


def test_rows_go_to_the_server_as_given_and_a_port_in_host_is_an_int(db: Database, failures) -> None:
    class Ragged(Scores):
        def rows(self):
            yield ("ok", 1)
            yield ("too", 2, "many")  # not checked here, as in Luigi: the driver refuses it

    assert mysqldb.MySqlTarget("db.example:3307", "d", "u", "p", "t", "u").port == 3307
    assert luigi.build([Ragged(day="d")], local_scheduler=True) is False
    assert db.markers() == []
