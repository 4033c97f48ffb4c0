"""luigi.contrib.redshift: what PostgreSQL can run is run for real on the test server; the Redshift-only
statements (COPY from S3, UNLOAD) are checked as built, and run to their failure on PostgreSQL to prove
that the credentials they carry never reach an error message or a log line.
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
import uuid
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest
from helpers.pg_server import PgServer, ServerSettings, pg  # noqa: F401 - pg is a fixture
from helpers.s3_server import S3Server, s3_server  # noqa: F401 - a fixture

import luigi
from luigi import Event
from luigi.contrib import redshift
from luigi.contrib.rdbms import DatabaseConnectionError, QueryError, TableCopyError

pytestmark = pytest.mark.postgres

ACCESS_KEY = "AKIAEXAMPLEKEY42"
SECRET_KEY = "s3cr3t/Example+Secret-Key-0042"
SESSION_TOKEN = "FQoGZXIvYXdzEXAMPLETOKEN"


@pytest.fixture
def rs(pg: PgServer, tmp_path: Path) -> Iterator[PgServer]:  # noqa: F811 - the fixture imported above
    """The PostgreSQL test server standing in for Redshift: [redshift] marker table and credentials set."""
    config = luigi.configuration.get_config()
    config.set("redshift", "marker_table", f"{pg.schema}.table_updates")
    config.set("redshift", "aws_access_key_id", ACCESS_KEY)
    config.set("redshift", "aws_secret_access_key", SECRET_KEY)
    config.set("pg_test", "data_dir", str(tmp_path))
    yield pg
    pg.execute(f"DROP SCHEMA IF EXISTS {pg.schema}_new CASCADE")


@pytest.fixture
def failures(events) -> list:
    seen, listen = events
    listen(Event.FAILURE)
    yield seen


class ClusterSettings(ServerSettings):
    """The test server's settings, its port in ``host``: Luigi's Redshift classes take no ``port``."""

    @property
    def host(self) -> str:
        return f"{super().host}:{self.port}"


def _schema() -> str:
    marker_table = luigi.configuration.get_config().get("redshift", "marker_table", "public.table_updates")
    return marker_table.split(".")[0]


class Events(ClusterSettings, redshift.S3CopyToTable):
    """The real S3CopyToTable, into a table of a schema it creates."""

    day = luigi.Parameter()
    columns = [("name", "TEXT"), ("day", "DATE")]

    @property
    def table(self) -> str:
        return f"{_schema()}_new.events"

    def s3_load_path(self) -> str:
        return f"s3://data-bucket/events/{self.day}/"


class LocalEvents(Events):
    """Everything S3CopyToTable does, with the COPY from S3 replaced by one PostgreSQL can run."""

    do_truncate = False
    prune_old = False

    def s3_load_path(self) -> str:
        path = Path(luigi.configuration.get_config().get("pg_test", "data_dir")) / f"{self.day}.tsv"
        path.write_text(f"new\t{self.day}\nlater\t{self.day}\n")
        return str(path)

    def copy(self, cursor, f: str) -> None:
        with open(f, "rb") as rows:  # psycopg2's cursor: the driver luigi.contrib.redshift uses, as Luigi
            cursor.copy_expert(f"COPY {self.table} (name, day) FROM STDIN", rows)

    @property
    def queries(self) -> list[str]:
        return [f"UPDATE {self.table} SET name = upper(name) WHERE day = '{self.day}'"]

    @property
    def do_truncate_table(self) -> bool:
        return self.do_truncate

    @property
    def prune_table(self) -> str | None:
        return self.table if self.prune_old else None

    @property
    def prune_column(self) -> str | None:
        return "day" if self.prune_old else None

    @property
    def prune_date(self) -> str | None:
        return "'2024-01-02'" if self.prune_old else None  # written into the SQL as given: quoted


class LocalEventsWithMetadata(LocalEvents):
    enable_metadata_columns = True
    metadata_columns = [("loaded_by", "TEXT")]

    @property
    def metadata_queries(self) -> list[str]:
        return [f"UPDATE {self.table} SET loaded_by = 'luigi'"]


class ReplaceEvents(LocalEvents):
    do_truncate = True


class PruneEvents(LocalEvents):
    prune_old = True


class TruncatingEvents(Events):
    """The real COPY (which PostgreSQL rejects) after emptying the table."""

    @property
    def do_truncate_table(self) -> bool:
        return True


def _create_events_table(server: PgServer, *rows: tuple[str, str]) -> None:
    schema = f"{server.schema}_new"
    server.execute(f"CREATE SCHEMA {schema}; CREATE TABLE {schema}.events (name TEXT, day DATE)")
    for name, day in rows:
        server.execute(f"INSERT INTO {schema}.events VALUES ('{name}', '{day}')")


def _events(server: PgServer) -> list[tuple]:
    return server.query(f"SELECT name, day::text FROM {server.schema}_new.events ORDER BY day, name")


def test_load_creates_schema_and_table_runs_queries_and_marks_the_update(rs: PgServer) -> None:
    task = LocalEvents(day="2024-01-03")

    assert luigi.build([task], local_scheduler=True) is True
    assert luigi.build([task], local_scheduler=True) is True  # finished: not loaded again

    assert _events(rs) == [("LATER", "2024-01-03"), ("NEW", "2024-01-03")]
    assert rs.markers() == [(task.task_id, f"{rs.schema}_new.events")]
    assert rs.query(f"SELECT inserted IS NOT NULL FROM {rs.schema}.table_updates") == [(True,)]


def test_metadata_columns_are_added_and_filled(rs: PgServer) -> None:
    assert luigi.build([LocalEventsWithMetadata(day="2024-01-03")], local_scheduler=True) is True

    assert rs.query(f"SELECT DISTINCT loaded_by FROM {rs.schema}_new.events") == [("luigi",)]


def test_truncate_replaces_the_rows(rs: PgServer) -> None:
    _create_events_table(rs, ("old", "2024-01-01"))

    assert luigi.build([ReplaceEvents(day="2024-01-03")], local_scheduler=True) is True

    assert _events(rs) == [("LATER", "2024-01-03"), ("NEW", "2024-01-03")]


def test_prune_deletes_rows_from_the_prune_date_on_before_loading(rs: PgServer) -> None:
    _create_events_table(rs, ("kept", "2024-01-01"), ("reloaded", "2024-01-02"))

    assert luigi.build([PruneEvents(day="2024-01-03")], local_scheduler=True) is True

    assert _events(rs) == [("kept", "2024-01-01"), ("LATER", "2024-01-03"), ("NEW", "2024-01-03")]


def test_a_failed_copy_rolls_back_truncate_and_leaks_no_credentials(
    rs: PgServer, failures, caplog: pytest.LogCaptureFixture
) -> None:
    _create_events_table(rs, ("old", "2024-01-01"))
    luigi.configuration.get_config().set("redshift", "aws_session_token", SESSION_TOKEN)

    with caplog.at_level(logging.DEBUG):
        assert luigi.build([TruncatingEvents(day="2024-01-03")], local_scheduler=True) is False

    (error,) = [args[1] for _, args in failures]
    assert isinstance(error, TableCopyError)
    message = str(error)
    assert f"table '{rs.schema}_new.events'" in message and "s3://data-bucket/events/2024-01-03/" in message
    assert "syntax error" in message
    for secret in (SECRET_KEY, SESSION_TOKEN, ACCESS_KEY):
        assert secret not in message and secret not in caplog.text
    assert error.__context__ is None and error.__cause__ is None
    assert _events(rs) == [("old", "2024-01-01")]
    assert rs.markers() == []


def test_a_failed_first_load_leaves_no_schema_or_table(rs: PgServer, failures) -> None:
    assert luigi.build([Events(day="2024-01-03")], local_scheduler=True) is False

    assert isinstance(failures[0][1][1], TableCopyError)
    assert rs.query("SELECT 1 FROM pg_namespace WHERE nspname = %s", (f"{rs.schema}_new",)) == []
    assert rs.markers() == []


def test_copy_statement_carries_the_credentials_redshift_needs() -> None:
    task = Events(day="2024-01-03")
    config = luigi.configuration.get_config()
    config.set("redshift", "aws_access_key_id", ACCESS_KEY)
    config.set("redshift", "aws_secret_access_key", "secret")

    statement = task.copy_statement("s3://bucket/key")

    indent = "\n" + " " * 9
    assert statement == (
        f"{indent}COPY {task.table} (name,day) from 's3://bucket/key'"
        f"{indent}CREDENTIALS 'aws_access_key_id={ACCESS_KEY};aws_secret_access_key=secret'"
        f"{indent}{indent};"
    )


def test_an_iam_role_is_preferred_and_read_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("AWS_ACCOUNT_ID", "123456789012")
    monkeypatch.setenv("AWS_ARN_ROLE_NAME", "loader")
    luigi.configuration.get_config().set("redshift", "aws_secret_access_key", SECRET_KEY)

    class Options(Events):
        copy_options = "CSV GZIP"

    statement = Options(day="d").copy_statement("s3://b/k")

    assert statement.endswith(
        "CREDENTIALS 'aws_iam_role=arn:aws:iam::123456789012:role/loader'\n         CSV GZIP\n         ;"
    )
    assert SECRET_KEY not in statement


def test_json_copy_statement() -> None:
    class JsonEvents(ClusterSettings, redshift.S3CopyJSONToTable):
        table = "events"
        jsonpath = "auto"
        copy_json_options = "GZIP"
        aws_access_key_id = ACCESS_KEY
        aws_secret_access_key = SECRET_KEY

        def s3_load_path(self) -> str:
            return "s3://b/events.json"

    statement = JsonEvents().copy_statement("s3://b/events.json")

    indent = "\n" + " " * 9
    assert statement == (
        f"{indent}COPY events from 's3://b/events.json'"
        f"{indent}CREDENTIALS 'aws_access_key_id={ACCESS_KEY};aws_secret_access_key={SECRET_KEY}'"
        f"{indent}JSON AS 'auto' GZIP{indent}{indent};"
    )


def test_missing_credentials_name_the_settings_to_give(monkeypatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ACCOUNT_ID", "AWS_ARN_ROLE_NAME"):
        monkeypatch.delenv(name, raising=False)
    luigi.configuration.get_config().set("redshift", "aws_access_key_id", ACCESS_KEY)

    with pytest.raises(NotImplementedError, match="aws_secret_access_key") as raised:
        Events(day="d").copy_statement("s3://b/k")
    assert ACCESS_KEY not in str(raised.value)


class Unload(ClusterSettings, redshift.RedshiftUnloadTask):
    day = luigi.Parameter()
    s3_unload_path = "s3://exports/events/"

    @property
    def table(self) -> str:
        return f"{_schema()}.events"

    @property
    def query(self) -> str:
        return "SELECT 'a' as col_a, current_date as col_b"


def test_unload_statement_quotes_the_query_as_luigi_does(rs: PgServer) -> None:
    statement = Unload(day="d").unload_statement()

    assert statement == (
        "UNLOAD ( 'SELECT \\'a\\' as col_a, current_date as col_b' ) TO 's3://exports/events/' "
        f"credentials 'aws_access_key_id={ACCESS_KEY};aws_secret_access_key={SECRET_KEY}' "
        "DELIMITER '|' ADDQUOTES GZIP ALLOWOVERWRITE PARALLEL ON;"
    )


def test_a_failed_unload_writes_no_marker_and_leaks_no_credentials(
    rs: PgServer, failures, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        assert luigi.build([Unload(day="d")], local_scheduler=True) is False

    (error,) = [args[1] for _, args in failures]
    assert isinstance(error, QueryError)
    assert "s3://exports/events/" in str(error) and f"'{rs.database}'" in str(error)
    assert SECRET_KEY not in str(error) and SECRET_KEY not in caplog.text
    assert rs.markers() == []


class Vacuum(ClusterSettings, redshift.RedshiftQuery):
    day = luigi.Parameter()
    autocommit = True

    @property
    def table(self) -> str:
        return f"{_schema()}.counted"

    @property
    def query(self) -> str:
        return f"CREATE TABLE {self.table} AS SELECT 42 AS n"


def test_redshift_query_runs_once_in_the_redshift_marker_table(rs: PgServer) -> None:
    assert luigi.build([Vacuum(day="d")], local_scheduler=True) is True
    assert luigi.build([Vacuum(day="d")], local_scheduler=True) is True

    assert rs.query(f"SELECT n FROM {rs.schema}.counted") == [(42,)]
    assert [marker[1] for marker in rs.markers()] == [f"{rs.schema}.counted"]


def test_a_patched_psycopg2_connect_is_the_connection_a_redshift_query_uses() -> None:
    pytest.importorskip("psycopg2")

    class Analyze(redshift.RedshiftQuery):
        host, database, user, password, table = "cluster.example", "dw", "loader", "pw", "events"
        query = "ANALYZE events"
        autocommit = True

    with mock.patch("psycopg2.connect") as connect:
        connect.return_value.cursor.return_value.fetchone.return_value = None  # no marker row yet
        assert luigi.build([Analyze()], local_scheduler=True) is True

    connect.assert_called_with(host="cluster.example", port=5439, database="dw", user="loader", password="pw")
    connection = connect.return_value
    assert connection.autocommit is True
    assert mock.call("ANALYZE events") in connection.cursor.return_value.execute.call_args_list


class KillSessions(ClusterSettings, redshift.KillOpenRedshiftSessions):
    pass


def test_kill_open_sessions_terminates_the_other_sessions(rs: PgServer, monkeypatch) -> None:
    tag = f"victim-{uuid.uuid4().hex[:8]}"
    # PostgreSQL has no STV_SESSIONS: a view of pg_stat_activity limited to this test's own victim
    rs.execute(
        f"CREATE VIEW {rs.schema}.stv_sessions AS SELECT pid AS process, datname AS db_name, "
        f"usename AS user_name FROM pg_stat_activity WHERE application_name = '{tag}'"
    )
    monkeypatch.setenv("PGOPTIONS", f"-csearch_path={rs.schema}")
    victim = rs.psycopg.connect(
        host=rs.host, port=rs.port, dbname=rs.database, user=rs.user, password=rs.password,
        application_name=tag, autocommit=True,
    )  # fmt: skip
    try:
        assert luigi.build([KillSessions(connection_reset_wait_seconds=0)], local_scheduler=True) is True

        with pytest.raises(rs.psycopg.OperationalError):
            victim.execute("SELECT 1")
    finally:
        victim.close()
    assert [marker[1] for marker in rs.markers()] == ["KillSessions"]  # the class name, as in Luigi


def test_wrong_password_names_the_cluster_not_the_password(rs: PgServer) -> None:
    target = redshift.RedshiftTarget(
        rs.host, rs.database, rs.user, "wrong-" + SECRET_KEY, "t", "u", port=rs.port
    )

    with pytest.raises(
        DatabaseConnectionError, match=f"Redshift database '{rs.database}' at {rs.host}"
    ) as raised:
        target.exists()
    assert SECRET_KEY not in str(raised.value)
    assert redshift.RedshiftTarget("cluster.example", "db", "u", "p", "t", "u").port == 5439


def test_manifest_lists_every_object_of_the_folders(s3_server: S3Server) -> None:  # noqa: F811
    s3_server.configure()
    bucket = s3_server.new_bucket()
    client = s3_server.boto3_client()
    for key in ("a/1.gz", "a/2.gz", "b/deep/3.gz", "c/ignored.gz"):
        client.put_object(Bucket=bucket, Key=key, Body=b"data")
    manifest_path = f"s3://{bucket}/manifests/load.json"
    task = redshift.RedshiftManifestTask(
        path=manifest_path, folder_paths=[f"s3://{bucket}/a", f"s3://{bucket}/b/"]
    )

    assert luigi.build([task], local_scheduler=True) is True

    manifest = json.loads(client.get_object(Bucket=bucket, Key="manifests/load.json")["Body"].read())
    assert manifest == {
        "entries": [
            {"url": f"s3://{bucket}/a/1.gz", "mandatory": True},
            {"url": f"s3://{bucket}/a/2.gz", "mandatory": True},
            {"url": f"s3://{bucket}/b/deep/3.gz", "mandatory": True},
        ]
    }


def test_manifest_of_a_missing_bucket_fails_naming_it(s3_server: S3Server, failures) -> None:  # noqa: F811
    s3_server.configure()
    bucket = s3_server.new_bucket()
    missing = f"no-such-bucket-{uuid.uuid4().hex[:8]}"
    task = redshift.RedshiftManifestTask(path=f"s3://{bucket}/m.json", folder_paths=[f"s3://{missing}/a"])

    assert luigi.build([task], local_scheduler=True) is False

    (error,) = [args[1] for _, args in failures]
    assert error.response["Error"]["Code"] == "NoSuchBucket"  # botocore's error, as in Luigi
    shown = "".join(traceback.format_exception(error))
    if sys.version_info >= (3, 11):  # the note naming the bucket
        assert f"bucket '{missing}' does not exist" in shown
    assert s3_server.secret_key not in shown
    assert "Contents" not in s3_server.boto3_client().list_objects_v2(Bucket=bucket)


# -- the statements and their order, as users' tests see them with RedshiftTarget patched ---------------


class DummyCopy(redshift.S3CopyToTable):
    """The shape of task Luigi's own tests use."""

    host, database, user, password = "dummy_host", "dummy_database", "dummy_user", "dummy_password"
    table = "dummy_table"
    columns = [("some_text", "varchar(255)"), ("some_int", "int")]
    copy_options = ""
    aws_access_key_id = "key"
    aws_secret_access_key = "secret"

    def s3_load_path(self) -> str:
        return "s3://bucket/key"


class DummyCopyIntoSchema(DummyCopy):
    table = "schema.table_with_schema"


@pytest.fixture
def patched_target() -> Iterator[mock.MagicMock]:
    with mock.patch("luigi.contrib.redshift.RedshiftTarget") as target:
        cursor = target.return_value.connect.return_value.cursor.return_value
        cursor.fetchone.return_value = None  # nothing exists yet: every check says so
        yield target


def _executed(target: mock.MagicMock) -> list[mock._Call]:
    return target.return_value.connect.return_value.cursor.return_value.execute.call_args_list


def test_a_copy_creates_the_table_then_copies_then_marks_with_luigis_statements(patched_target) -> None:
    task = DummyCopy()
    task.run()

    patched_target.assert_called_once_with(
        host="dummy_host", database="dummy_database", user="dummy_user", password="dummy_password",
        table="dummy_table", update_id=task.task_id,
    )  # fmt: skip
    executed = _executed(patched_target)
    assert executed[0] == mock.call(
        "select 1 as table_exists from pg_table_def where tablename = lower(%s) limit 1", ("dummy_table",)
    )
    assert executed[1] == mock.call("CREATE  TABLE dummy_table (some_text varchar(255),some_int int ) ")
    assert executed[2] == mock.call(
        "\n         COPY dummy_table (some_text,some_int) from 's3://bucket/key'"
        "\n         CREDENTIALS 'aws_access_key_id=key;aws_secret_access_key=secret'\n         \n         ;"
    )
    assert len(executed) == 3
    connection = patched_target.return_value.connect.return_value
    patched_target.return_value.touch.assert_called_once_with(connection)
    connection.commit.assert_called_once_with()


def test_a_schema_table_checks_and_creates_its_schema_first(patched_target) -> None:
    DummyCopyIntoSchema().run()

    executed = _executed(patched_target)
    assert executed[0] == mock.call(
        "select 1 as schema_exists from pg_namespace where nspname = lower(%s) limit 1", ["schema"]
    )
    assert executed[1] == mock.call("CREATE SCHEMA IF NOT EXISTS schema;")
    assert executed[2] == mock.call(
        "select 1 as table_exists from information_schema.tables where table_schema = lower(%s) "
        "and table_name = lower(%s) limit 1",
        ("schema", "table_with_schema"),
    )


def test_truncate_and_prune_run_luigis_statements_before_the_copy(patched_target) -> None:
    class Reload(DummyCopy):
        do_truncate_table = True
        prune_table, prune_column, prune_date = "dummy_table", "day", "'2024-01-02'"
        table_constraints = "PRIMARY KEY (some_text)"
        queries = ["ANALYZE dummy_table"]

    Reload().run()

    statements = [call.args[0] for call in _executed(patched_target)]
    assert statements[1] == (
        "CREATE  TABLE dummy_table (some_text varchar(255),some_int int , PRIMARY KEY (some_text)) "
    )
    assert statements[2:4] == ["truncate dummy_table", "delete from dummy_table where day >= '2024-01-02'"]
    assert statements[4].lstrip().startswith("COPY dummy_table")
    assert statements[5] == "ANALYZE dummy_table"


def test_some_but_not_all_prune_settings_is_an_error() -> None:
    class HalfPrune(DummyCopy):
        prune_table = "dummy_table"

    with pytest.raises(Exception, match="override zero or all prune variables"):
        HalfPrune().do_prune()


def test_encoded_columns_create_the_table_as_luigi_words_it(patched_target) -> None:
    class Encoded(DummyCopy):
        columns = [("some_text", "varchar(255)", "LZO"), ("some_int", "int", "DELTA")]

    Encoded().run()

    assert (
        _executed(patched_target)[1]
        .args[0]
        .startswith(
            "CREATE  TABLE dummy_table (some_text varchar(255) ENCODE LZO,some_int int ENCODE DELTA )"
        )
    )


def test_metadata_columns_are_checked_added_and_filled_in_luigis_order(patched_target) -> None:
    class WithMetadata(DummyCopy):
        enable_metadata_columns = True
        metadata_columns = [("created_tz", "TIMESTAMP"), ("source", "TEXT", "bytedict")]
        metadata_queries = ["SELECT 1 FROM X", "SELECT 2 FROM Y"]

    WithMetadata().run()

    statements = [call.args[0] for call in _executed(patched_target)]
    assert statements[2] == (
        "SELECT 1 AS column_exists FROM information_schema.columns WHERE table_name = LOWER('dummy_table') "
        "AND column_name = LOWER('created_tz') LIMIT 1;"
    )
    assert statements[3] == "ALTER TABLE dummy_table ADD COLUMN created_tz TIMESTAMP;"
    assert statements[5] == "ALTER TABLE dummy_table ADD COLUMN source TEXT ENCODE bytedict;"
    assert statements[-2:] == ["SELECT 1 FROM X", "SELECT 2 FROM Y"]


def test_a_schema_table_asks_for_its_metadata_column_in_its_schema(patched_target) -> None:
    class WithMetadata(DummyCopyIntoSchema):
        enable_metadata_columns = True
        metadata_columns = [("created_tz", "TIMESTAMP")]

    WithMetadata().run()

    assert mock.call(
        "SELECT 1 AS column_exists FROM information_schema.columns WHERE table_schema = LOWER('schema') "
        "AND table_name = LOWER('table_with_schema') AND column_name = LOWER('created_tz') LIMIT 1;"
    ) in _executed(patched_target)


@pytest.mark.parametrize("columns", [["created_tz"], [("created_tz", "TIMESTAMP", "bytedict", "extra")]])
def test_a_metadata_column_that_is_not_a_pair_or_triple_is_a_value_error(patched_target, columns) -> None:
    class BadMetadata(DummyCopy):
        enable_metadata_columns = True
        metadata_columns = columns

    with pytest.raises(ValueError, match="must be \\(name, type\\) or \\(name, type, encoding\\)"):
        BadMetadata().run()


def test_luigis_misspelled_metadata_hook_and_kill_query_wording_are_kept() -> None:
    assert callable(redshift.S3CopyToTable.post_copy_metacolums)  # Luigi's spelling, kept
    assert redshift.KillOpenRedshiftSessions.kill_query.startswith(
        "select pg_terminate_backend(process) from STV_SESSIONS where db_name=%s"
    )
