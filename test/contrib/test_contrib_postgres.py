"""luigi.contrib.postgres against a real PostgreSQL server (scripts/start-postgres.sh), through luigi.build.

Every test works in a schema of its own: tables are ``<schema>.name`` and the marker table is
``<schema>.table_updates`` (``[postgres] marker_table``), so tests never see each other's rows.
"""

from __future__ import annotations

import logging
import sys
from typing import Any
from unittest import mock

import pytest
from helpers.patched_driver import exists_through_patched_connect, last_query
from helpers.pg_server import PgServer, ServerSettings

import luigi
from luigi import Event, LuigiStatusCode
from luigi.contrib import postgres
from luigi.contrib.optional import MissingExtraError
from luigi.contrib.rdbms import DatabaseConnectionError, QueryError, TableCopyError

pytestmark = pytest.mark.postgres
pytest_plugins = ["helpers.pg_server"]  # its fixture pg

WRONG_PASSWORD = "not-the-password-7f3a"


def _schema() -> str:
    return luigi.configuration.get_config().get("postgres", "marker_table").split(".")[0]


class Scores(ServerSettings, postgres.CopyToTable):
    """Loads a few rows (with awkward characters and a NULL) into <schema>.scores, creating the table."""

    day = luigi.Parameter()
    columns = [("name", "TEXT"), ("score", "INT")]
    runs: list[str] = []

    @property
    def table(self) -> str:
        return f"{_schema()}.scores"

    def rows(self):
        type(self).runs.append(self.day)
        yield ("plain", 1)
        yield ("tab\there, newline\nthere, back\\slash", 2)
        yield ("\\N", None)
        yield (None, 4)
        yield ("\t\n\r\\N", 5)


class FailingHalfway(Scores):
    """Yields two good rows, then raises: nothing may reach the table."""

    def rows(self):
        yield ("first", 1)
        yield ("second", 2)
        raise RuntimeError("upstream file is truncated")


class BadValue(Scores):
    """The database rejects the second row ('many' is not an INT) during the COPY."""

    def rows(self):
        yield ("first", 1)
        yield ("second", "many")


class CommaSeparated(Scores):
    column_separator = ","

    def rows(self):
        yield ("a,b", 1)
        yield ("c", None)


class CountScores(ServerSettings, postgres.PostgresQuery):
    """Writes a summary of <schema>.scores into <schema>.score_count."""

    day = luigi.Parameter()

    @property
    def table(self) -> str:
        return f"{_schema()}.score_count"

    @property
    def query(self) -> str:
        return f"CREATE TABLE {self.table} AS SELECT count(*) AS n FROM {_schema()}.scores"


class BrokenQuery(CountScores):
    @property
    def query(self) -> str:
        return f"INSERT INTO {self.table} SELECT 1; SELECT no_such_column FROM {_schema()}.scores"


@pytest.fixture
def failures(events) -> list[tuple[Any, BaseException]]:
    seen, listen = events
    listen(Event.FAILURE)
    yield seen


def _exceptions(failures) -> list[BaseException]:
    return [args[1] for _, args in failures]


def test_copy_loads_rows_escaped_with_nulls_and_marks_the_update(pg: PgServer) -> None:
    task = Scores(day="2024-01-01")

    assert luigi.build([task], local_scheduler=True) is True

    rows = pg.query(f"SELECT name, score FROM {pg.schema}.scores ORDER BY score NULLS LAST")
    assert rows == [
        ("plain", 1),
        ("tab\there, newline\nthere, back\\slash", 2),
        (None, 4),
        ("\t\n\r\\N", 5),
        (None, None),  # a value that is literally \N loads as NULL, as in Luigi
    ]
    assert pg.markers() == [(task.task_id, f"{pg.schema}.scores")]
    inserted = pg.query(f"SELECT inserted FROM {pg.schema}.table_updates")[0][0]
    assert inserted is not None


def test_rerunning_a_finished_copy_is_a_no_op(pg: PgServer) -> None:
    Scores.runs = []
    assert luigi.build([Scores(day="d1")], local_scheduler=True) is True

    result = luigi.build([Scores(day="d1")], local_scheduler=True, detailed_summary=True)

    assert result.status == LuigiStatusCode.SUCCESS
    assert Scores.runs == ["d1"]
    assert pg.query(f"SELECT count(*) FROM {pg.schema}.scores") == [(5,)]
    assert len(pg.markers()) == 1


def test_each_parameter_value_is_its_own_update(pg: PgServer) -> None:
    assert luigi.build([Scores(day="d1"), Scores(day="d2")], local_scheduler=True) is True

    assert pg.query(f"SELECT count(*) FROM {pg.schema}.scores") == [(10,)]
    assert len(pg.markers()) == 2


def test_rows_failing_half_way_leave_no_rows_no_table_and_no_marker(pg: PgServer, failures) -> None:
    assert luigi.build([FailingHalfway(day="d")], local_scheduler=True) is False

    assert [str(exc) for exc in _exceptions(failures)] == ["upstream file is truncated"]
    assert not pg.table_exists("scores")
    assert pg.markers() == []


def test_rows_failing_half_way_leave_an_existing_table_untouched(pg: PgServer) -> None:
    pg.execute(f"CREATE TABLE {pg.schema}.scores (name TEXT, score INT)")
    pg.execute(f"INSERT INTO {pg.schema}.scores VALUES ('old', 0)")

    assert luigi.build([FailingHalfway(day="d")], local_scheduler=True) is False

    assert pg.query(f"SELECT name, score FROM {pg.schema}.scores") == [("old", 0)]
    assert pg.markers() == []


def test_a_row_the_database_rejects_rolls_back_the_created_table(pg: PgServer, failures) -> None:
    assert luigi.build([BadValue(day="d")], local_scheduler=True) is False

    (error,) = _exceptions(failures)
    assert isinstance(error, TableCopyError)
    assert f"{pg.schema}.scores" in str(error)
    assert "many" in str(error)
    assert not pg.table_exists("scores")
    assert pg.markers() == []


def test_a_table_with_other_columns_gives_one_error_naming_the_table(pg: PgServer, failures) -> None:
    pg.execute(f"CREATE TABLE {pg.schema}.scores (player TEXT, points INT)")

    assert luigi.build([Scores(day="d")], local_scheduler=True) is False

    (error,) = _exceptions(failures)
    assert isinstance(error, TableCopyError)
    message = str(error)
    assert f"table '{pg.schema}.scores'" in message
    assert "['player', 'points']" in message and "['name', 'score']" in message
    assert error.__cause__ is None and error.__context__ is None
    assert pg.query(f"SELECT count(*) FROM {pg.schema}.scores") == [(0,)]
    assert pg.markers() == []


def test_a_row_of_the_wrong_width_goes_to_the_server_which_refuses_it_and_nothing_is_written(
    pg: PgServer, failures
) -> None:
    class Ragged(Scores):
        def rows(self):
            yield ("ok", 1)
            yield ("too", 2, "many")

    assert luigi.build([Ragged(day="d")], local_scheduler=True) is False

    (error,) = _exceptions(failures)
    assert "extra data after last expected column" in str(error) and f"{pg.schema}.scores" in str(error)
    assert not pg.table_exists("scores")
    assert pg.markers() == []


def test_rows_may_be_any_iterable_as_in_luigi(pg: PgServer) -> None:
    class OneColumn(Scores):
        columns = [("name", "TEXT")]

        def rows(self):
            return ["x", iter(["yz"])]  # a string row is its characters, as in Luigi: "x" is one value

    assert luigi.build([OneColumn(day="d")], local_scheduler=True) is True
    assert pg.query(f"SELECT name FROM {pg.schema}.scores ORDER BY name") == [("x",), ("yz",)]


def test_a_custom_column_separator_is_escaped_inside_values(pg: PgServer) -> None:
    assert luigi.build([CommaSeparated(day="d")], local_scheduler=True) is True

    assert pg.query(f"SELECT name, score FROM {pg.schema}.scores ORDER BY name") == [("a,b", 1), ("c", None)]


def test_client_side_timestamps_when_use_db_timestamps_is_off(pg: PgServer) -> None:
    luigi.configuration.get_config().set("postgres", "use_db_timestamps", "false")

    assert luigi.build([Scores(day="d")], local_scheduler=True) is True

    default = pg.query(
        "SELECT column_default FROM information_schema.columns "
        "WHERE table_schema = %s AND table_name = 'table_updates' AND column_name = 'inserted'",
        (pg.schema,),
    )
    assert default == [(None,)]
    assert pg.query(f"SELECT inserted IS NOT NULL FROM {pg.schema}.table_updates") == [(True,)]


def test_rows_are_staged_in_the_configured_local_tmp_dir(pg: PgServer, tmp_path, failures) -> None:
    missing = tmp_path / "no-such-dir"
    luigi.configuration.get_config().set("postgres", "local_tmp_dir", str(missing))

    assert luigi.build([Scores(day="d")], local_scheduler=True) is False

    (error,) = _exceptions(failures)
    assert isinstance(error, FileNotFoundError) and str(missing) in str(error)
    missing.mkdir()
    assert luigi.build([Scores(day="d")], local_scheduler=True) is True


def test_wrong_password_fails_naming_host_and_database_but_not_the_password(
    pg: PgServer, caplog: pytest.LogCaptureFixture
) -> None:
    pg.configure(password=WRONG_PASSWORD)
    task = Scores(day="d")

    with caplog.at_level(logging.DEBUG):
        assert luigi.build([task], local_scheduler=True) is False

    with pytest.raises(DatabaseConnectionError) as raised:
        task.complete()
    message = str(raised.value)
    assert f"'{pg.database}' at {pg.host}:{pg.port}" in message
    assert "password authentication failed" in message
    assert message in caplog.text
    for text in (message, caplog.text, repr(task.output()), str(task.output()), task.task_id):
        assert WRONG_PASSWORD not in text
    assert not pg.table_exists("scores")


def test_refused_connection_names_the_server(pg: PgServer, failures) -> None:
    from helpers.luigid import free_port

    port = free_port()
    pg.configure(port=port)

    with pytest.raises(DatabaseConnectionError, match=f"at {pg.host}:{port}.*refused"):
        Scores(day="d").output().exists()
    assert luigi.build([Scores(day="d")], local_scheduler=True) is False


def test_query_runs_once_with_its_marker(pg: PgServer) -> None:
    assert luigi.build([Scores(day="d")], local_scheduler=True) is True

    assert luigi.build([CountScores(day="d")], local_scheduler=True) is True
    assert luigi.build([CountScores(day="d")], local_scheduler=True) is True

    assert pg.query(f"SELECT n FROM {pg.schema}.score_count") == [(5,)]
    assert [m[1] for m in pg.markers()] == [f"{pg.schema}.score_count", f"{pg.schema}.scores"]


def test_a_failing_query_is_rolled_back_without_marker(pg: PgServer, failures) -> None:
    pg.execute(f"CREATE TABLE {pg.schema}.scores (name TEXT); CREATE TABLE {pg.schema}.score_count (n INT)")

    assert luigi.build([BrokenQuery(day="d")], local_scheduler=True) is False

    (error,) = _exceptions(failures)
    assert isinstance(error, QueryError)
    assert "no_such_column" in str(error) and f"'{pg.database}'" in str(error)
    assert pg.query(f"SELECT count(*) FROM {pg.schema}.score_count") == [(0,)]
    assert pg.markers() == []


def test_exists_on_a_callers_connection_keeps_its_transaction_usable(pg: PgServer) -> None:
    target = Scores(day="d").output()
    connection = target.connect()
    try:
        assert target.exists(connection) is False
        cursor = connection.cursor()
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)
        target.touch(connection)
        assert target.exists(connection) is True
        connection.commit()
    finally:
        connection.close()
    assert target.exists() is True


def test_host_with_port_suffix_and_repr_without_password(pg: PgServer) -> None:
    target = postgres.PostgresTarget(f"{pg.host}:{pg.port}", pg.database, pg.user, pg.password, "t", "u-1")
    secret = postgres.PostgresTarget(pg.host, pg.database, pg.user, "hunter2-secret", "t", "u-1")

    assert (target.host, target.port) == (pg.host, str(pg.port))  # kept as the string it was, as in Luigi
    assert target.exists() is False
    assert "hunter2-secret" not in repr(secret) + str(secret)
    assert f"database='{pg.database}'" in repr(secret)


def test_psycopg2_is_the_driver_when_installed_as_in_luigi(pg: PgServer) -> None:
    psycopg2 = pytest.importorskip("psycopg2")
    assert postgres.driver().module is psycopg2

    assert luigi.build([Scores(day="d2")], local_scheduler=True) is True

    assert pg.query(f"SELECT count(*) FROM {pg.schema}.scores") == [(5,)]


def test_a_patched_psycopg2_connect_is_the_connection_the_target_uses() -> None:
    pytest.importorskip("psycopg2")
    target = postgres.PostgresTarget("db.example", "warehouse", "loader", "pw", "scores", "u-1", port=6543)

    connect, answers = exists_through_patched_connect(target, "psycopg2.connect")

    assert answers == [True, False]
    connect.assert_called_with(
        host="db.example", port=6543, database="warehouse", user="loader", password="pw"
    )
    query, params = last_query(connect)
    assert query.startswith("SELECT 1 FROM table_updates") and params == ("u-1",)


def test_a_patched_psycopg2_connect_receives_the_query_and_its_commit() -> None:
    pytest.importorskip("psycopg2")

    class Vacuum(postgres.PostgresQuery):
        host, database, user, password, table = "db.example", "warehouse", "loader", "pw", "scores"
        query = "VACUUM scores"

    with mock.patch("psycopg2.connect") as connect:
        connect.return_value.cursor.return_value.fetchone.return_value = None  # no marker row yet
        assert luigi.build([Vacuum()], local_scheduler=True) is True

    connection = connect.return_value
    assert mock.call("VACUUM scores") in connection.cursor.return_value.execute.call_args_list
    connection.commit.assert_called_once_with()


def test_psycopg3_is_the_fallback_when_psycopg2_is_absent(pg: PgServer, monkeypatch, failures) -> None:
    psycopg = pytest.importorskip("psycopg")
    monkeypatch.setitem(sys.modules, "psycopg2", None)
    assert postgres.driver().module is psycopg

    assert luigi.build([Scores(day="d2")], local_scheduler=True) is True
    assert luigi.build([CountScores(day="d2")], local_scheduler=True) is True
    assert luigi.build([BadValue(day="d")], local_scheduler=True) is False

    assert pg.query(f"SELECT count(*) FROM {pg.schema}.scores") == [(5,)]
    assert pg.query(f"SELECT n FROM {pg.schema}.score_count") == [(5,)]
    assert len(pg.markers()) == 2
    assert isinstance(_exceptions(failures)[0], TableCopyError)


def test_no_driver_installed_names_the_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    monkeypatch.setitem(sys.modules, "psycopg2", None)
    target = postgres.PostgresTarget("127.0.0.1", "db", "u", "p", "t", "id")

    with pytest.raises(MissingExtraError, match=r"luigi\[postgres\]"):
        target.exists()


def test_multi_replacer_replaces_in_one_pass() -> None:
    replace = postgres.MultiReplacer([("a", "b"), ("b", "a"), ("\\", "\\\\")])

    assert replace("ab\\") == "ba\\\\"
    assert postgres.default_escape("x\ty\n") == "x\\ty\\n"


def test_the_marker_table_has_luigis_columns(pg: PgServer) -> None:
    assert luigi.build([Scores(day="d")], local_scheduler=True) is True

    columns = pg.query(
        "SELECT column_name, data_type, column_default FROM information_schema.columns "
        "WHERE table_schema = %s AND table_name = 'table_updates' ORDER BY ordinal_position",
        (pg.schema,),
    )
    assert columns == [
        ("update_id", "text", None),
        ("target_table", "text", None),
        ("inserted", "timestamp without time zone", "now()"),
    ]
    primary_key = pg.query(
        "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
        "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s::regclass AND i.indisprimary",
        (f"{pg.schema}.table_updates",),
    )
    assert primary_key == [("update_id",)]


class DummyCopy(postgres.CopyToTable):
    """The shape of task Luigi's own tests run with psycopg2.connect patched."""

    host, database, user, password = "dummy_host:1234", "dummy_database", "dummy_user", "dummy_password"
    table = "dummy_table"
    columns = (("some_text", "text"), ("some_int", "int"))

    def rows(self):
        return ["row1", "row2"]  # strings: each is its characters, as in Luigi


@pytest.mark.parametrize("enabled", [True, False])
def test_metadata_hooks_run_only_when_enabled_with_psycopg2_connect_patched(enabled: bool) -> None:
    pytest.importorskip("psycopg2")
    task = DummyCopy()
    with (
        mock.patch("psycopg2.connect") as connect,
        mock.patch.object(DummyCopy, "enable_metadata_columns", new=enabled),
        mock.patch.object(DummyCopy, "_add_metadata_columns") as add_columns,
        mock.patch.object(DummyCopy, "post_copy_metacolumns") as fill_columns,
    ):
        task.run()

    assert (add_columns.called, fill_columns.called) == (enabled, enabled)
    assert task.output().port == "1234"
    assert connect.call_args.kwargs["port"] == "1234"
    copy_sql = connect.return_value.cursor.return_value.copy_expert.call_args.args[0]
    assert copy_sql == (
        "COPY dummy_table (some_text, some_int) FROM STDIN WITH (FORMAT text, NULL '\\\\N', DELIMITER '\t')"
    )
