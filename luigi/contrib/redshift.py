"""Amazon Redshift: load from S3 (COPY), unload to S3 (UNLOAD), queries and housekeeping tasks.

Redshift speaks the PostgreSQL protocol, so this builds on ``luigi.contrib.postgres`` and its driver
(``pip install 'luigi[redshift]'``). A load runs in one transaction with its marker row: a failed COPY
leaves no rows and no marker. The statements are Luigi's, to the whitespace, so a test that patches
``RedshiftTarget`` sees Luigi's calls; ``do_truncate_table`` TRUNCATEs, which Redshift commits at once.

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
from luigi.contrib.postgres import driver_errors, error_text
from luigi.contrib.rdbms import (
    ConfigDefault,
    DatabaseConnectionError,
    QueryError,
    TableCopyError,
    column_names,
    commit_or_raise,
    redact,
    rollback_quietly,
)
from luigi.contrib.s3 import S3PathTask, S3Target

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
        """Empty the table before loading (Redshift's TRUNCATE commits at once, as with Luigi)."""
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
        """Whether to prune: all three prune settings given (some but not all is an error)."""
        given = [bool(v) for v in (self.prune_table, self.prune_column, self.prune_date)]
        if any(given) and not all(given):
            raise Exception(
                f"{type(self).__name__}: override zero or all prune variables "
                "(prune_table, prune_column, prune_date)"
            )
        return all(given)

    def output(self) -> RedshiftTarget:
        return self.marker_target(RedshiftTarget, self.table)

    def truncate_table(self, connection: Any) -> None:
        """``truncate <table>`` (on Redshift a TRUNCATE commits the transaction at once)."""
        cursor = connection.cursor()
        try:
            cursor.execute(f"truncate {self.table}")
        finally:
            cursor.close()

    def prune(self, connection: Any) -> None:
        """Delete the rows of ``prune_table`` whose ``prune_column`` is at or after ``prune_date``.

        The date is written into the statement as given, as Luigi does: quote it (``"'2024-01-02'"``).
        """
        cursor = connection.cursor()
        try:
            cursor.execute(f"delete from {self.prune_table} where {self.prune_column} >= {self.prune_date}")
        finally:
            cursor.close()

    def create_schema(self, connection: Any) -> None:
        """Create the schema of a ``schema.table`` name (nothing for a bare name)."""
        schema, dot, _ = self.table.partition(".")
        if dot:
            connection.cursor().execute(f"CREATE SCHEMA IF NOT EXISTS {schema};")

    def create_table(self, connection: Any) -> None:
        """Create the table from (name, type) or (name, type, encoding) ``columns``, as Luigi words it."""
        if not self.columns or len(self.columns[0]) == 1:
            raise NotImplementedError(
                f"table {self.table!r} does not exist and {type(self).__name__} cannot create it: columns "
                f"{self.columns!r} give no types. Declare (name, type) or (name, type, encoding) tuples"
            )
        if len(self.columns[0]) == 2:
            definitions = ",".join(f"{name} {type_}" for name, type_ in self.columns)
            constraints = f", {self.table_constraints}" if self.table_constraints else ""
        elif len(self.columns[0]) == 3:
            definitions = ",".join(
                f"{name} {type_} ENCODE {encoding}" for name, type_, encoding in self.columns
            )
            constraints = f",{self.table_constraints}" if self.table_constraints else ""
        else:
            raise ValueError(
                f"create_table() found no columns for {self.table!r}: give (name, type) or "
                "(name, type, encoding) tuples"
            )
        connection.cursor().execute(
            f"CREATE {self.table_type} TABLE {self.table} "
            f"({definitions} {constraints}) {self.table_attributes}"
        )

    def does_schema_exist(self, connection: Any) -> bool:
        """Whether the schema of a ``schema.table`` name exists (True, with no query, for a bare name)."""
        schema, dot, _ = self.table.partition(".")
        if not dot:
            return True
        cursor = connection.cursor()
        try:
            cursor.execute(
                "select 1 as schema_exists from pg_namespace where nspname = lower(%s) limit 1", [schema]
            )
            return bool(cursor.fetchone())
        finally:
            cursor.close()

    def does_table_exist(self, connection: Any) -> bool:
        """Whether the table exists: information_schema for ``schema.table``, Redshift's pg_table_def else."""
        schema, dot, table = self.table.partition(".")
        cursor = connection.cursor()
        try:
            if dot:
                cursor.execute(
                    "select 1 as table_exists from information_schema.tables where table_schema = lower(%s) "
                    "and table_name = lower(%s) limit 1",
                    (schema, table),
                )
            else:
                cursor.execute(
                    "select 1 as table_exists from pg_table_def where tablename = lower(%s) limit 1",
                    (self.table,),
                )
            return bool(cursor.fetchone())
        finally:
            cursor.close()

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
        """Luigi's COPY statement loading ``source`` (it contains the credentials: never log it)."""
        column_list = "(" + ",".join(column_names(self.columns)) + ")" if self.columns else ""
        return _statement(
            f"COPY {self.table} {column_list} from '{source}'",
            f"CREDENTIALS '{self._credentials()}'",
            self.copy_options,
        )

    def copy(self, cursor: Any, f: str) -> None:
        """Run the COPY of ``f`` (an s3:// path)."""
        logger.info("Inserting file: %s", f)
        cursor.execute(self.copy_statement(f))

    def post_copy(self, cursor: Any) -> None:
        """Run ``queries`` after the COPY."""
        logger.info("Executing post copy queries")
        for query in self.queries:
            cursor.execute(query)

    def post_copy_metacolums(self, cursor: Any) -> None:
        """Luigi's misspelled name of ``post_copy_metacolumns``, kept for code that calls it."""
        self.post_copy_metacolumns(cursor)

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
        def load() -> None:  # Luigi's order of calls, which users' tests with a patched target pin
            cursor = connection.cursor()
            self.init_copy(connection)
            self.copy(cursor, path)
            self.post_copy(cursor)
            if self.enable_metadata_columns:
                self.post_copy_metacolumns(cursor)
            output.touch(connection)

        def failure(exc: BaseException) -> TableCopyError:
            cause = redact(error_text(exc), [*self._secrets(), self.password])
            return TableCopyError(
                f"loading {path} into table {self.table!r} of {output.where()} failed, nothing was "
                f"written: {cause}"
            )

        commit_or_raise(connection, driver_errors(connection), load, failure)


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
        return _statement(
            f"COPY {self.table} from '{source}'",
            f"CREDENTIALS '{self._credentials()}'",
            f"JSON AS '{self.jsonpath}' {self.copy_json_options}",
            self.copy_options,
        )


def _statement(*lines: str) -> str:
    """Luigi's layout of a COPY: a newline, then each line and the closing ``;`` indented by 9 spaces."""
    return "".join(f"\n{' ' * 9}{line}" for line in (*lines, ";"))


class RedshiftManifestTask(S3PathTask):
    """Write, at ``path``, a COPY manifest listing every object under each of ``folder_paths``."""

    folder_paths = luigi.ListParameter()
    text_target = True

    def run(self) -> None:  # type: ignore[override]  # S3PathTask is external; this task is not
        entries = [
            {"url": f"{folder.rstrip('/')}/{name}", "mandatory": True}  # (Luigi doubled a folder's "/")
            for folder in self.folder_paths
            for name in S3Target(folder).fs.list(folder)
        ]
        manifest = json.dumps({"entries": entries})
        target = self.output().open("w")
        try:
            target.write(manifest if self.text_target else manifest.encode("utf-8"))
        except BaseException:
            del target  # never closed: the manifest is not uploaded
            raise
        target.close()


class RedshiftQuery(postgres.PostgresQuery):
    """Run ``query`` on Redshift once, recorded in the Redshift marker table."""

    def output(self) -> RedshiftTarget:
        return self.marker_target(RedshiftTarget, self.table)


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
        return "UNLOAD ( '{query}' ) TO '{s3_unload_path}' credentials '{credentials}' {unload_options};"

    def output(self) -> RedshiftTarget:
        return self.marker_target(RedshiftTarget, self.table)

    def unload_statement(self) -> str:
        """The UNLOAD statement, the query quoted for Redshift (it contains the credentials: never log it)."""
        query = self.query() if callable(self.query) else self.query
        return self.unload_query.format(
            query=query.replace("'", "\\'"),
            s3_unload_path=self.s3_unload_path,
            credentials=self._credentials(),
            unload_options=self.unload_options,
        )

    def run(self) -> None:
        output = self.output()
        connection = output.connect()
        try:
            self._unload(connection, output)
        finally:
            connection.close()

    def _unload(self, connection: Any, output: RedshiftTarget) -> None:
        def unload() -> None:
            logger.info("Executing unload query from task: %s", type(self).__name__)
            cursor = connection.cursor()
            cursor.execute(self.unload_statement())
            logger.info(cursor.statusmessage)
            output.touch(connection)

        def failure(exc: BaseException) -> QueryError:
            cause = redact(error_text(exc), [*self._secrets(), self.password])
            return QueryError(
                f"unloading {self} to {self.s3_unload_path} from {output.where()} failed and was rolled "
                f"back: {cause}"
            )

        commit_or_raise(connection, driver_errors(connection), unload, failure)


class KillOpenRedshiftSessions(rdbms.ConnectionSettings, luigi.Task):
    """Terminate every other session on ``database`` (before a restore, a schema change, ...).

    When the server also drops this task's own session, it reconnects, trying for up to
    ``connection_reset_wait_seconds``, and then records the run in the marker table. Log in as a
    superuser to kill other users' sessions.
    """

    connection_reset_wait_seconds = luigi.IntParameter(default=60)

    kill_query = (
        "select pg_terminate_backend(process) from STV_SESSIONS where db_name=%s "
        "and user_name != 'rdsdb' and process != pg_backend_pid()"
    )

    def output(self) -> RedshiftTarget:
        return self.marker_target(RedshiftTarget, type(self).__name__)

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
