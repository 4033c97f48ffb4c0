"""luigi.contrib.rdbms: the abstract bases, used the way a user writes a backend of their own.

The backend here is SQLite (the standard library's, a real database file): a ``CopyToTable`` whose
output is a marker row, run through ``luigi.build``.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import luigi
from luigi import Event
from luigi.contrib import rdbms
from luigi.contrib.postgres import PostgresTarget
from luigi.contrib.redshift import RedshiftTarget


class SqliteMarker(luigi.Target):
    """A marker row in the SQLite file, the way the real backends keep theirs."""

    def __init__(self, path: str, update_id: str) -> None:
        self.path, self.update_id = path, update_id

    def exists(self) -> bool:
        with sqlite3.connect(self.path) as connection:
            connection.execute("CREATE TABLE IF NOT EXISTS marker (update_id TEXT PRIMARY KEY)")
            found = connection.execute("SELECT 1 FROM marker WHERE update_id = ?", (self.update_id,))
            return found.fetchone() is not None

    def touch(self, connection: sqlite3.Connection) -> None:
        connection.execute("CREATE TABLE IF NOT EXISTS marker (update_id TEXT PRIMARY KEY)")
        connection.execute("INSERT INTO marker VALUES (?)", (self.update_id,))


class SqliteCopy(rdbms.CopyToTable):
    """A user's own backend on the abstract base: host is the database file."""

    host = database = user = password = ""
    table = "items"
    columns = [("name", "TEXT"), ("size", "INTEGER")]
    path = luigi.Parameter()
    calls: list[str] = []

    def output(self) -> SqliteMarker:
        return SqliteMarker(self.path, self.update_id)

    def rows(self):
        yield ("a", 1)
        yield ("b", 2)

    def init_copy(self, connection) -> None:
        type(self).calls.append("init_copy")
        super().init_copy(connection)

    def post_copy(self, connection) -> None:
        type(self).calls.append("post_copy")

    def copy(self, cursor, file) -> None:
        placeholders = ", ".join("?" for _ in self.columns)
        cursor.executemany(f"INSERT INTO {self.table} VALUES ({placeholders})", list(self.rows()))

    def run(self) -> None:
        self._check_declared()
        connection = sqlite3.connect(self.path)
        try:
            if not connection.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (self.table,)).fetchone():
                self.create_table(connection)
            self.init_copy(connection)
            self.copy(connection.cursor(), None)
            self.post_copy(connection)
            self.output().touch(connection)
            connection.commit()
        finally:
            connection.close()


def test_a_backend_of_ones_own_on_the_abstract_base(tmp_path: Path) -> None:
    SqliteCopy.calls = []
    database = str(tmp_path / "items.db")

    assert luigi.build([SqliteCopy(path=database)], local_scheduler=True) is True
    assert luigi.build([SqliteCopy(path=database)], local_scheduler=True) is True

    with sqlite3.connect(database) as connection:
        assert connection.execute("SELECT name, size FROM items ORDER BY name").fetchall() == [
            ("a", 1),
            ("b", 2),
        ]
    assert SqliteCopy.calls == ["init_copy", "post_copy"]


def test_create_table_without_column_types_says_how_to_fix(tmp_path: Path, events) -> None:
    class Untyped(SqliteCopy):
        columns = ["name", "size"]

    seen, listen = events
    listen(Event.FAILURE)

    assert luigi.build([Untyped(path=str(tmp_path / "x.db"))], local_scheduler=True) is False

    (error,) = [args[1] for _, args in seen]
    assert isinstance(error, NotImplementedError)
    assert "table 'items' does not exist" in str(error) and "(name, type) tuples" in str(error)


def test_a_task_without_table_or_columns_fails_naming_it(tmp_path: Path, events) -> None:
    class NoColumns(SqliteCopy):
        columns: list = []

    seen, listen = events
    listen(Event.FAILURE)

    assert luigi.build([NoColumns(path=str(tmp_path / "x.db"))], local_scheduler=True) is False

    (error,) = [args[1] for _, args in seen]
    assert "NoColumns" in str(error) and "table and columns need to be specified" in str(error)


def test_the_connection_settings_are_abstract() -> None:
    class Incomplete(rdbms.CopyToTable):
        def output(self):
            return None

        def copy(self, cursor, file):
            pass

    with pytest.raises(TypeError, match="abstract"):
        Incomplete()


def test_update_id_is_the_task_id(tmp_path: Path) -> None:
    task = SqliteCopy(path=str(tmp_path / "x.db"))

    assert task.update_id == task.task_id


def test_column_names_accept_names_and_tuples_and_reject_the_rest() -> None:
    assert rdbms.column_names(["a", ("b", "INT"), ["c", "TEXT", "lzo"]]) == ["a", "b", "c"]

    with pytest.raises(ValueError, match="columns must be names or"):
        rdbms.column_names([("a", "INT"), 3])


def test_marker_table_is_read_from_config_when_used_not_at_import() -> None:
    target = PostgresTarget("h", "db", "u", "p", "t", "id")
    assert target.marker_table == "table_updates"

    luigi.configuration.get_config().set("postgres", "marker_table", "etl.loads")
    luigi.configuration.get_config().set("redshift", "marker_table", "rs_loads")

    assert target.marker_table == "etl.loads"
    assert RedshiftTarget("h", "db", "u", "p", "t", "id").marker_table == "rs_loads"
    target.marker_table = "mine"
    assert target.marker_table == "mine"

    class Custom(PostgresTarget):
        marker_table = "custom_updates"

    assert Custom("h", "db", "u", "p", "t", "id").marker_table == "custom_updates"


def test_redact_hides_every_secret_longest_first() -> None:
    text = "key=AK1;secret=AK1-long-secret"

    assert rdbms.redact(text, ["AK1", "AK1-long-secret", None, ""]) == "key=<redacted>;secret=<redacted>"


def test_importing_the_modules_loads_no_driver() -> None:
    probe = (
        "import sys, luigi.contrib.postgres, luigi.contrib.mysqldb, luigi.contrib.redshift\n"
        "print(sorted(m for m in ('psycopg', 'psycopg2', 'pymysql', 'mysql', 'boto3') if m in sys.modules))"
    )

    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )

    assert done.stdout.strip() == "[]"
