"""Amazon Redshift: load from S3 (COPY), unload to S3 (UNLOAD), queries and housekeeping tasks.

Redshift speaks the PostgreSQL protocol, so this builds on ``luigi.contrib.postgres`` and its driver
(``pip install 'luigi[redshift]'``). A load runs in one transaction with its marker row: a failed COPY
leaves no rows, no marker, and (unlike Luigi) no emptied table, because ``do_truncate_table`` deletes
rather than TRUNCATEs (Redshift's TRUNCATE commits on the spot).

AWS credentials for COPY/UNLOAD come from the task, else ``[redshift]`` config, else the environment
(``aws_access_key_id`` + ``aws_secret_access_key`` [+ ``aws_session_token``], or ``aws_account_id`` +
``aws_arn_role_name``). Redshift needs them inside the statement; they never appear in a log line or an
error message. Config (``[redshift]``): ``marker_table`` (default ``table_updates``).
"""

from __future__ import annotations

import abc
import json
import logging
import os
import time
from typing import Any

import luigi
from luigi.contrib import postgres, rdbms
from luigi.contrib.postgres import driver_errors, error_text, rollback_quietly
from luigi.contrib.rdbms import (
    ConfigDefault,
    DatabaseConnectionError,
    QueryError,
    TableCopyError,
    column_names,
    redact,
    split_table_name,
    sql_literal,
)
from luigi.contrib.s3 import S3Client, S3PathTask

__all__ = [
    "KillOpenRedshiftSessions",
    "RedshiftManifestTask",
    "RedshiftQuery",
    "RedshiftTarget",
    "RedshiftUnloadTask",
    "S3CopyJSONToTable",
    "S3CopyToTable",
]

logger = logging.getLogger("luigi-interface")


class _CredentialsMixin:
    """AWS credentials for COPY/UNLOAD: a task property, else ``[redshift]`` config, else the environment."""

    @property
    def configuration_section(self) -> str:
        """The config section the credentials are read from."""
        return "redshift"

    @property
    def aws_access_key_id(self) -> str | None:
        return self._get_configuration_attribute("aws_access_key_id")

    @property
    def aws_secret_access_key(self) -> str | None:
        return self._get_configuration_attribute("aws_secret_access_key")

    @property
    def aws_account_id(self) -> str | None:
        return self._get_configuration_attribute("aws_account_id")

    @property
    def aws_arn_role_name(self) -> str | None:
        return self._get_configuration_attribute("aws_arn_role_name")

    @property
    def aws_session_token(self) -> str | None:
        return self._get_configuration_attribute("aws_session_token")

    def _get_configuration_attribute(self, attribute: str) -> str | None:
        value = luigi.configuration.get_config().get(self.configuration_section, attribute, None)
        return value or os.environ.get(attribute.upper()) or None

    def _credentials(self) -> str:
        """The CREDENTIALS string: an IAM role when account and role are set, else access keys."""
        if self.aws_account_id and self.aws_arn_role_name:
            return f"aws_iam_role=arn:aws:iam::{self.aws_account_id}:role/{self.aws_arn_role_name}"
        if self.aws_access_key_id and self.aws_secret_access_key:
            token = f";token={self.aws_session_token}" if self.aws_session_token else ""
            return (
                f"aws_access_key_id={self.aws_access_key_id};"
                f"aws_secret_access_key={self.aws_secret_access_key}{token}"
            )
        raise NotImplementedError(
            f"Missing credentials for {self}: set 'aws_access_key_id' and 'aws_secret_access_key', or "
            f"'aws_account_id' and 'aws_arn_role_name', on the task, in [{self.configuration_section}] "
            "config or in the environment (upper-case names)"
        )

    def _secrets(self) -> list[str]:
        """Every credential value that must never reach a log line or an error message."""
        values = [self.aws_secret_access_key, self.aws_session_token, self.aws_access_key_id]
        secrets = [value for value in values if value]
        try:
            secrets.append(self._credentials())
        except NotImplementedError:
            pass
        return secrets


class RedshiftTarget(postgres.PostgresTarget):
    """A row in the marker table of a Redshift database (port 5439 unless given; client timestamps)."""

    marker_table = ConfigDefault("redshift", "marker_table", "table_updates")
    DEFAULT_DB_PORT = 5439
    use_db_timestamps = False
    engine = "Redshift"


class S3CopyToTable(rdbms.CopyToTable, _CredentialsMixin):
    """Load the files at ``s3_load_path()`` into a Redshift table with COPY, once.

    Before the COPY (all in one transaction): the schema and table are created when missing, the table
    emptied when ``do_truncate_table``, old rows pruned when ``prune_table``/``prune_column``/``prune_date``
    are set. After it, ``queries`` run, then the marker row is written.
    """

    @abc.abstractmethod
    def s3_load_path(self) -> str:
        """The s3:// path (file, prefix or manifest) to load."""

    @property
    def copy_options(self) -> str:
        """Extra COPY options, e.g. ``"CSV GZIP TIMEFORMAT 'auto'"``."""
        return ""

    @property
    def prune_table(self) -> str | None:
        return None

    @property
    def prune_column(self) -> str | None:
        return None

    @property
    def prune_date(self) -> Any:
        return None

    @property
    def table_attributes(self) -> str:
        """Added after the column list of CREATE TABLE, e.g. ``"DISTSTYLE KEY DISTKEY (id)"``."""
        return ""

    @property
    def table_constraints(self) -> str:
        """Added inside the column list of CREATE TABLE, e.g. ``"PRIMARY KEY (id)"``."""
        return ""

    @property
    def do_truncate_table(self) -> bool:
        """Empty the table before loading (a DELETE, so a failed load rolls it back)."""
        return False

    @property
    def table_type(self) -> str:
        """``TEMP`` or ``TEMPORARY`` for a temporary table; empty for a permanent one."""
        return ""

    @property
    def queries(self) -> list[str]:
        """Statements run after the COPY, in its transaction."""
        return []

    def do_prune(self) -> bool:
        """Whether the prune settings are all given."""
        return bool(self.prune_table and self.prune_column and self.prune_date)

    def output(self) -> RedshiftTarget:
        return RedshiftTarget(
            host=self.host,
            database=self.database,
            user=self.user,
            password=self.password,
            table=self.table,
            update_id=self.update_id(),
            port=self.port,
        )

    def truncate_table(self, connection: Any) -> None:
        """Delete every row (transactional, unlike Redshift's TRUNCATE, which commits at once)."""
        connection.cursor().execute(f"DELETE FROM {self.table}")

    def prune(self, connection: Any) -> None:
        """Delete the rows of ``prune_table`` whose ``prune_column`` is before ``prune_date``."""
        date = self.prune_date
        if isinstance(date, str) and len(date) > 1 and date[0] == date[-1] == "'":
            date = date[1:-1]  # Luigi pasted the value into the SQL, so users quoted it themselves
        connection.cursor().execute(f"DELETE FROM {self.prune_table} WHERE {self.prune_column} < %s", (date,))

    def create_schema(self, connection: Any) -> None:
        """Create the schema of a ``schema.table`` name."""
        schema, _ = split_table_name(self.table, fold=False)
        connection.cursor().execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")

    def create_table(self, connection: Any) -> None:
        """Create the table from (name, type) or (name, type, encoding) ``columns``."""
        definitions = ", ".join(self._column_definition(column) for column in self.columns or [None])
        constraints = f", {self.table_constraints}" if self.table_constraints else ""
        table_type = f"{self.table_type} " if self.table_type else ""
        sql = f"CREATE {table_type}TABLE {self.table} ({definitions}{constraints}) {self.table_attributes}"
        connection.cursor().execute(sql.strip())

    def _column_definition(self, column: Any) -> str:
        if isinstance(column, (tuple, list)) and len(column) == 2:
            return f"{column[0]} {column[1]}"
        if isinstance(column, (tuple, list)) and len(column) == 3:
            return f"{column[0]} {column[1]} ENCODE {column[2]}"
        raise NotImplementedError(
            f"table {self.table!r} does not exist and {type(self).__name__} cannot create it: columns "
            f"{self.columns!r} give no types. Declare (name, type) or (name, type, encoding) tuples"
        )

    def does_schema_exist(self, connection: Any) -> bool:
        """Whether the schema of a ``schema.table`` name exists (True for a bare table name)."""
        schema, _ = split_table_name(self.table)
        if schema is None:
            return True
        cursor = connection.cursor()
        cursor.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s LIMIT 1", (schema,))
        return cursor.fetchone() is not None

    def does_table_exist(self, connection: Any) -> bool:
        """Whether the table exists (a bare name is looked up in the current schema)."""
        schema, table = split_table_name(self.table)
        schema_sql = "%s" if schema else "current_schema()"
        cursor = connection.cursor()
        cursor.execute(
            "SELECT 1 FROM information_schema.tables "
            f"WHERE table_schema = {schema_sql} AND table_name = %s LIMIT 1",
            (*([schema] if schema else []), table),
        )
        return cursor.fetchone() is not None

    def init_copy(self, connection: Any) -> None:
        """Create schema and table when missing, add metadata columns, truncate and prune as asked."""
        if not self.does_schema_exist(connection):
            logger.info("Creating schema for %s", self.table)
            self.create_schema(connection)
        if not self.does_table_exist(connection):
            logger.info("Creating table %s", self.table)
            self.create_table(connection)
        if self.enable_metadata_columns:
            self._add_metadata_columns(connection)
        if self.do_truncate_table:
            logger.info("Truncating table %s", self.table)
            self.truncate_table(connection)
        if self.do_prune():
            logger.info(
                "Removing %s older than %s from %s", self.prune_column, self.prune_date, self.prune_table
            )
            self.prune(connection)

    def copy_statement(self, source: str) -> str:
        """The COPY statement loading ``source`` (it contains the credentials: never log it)."""
        names = column_names(self.columns) if self.columns else []
        column_list = f" ({', '.join(names)})" if names else ""
        return (
            f"COPY {self.table}{column_list} FROM {sql_literal(source)} "
            f"CREDENTIALS {sql_literal(self._credentials())} {self.copy_options}"
        ).strip()

    def copy(self, cursor: Any, f: str) -> None:
        """Run the COPY of ``f`` (an s3:// path)."""
        logger.info("Inserting file: %s", f)
        cursor.execute(self.copy_statement(f))

    def post_copy(self, cursor: Any) -> None:
        """Run ``queries`` after the COPY."""
        logger.info("Executing post copy queries")
        for query in self.queries:
            cursor.execute(query)

    def run(self) -> None:
        if not self.table:
            raise ValueError(f"{self}: table needs to be specified")
        path = self.s3_load_path()
        output = self.output()
        connection = output.connect()
        try:
            self._load(connection, output, path)
        finally:
            connection.close()

    def _load(self, connection: Any, output: RedshiftTarget, path: str) -> None:
        errors = driver_errors(connection)
        try:
            cursor = connection.cursor()
            self.init_copy(connection)
            self.copy(cursor, path)
            self.post_copy(cursor)
            if self.enable_metadata_columns:
                self.post_copy_metacolumns(cursor)
            output.touch(connection)
            connection.commit()
            return
        except errors as exc:
            rollback_quietly(connection)
            cause = redact(error_text(exc), [*self._secrets(), self.password])
        except BaseException:
            rollback_quietly(connection)
            raise
        raise TableCopyError(
            f"loading {path} into table {self.table!r} of {output.where()} failed, nothing was written: "
            f"{cause}"
        )


class S3CopyJSONToTable(S3CopyToTable):
    """Load JSON files from S3 with ``COPY ... JSON AS jsonpath``."""

    @property
    @abc.abstractmethod
    def jsonpath(self) -> str:
        """``'auto'`` or the s3:// path of a JSONPaths file."""

    @property
    @abc.abstractmethod
    def copy_json_options(self) -> str:
        """Extra COPY options, e.g. ``"GZIP"``."""

    def copy_statement(self, source: str) -> str:
        return (
            f"COPY {self.table} FROM {sql_literal(source)} CREDENTIALS {sql_literal(self._credentials())} "
            f"JSON AS {sql_literal(self.jsonpath)} {self.copy_json_options}"
        ).strip()


class RedshiftManifestTask(S3PathTask):
    """Write, at ``path``, a COPY manifest listing every object under each of ``folder_paths``."""

    folder_paths = luigi.ListParameter()
    text_target = True

    def run(self) -> None:  # type: ignore[override]  # S3PathTask is external; this task is not
        client = S3Client()
        entries = [
            {"url": url, "mandatory": True} for folder in self.folder_paths for url in client.listdir(folder)
        ]
        manifest = json.dumps({"entries": entries})
        with self.output().open("w") as target:
            target.write(manifest if self.text_target else manifest.encode("utf-8"))


class RedshiftQuery(postgres.PostgresQuery):
    """Run ``query`` on Redshift once, recorded in the Redshift marker table."""

    def output(self) -> RedshiftTarget:
        return RedshiftTarget(
            host=self.host,
            database=self.database,
            user=self.user,
            password=self.password,
            table=self.table,
            update_id=self.update_id(),
            port=self.port,
        )


class RedshiftUnloadTask(postgres.PostgresQuery, _CredentialsMixin):
    """UNLOAD the result of ``query`` to ``s3_unload_path``, once."""

    @property
    def s3_unload_path(self) -> str:
        """The s3:// prefix the files are written under."""
        return ""

    @property
    def unload_options(self) -> str:
        """UNLOAD options."""
        return "DELIMITER '|' ADDQUOTES GZIP ALLOWOVERWRITE PARALLEL ON"

    @property
    def unload_query(self) -> str:
        """The UNLOAD template, filled by ``unload_statement``."""
        return "UNLOAD ('{query}') TO '{s3_unload_path}' CREDENTIALS '{credentials}' {unload_options}"

    def output(self) -> RedshiftTarget:
        return RedshiftTarget(
            host=self.host,
            database=self.database,
            user=self.user,
            password=self.password,
            table=self.table,
            update_id=self.update_id(),
            port=self.port,
        )

    def unload_statement(self) -> str:
        """The UNLOAD statement, the query quoted for Redshift (it contains the credentials: never log it)."""
        query = self.query() if callable(self.query) else self.query
        return self.unload_query.format(
            query=query.replace("\\", "\\\\").replace("'", "\\'"),
            s3_unload_path=self.s3_unload_path.replace("'", "''"),
            credentials=self._credentials().replace("'", "''"),
            unload_options=self.unload_options,
        ).strip()

    def run(self) -> None:
        output = self.output()
        connection = output.connect()
        try:
            self._unload(connection, output)
        finally:
            connection.close()

    def _unload(self, connection: Any, output: RedshiftTarget) -> None:
        errors = driver_errors(connection)
        try:
            logger.info("Executing unload query from task: %s", type(self).__name__)
            connection.cursor().execute(self.unload_statement())
            output.touch(connection)
            connection.commit()
            return
        except errors as exc:
            rollback_quietly(connection)
            cause = redact(error_text(exc), [*self._secrets(), self.password])
        except BaseException:
            rollback_quietly(connection)
            raise
        raise QueryError(
            f"unloading {self} to {self.s3_unload_path} from {output.where()} failed and was rolled back: "
            f"{cause}"
        )


class KillOpenRedshiftSessions(luigi.Task):
    """Terminate every other session on ``database`` (before a restore, a schema change, ...).

    When the server also drops this task's own session, it reconnects, trying for up to
    ``connection_reset_wait_seconds``, and then records the run in the marker table.
    """

    connection_reset_wait_seconds = luigi.IntParameter(default=60)

    @property
    @abc.abstractmethod
    def host(self) -> str:
        """Cluster host name, optionally ``host:port``."""

    @property
    @abc.abstractmethod
    def database(self) -> str:
        """Database whose sessions are killed."""

    @property
    @abc.abstractmethod
    def user(self) -> str:
        """User to log in as (a superuser, to kill other users' sessions)."""

    @property
    @abc.abstractmethod
    def password(self) -> str:
        """Password of ``user``."""

    port: int | None = None
    table = "stv_sessions"
    kill_query = (
        "SELECT pg_terminate_backend(process) FROM STV_SESSIONS "
        "WHERE db_name = %s AND user_name != 'rdsdb' AND process != pg_backend_pid()"
    )

    def update_id(self) -> str:
        """The identifier of this run in the marker table: the task id."""
        return self.task_id

    def output(self) -> RedshiftTarget:
        return RedshiftTarget(
            host=self.host,
            database=self.database,
            user=self.user,
            password=self.password,
            table=self.table,
            update_id=self.update_id(),
            port=self.port,
        )

    def run(self) -> None:
        output = self.output()
        logger.info("Killing all open Redshift sessions for database: %s", self.database)
        connection = self._kill_sessions(output)
        try:
            output.touch(connection)
            connection.commit()
        finally:
            connection.close()
        logger.info("Done killing all open Redshift sessions for database: %s", self.database)

    def _kill_sessions(self, output: RedshiftTarget) -> Any:
        """Run the kill query; returns a live connection (a new one if ours was dropped as well)."""
        connection = output.connect()
        lost = driver_errors(connection)
        try:
            cursor = connection.cursor()
            cursor.execute(self.kill_query, (self.database,))
            killed = len(cursor.fetchall())
            connection.commit()
            logger.info("Killed %d open sessions", killed)
            return connection
        except lost as exc:
            if not getattr(connection, "closed", False):
                rollback_quietly(connection)
                connection.close()
                cause = redact(error_text(exc), [self.password])
                raise QueryError(f"killing the sessions of {output.where()} failed: {cause}") from None
            logger.info("Our own session was closed too (%s); reconnecting", type(exc).__name__)
        connection.close()
        return self._reconnect(output)

    def _reconnect(self, output: RedshiftTarget) -> Any:
        deadline = time.monotonic() + self.connection_reset_wait_seconds
        while True:
            try:
                return output.connect()
            except DatabaseConnectionError:
                if time.monotonic() >= deadline:
                    raise
            time.sleep(1.0)
