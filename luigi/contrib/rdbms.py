"""Abstract bases for tasks that load rows into, or run a query on, a relational database.

``CopyToTable`` and ``Query`` hold what every backend shares (connection settings, ``update_id``,
``output()``'s keywords, the column declaration, ``create_table``, the ``init_copy``/``post_copy`` hooks,
metadata columns), and ``DatabaseTarget`` is the marker-table target of every backend, each engine's
differences in a small ``MarkerDialect``. The backends (``luigi.contrib.postgres``,
``luigi.contrib.mysqldb``, ``luigi.contrib.redshift``) add the driver, the dialect and the copy itself.
The errors below are the ones those backends raise: each names the database or table and the cause, and
never carries a password or a secret key.
"""

from __future__ import annotations

import abc
import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import luigi
from luigi import configuration
from luigi.task import MixinNaiveBulkComplete

__all__ = [
    "CopyToTable",
    "DatabaseConnectionError",
    "MarkerTableError",
    "Query",
    "QueryError",
    "RdbmsError",
    "TableCopyError",
    "column_names",
]

logger = logging.getLogger("luigi-interface")

REDACTED = "<redacted>"


class RdbmsError(RuntimeError):
    """A database operation of a contrib task or target failed; the message names where and why."""


class DatabaseConnectionError(RdbmsError):
    """The database server refused the connection, could not be reached, or rejected the login."""


class TableCopyError(RdbmsError):
    """Copying rows into a table failed; the copy was rolled back, so neither rows nor marker remain."""


class QueryError(RdbmsError):
    """A query task's statement failed; its transaction was rolled back and no marker was written."""


class MarkerTableError(RdbmsError):
    """Reading or writing the marker table that records finished updates failed."""


def describe_database(engine: str, host: str, port: Any, database: str) -> str:
    """``PostgreSQL database 'db' at host:port``: where an operation ran, for error messages."""
    return f"{engine} database {database!r} at {host}:{port}"


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every non-empty secret in ``secrets`` replaced, longest first."""
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


def column_names(columns: Sequence[Any]) -> list[str]:
    """The names in a ``columns`` declaration: plain strings or (name, type[, ...]) tuples.

    Raises ValueError naming the bad entry when one is neither.
    """
    names = []
    for column in columns:
        if isinstance(column, str):
            names.append(column)
        elif isinstance(column, (tuple, list)) and column and isinstance(column[0], str):
            names.append(column[0])
        else:
            raise ValueError(
                f"columns must be names or (name, type) tuples, but one is {column!r}: fix the task's columns"
            )
    return names


def split_table_name(table: str, fold: bool = True) -> tuple[str | None, str]:
    """(schema or None, table) from ``schema.table`` or ``table``; ``fold`` lower-cases as PostgreSQL does."""
    schema, _, name = table.rpartition(".")
    if fold:
        schema, name = schema.lower(), name.lower()
    return (schema or None), name


def sql_literal(text: str) -> str:
    """``text`` as a standard SQL string literal (quotes doubled)."""
    return "'" + text.replace("'", "''") + "'"


def rollback_quietly(connection: Any) -> None:
    """Roll back after a failure; a connection that is already broken has nothing left to undo."""
    try:
        connection.rollback()
    except Exception:  # noqa: BLE001 - the original failure is what gets reported
        logger.debug("rollback after a failed copy failed too", exc_info=True)


def commit_or_raise(
    connection: Any,
    errors: tuple[type[Exception], ...],
    work: Callable[[], None],
    failure: Callable[[BaseException], RdbmsError],
    undo: Callable[[Any], None] = rollback_quietly,
) -> None:
    """Run ``work`` and commit; on a driver error undo and raise ``failure(error)`` (without the driver's
    traceback, which may quote a secret), on anything else undo and re-raise."""
    try:
        work()
        connection.commit()
        return
    except errors as exc:
        undo(connection)
        error = failure(exc)
    except BaseException:
        undo(connection)
        raise
    raise error


class MarkerDialect(abc.ABC):
    """What one engine and its drivers do differently in keeping the marker table."""

    current_schema_sql = "current_schema()"
    fold_identifiers = True  # PostgreSQL folds unquoted names to lower case; MySQL on Linux does not

    @abc.abstractmethod
    def errors(self, connection: Any) -> tuple[type[Exception], ...]:
        """The driver errors to catch on ``connection`` (None: one the target opens itself)."""

    @abc.abstractmethod
    def error_text(self, exc: BaseException) -> str:
        """A driver error on one line, for messages."""

    @abc.abstractmethod
    def is_missing_table(self, exc: BaseException) -> bool:
        """Whether ``exc`` says the table does not exist."""

    @abc.abstractmethod
    def is_duplicate_table(self, exc: BaseException) -> bool:
        """Whether ``exc`` says the table exists already (another worker created it)."""

    @abc.abstractmethod
    def create_marker_table_sql(self, target: DatabaseTarget) -> str:
        """Luigi's DDL of the marker table."""

    @abc.abstractmethod
    def insert_marker(self, target: DatabaseTarget) -> tuple[str, tuple[Any, ...]]:
        """Luigi's INSERT of the target's marker row, and its parameters."""

    def table_exists(self, cursor: Any, table: str) -> bool:
        """Ask the catalog, so a missing table does not abort the caller's transaction."""
        schema, name = split_table_name(table, self.fold_identifiers)
        schema_sql = "%s" if schema else self.current_schema_sql
        cursor.execute(
            f"SELECT 1 FROM information_schema.tables WHERE table_schema = {schema_sql} AND table_name = %s",
            (*([schema] if schema else []), name),
        )
        return cursor.fetchone() is not None


class MarkerLocation(luigi.Target):
    """Where a marker row ``update_id`` of ``table``'s loads lives; says so without the password.

    ``host`` may carry the port (``db.example:5433``), kept as the string it is, as Luigi keeps it;
    otherwise ``port``, else the engine's ``DEFAULT_DB_PORT``.
    """

    DEFAULT_DB_PORT: int = 0
    engine = "database"

    def __init__(
        self,
        host: str,
        database: str,
        user: str,
        password: str,
        table: str,
        update_id: str,
        port: int | str | None = None,
    ) -> None:
        if ":" in host:
            host, _, port = host.rpartition(":")
        self.host = host
        self.port = port or self.DEFAULT_DB_PORT
        self.database = database
        self.user = user
        self.password = password
        self.table = table
        self.update_id = update_id

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(host={self.host!r}, port={self.port}, database={self.database!r}, "
            f"user={self.user!r}, table={self.table!r}, update_id={self.update_id!r})"
        )

    def __str__(self) -> str:
        return f"{self.where()} table {self.table!r} (update_id {self.update_id!r})"

    def where(self) -> str:
        """The database this target lives in, for messages."""
        return describe_database(self.engine, self.host, self.port, self.database)


class DatabaseTarget(MarkerLocation):
    """A marker row in a database reached through a DB-API driver; what differs between engines is the
    ``dialect``. The marker table is ``marker_table``."""

    marker_table: Any = "table_updates"
    use_db_timestamps: Any = True  # the database stamps the marker row (else the client's clock does)
    dialect: MarkerDialect

    @abc.abstractmethod
    def _autocommit_connection(self) -> Any:
        """A new connection of the target's own, committing each statement."""

    @contextlib.contextmanager
    def _own_connection(self) -> Iterator[Any]:
        connection = self._autocommit_connection()
        try:
            yield connection
        finally:
            connection.close()

    def exists(self, connection: Any = None) -> bool:
        """Whether the marker row exists; on ``connection`` (whose transaction is left usable) if given."""
        try:
            if connection is None:
                with self._own_connection() as own:
                    return self._marker_row_exists(own.cursor(), table_may_be_missing=True)
            if not self.dialect.table_exists(connection.cursor(), self.marker_table):
                return False
            return self._marker_row_exists(connection.cursor(), table_may_be_missing=False)
        except self.dialect.errors(connection) as exc:
            failure = self._marker_error("checking", exc)
        raise failure

    def _marker_row_exists(self, cursor: Any, table_may_be_missing: bool) -> bool:
        try:
            cursor.execute(  # Luigi's statement, to the whitespace
                f"SELECT 1 FROM {self.marker_table}\n{' ' * 16}WHERE update_id = %s\n{' ' * 16}LIMIT 1",
                (self.update_id,),
            )
        except self.dialect.errors(cursor) as exc:
            if table_may_be_missing and self.dialect.is_missing_table(exc):
                return False
            raise
        return cursor.fetchone() is not None

    def touch(self, connection: Any = None) -> None:
        """Write the marker row, creating the marker table first if needed; on ``connection`` if given."""
        self.create_marker_table()
        sql, params = self.dialect.insert_marker(self)
        try:
            if connection is None:
                with self._own_connection() as own:
                    own.cursor().execute(sql, params)
            else:
                connection.cursor().execute(sql, params)
            return
        except self.dialect.errors(connection) as exc:
            failure = self._marker_error("writing", exc)
        raise failure

    def create_marker_table(self) -> None:
        """Create the marker table unless it exists (on a connection of its own, committed at once)."""
        try:
            with self._own_connection() as own:
                if self.dialect.table_exists(own.cursor(), self.marker_table):
                    return
                try:
                    own.cursor().execute(self.dialect.create_marker_table_sql(self))
                except self.dialect.errors(own) as exc:
                    if not self.dialect.is_duplicate_table(exc):  # (else another worker just made it)
                        raise
            return
        except self.dialect.errors(None) as exc:
            failure = self._marker_error("creating", exc)
        raise failure

    def _marker_error(self, action: str, exc: BaseException) -> MarkerTableError:
        cause = redact(self.dialect.error_text(exc), [self.password])
        return MarkerTableError(
            f"{action} the marker table {self.marker_table!r} of {self.where()} for "
            f"update_id {self.update_id!r} failed: {cause}"
        )


def column_mismatch_hint(connection: Any, dialect: MarkerDialect, table: str, declared: list[str]) -> str:
    """`` (table ... has columns ...)`` when ``table`` exists without all the ``declared`` columns."""
    schema, name = split_table_name(table, dialect.fold_identifiers)
    schema_sql = "%s" if schema else dialect.current_schema_sql
    try:
        cursor = connection.cursor()
        cursor.execute(
            "SELECT column_name FROM information_schema.columns "
            f"WHERE table_schema = {schema_sql} AND table_name = %s ORDER BY ordinal_position",
            (*([schema] if schema else []), name),
        )
        actual = [str(row[0]) for row in cursor.fetchall()]
        connection.rollback()
    except Exception:  # noqa: BLE001 - only a hint; the copy error is what matters
        return ""
    missing = [column for column in declared if column.lower() not in [a.lower() for a in actual]]
    if not actual or not missing:
        return ""
    return (
        f" (table {table!r} has columns {actual}, but the task copies {declared}: "
        "alter the table or the task's columns)"
    )


class ConfigDefault:
    """A class attribute whose default is read from ``[section] option`` each time it is used.

    Luigi read these when the module was imported, so a config set later was ignored; here the value is
    looked up on access. Assigning on an instance, or overriding in a subclass, still wins.
    """

    def __init__(self, section: str, option: str, default: Any) -> None:
        self.section, self.option, self.default = section, option, default
        self.name = option

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is not None and self.name in vars(instance):
            return vars(instance)[self.name]
        config = configuration.get_config()
        if isinstance(self.default, bool):
            return config.getboolean(self.section, self.option, self.default)
        return config.get(self.section, self.option, self.default)

    def __set__(self, instance: Any, value: Any) -> None:
        vars(instance)[self.name] = value


class _MetadataColumnsMixin:
    """Optional extra columns (load time, source, ...) added to the table and filled by queries.

    Set ``enable_metadata_columns = True`` and list ``metadata_columns`` as (name, type) tuples; missing
    ones are added with ALTER TABLE in ``init_copy``, and ``metadata_queries`` run after the copy.
    """

    @property
    def table(self) -> str:
        """The table the columns belong to (given by the task class)."""
        raise NotImplementedError(f"{type(self).__name__} must define table")

    @property
    def metadata_columns(self) -> list[tuple[str, ...]]:
        """Columns to add to the table when absent: (name, type) or (name, type, encoding) tuples."""
        return []

    @property
    def metadata_queries(self) -> list[str]:
        """Statements run after the copy, typically filling the metadata columns."""
        return []

    @property
    def enable_metadata_columns(self) -> bool:
        """Whether to add ``metadata_columns`` and run ``metadata_queries``."""
        return False

    def _add_metadata_columns(self, connection: Any) -> None:
        cursor = connection.cursor()
        for column in self.metadata_columns:
            if len(column) == 0:
                raise ValueError(f"a metadata column of table {self.table!r} is empty: give (name, type)")
            if not self._column_exists(cursor, column[0]):
                logger.info("Adding missing metadata column %s to %s", column[0], self.table)
                self._add_column_to_table(cursor, column)

    def _column_exists(self, cursor: Any, column_name: str) -> bool:
        """Ask information_schema, with Luigi's statement (names compared lower-cased)."""
        schema, _, table = self.table.rpartition(".")
        schema_condition = f"table_schema = LOWER('{schema}') AND " if schema else ""
        cursor.execute(
            "SELECT 1 AS column_exists FROM information_schema.columns WHERE "
            f"{schema_condition}table_name = LOWER('{table}') "
            f"AND column_name = LOWER('{column_name}') LIMIT 1;"
        )
        return bool(cursor.fetchone())

    def _add_column_to_table(self, cursor: Any, column: Sequence[str]) -> None:
        if len(column) == 2:
            definition = f"{column[0]} {column[1]}"
        elif len(column) == 3:
            definition = f"{column[0]} {column[1]} ENCODE {column[2]}"
        else:
            raise ValueError(
                f"metadata column {column!r} of table {self.table!r} must be (name, type) or "
                "(name, type, encoding)"
            )
        cursor.execute(f"ALTER TABLE {self.table} ADD COLUMN {definition};")

    def post_copy_metacolumns(self, cursor: Any) -> None:
        """Run ``metadata_queries`` in the copy's transaction."""
        logger.info("Executing post copy metadata queries")
        for query in self.metadata_queries:
            cursor.execute(query)


class ConnectionSettings(abc.ABC):
    """Where a task's database is: the four settings every task of these backends gives.

    Class attributes or properties, so the password never becomes part of the task id.
    """

    @property
    @abc.abstractmethod
    def host(self) -> str:
        """Server host name, optionally ``host:port``."""

    @property
    @abc.abstractmethod
    def database(self) -> str:
        """Database name."""

    @property
    @abc.abstractmethod
    def user(self) -> str:
        """User to log in as."""

    @property
    @abc.abstractmethod
    def password(self) -> str:
        """Password of ``user``."""

    port: int | None = None
    task_id: str  # (set by luigi.Task, which these settings are mixed into)

    @property
    def update_id(self) -> str:
        """The identifier of this run in the marker table: the task id, unique per parameters."""
        return self.task_id

    def marker_target(self, target_class: Callable[..., Any], table: str, **more: Any) -> Any:
        """``target_class(host=..., database=..., user=..., password=..., table=..., update_id=...)``.

        ``output()`` passes the class as its module names it at call time, so a test's
        ``mock.patch('luigi.contrib.postgres.PostgresTarget')`` is what is called, with Luigi's keywords.
        """
        return target_class(
            host=self.host,
            database=self.database,
            user=self.user,
            password=self.password,
            table=table,
            update_id=self.update_id,
            **more,
        )


class CopyToTable(MixinNaiveBulkComplete, _MetadataColumnsMixin, ConnectionSettings, luigi.Task):
    """Load ``rows()`` into ``table`` of a database, once: the output is a marker-table target.

    Subclasses give ``host``, ``database``, ``user``, ``password`` and ``table`` (class attributes or
    properties, so the password never becomes part of the task id) and ``columns``: names, or
    (name, type) tuples, which also let the task create a missing table.
    """

    @property
    @abc.abstractmethod
    def table(self) -> str:
        """Table to load, optionally ``schema.table``."""

    columns: list[Any] = []
    null_values: tuple[Any, ...] = (None,)
    column_separator = "\t"

    def create_table(self, connection: Any) -> None:
        """Create ``table`` from the (name, type) ``columns``; called when the copy finds no table."""
        if not self.columns or not all(
            isinstance(column, (tuple, list)) and len(column) == 2 for column in self.columns
        ):
            raise NotImplementedError(
                f"table {self.table!r} does not exist and {type(self).__name__} cannot create it: columns "
                f"{self.columns!r} give no types. Declare columns as (name, type) tuples, create the table "
                "first, or override create_table()"
            )
        definitions = ",".join(f"{name} {type_}" for name, type_ in self.columns)
        connection.cursor().execute(f"CREATE TABLE {self.table} ({definitions})")

    @abc.abstractmethod
    def output(self) -> Any:
        """The marker-table target of the backend."""

    def init_copy(self, connection: Any) -> None:
        """Hook run in the copy's transaction before the rows go in (e.g. delete old rows)."""
        if hasattr(self, "clear_table"):  # Luigi's check: a task still setting it expects a feature gone
            raise Exception(
                f"{type(self).__name__}.clear_table is no longer supported: delete the rows in init_copy()"
            )
        if self.enable_metadata_columns:
            self._add_metadata_columns(connection)

    def post_copy(self, connection: Any) -> None:
        """Hook run in the copy's transaction after the rows went in, before the marker is written."""

    @abc.abstractmethod
    def copy(self, cursor: Any, file: Any) -> None:
        """Send the rows to the database."""

    def _check_declared(self) -> None:
        """Fail early, naming the task, when ``table`` or ``columns`` is missing."""
        if not (self.table and self.columns):
            raise ValueError(f"{self}: table and columns need to be specified (table={self.table!r})")


class Query(MixinNaiveBulkComplete, ConnectionSettings, luigi.Task):
    """Run ``query`` on a database once; the output is a marker-table target recording it ran."""

    @property
    @abc.abstractmethod
    def table(self) -> str:
        """The table the query concerns (recorded in the marker table)."""

    @property
    @abc.abstractmethod
    def query(self) -> str:
        """The SQL to run."""

    autocommit = False

    @abc.abstractmethod
    def run(self) -> None:
        """Execute ``query`` and mark the run done."""

    @abc.abstractmethod
    def output(self) -> Any:
        """The marker-table target of the backend."""
