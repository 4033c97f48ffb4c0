"""PostgreSQL: a marker-table target, a bulk ``CopyToTable`` (COPY FROM STDIN) and ``PostgresQuery``.

The driver is psycopg2, as in Luigi (``pip install 'luigi[postgres]'``), or psycopg 3 when psycopg2 is not
installed; it is imported at the first connection, and ``psycopg2.connect`` is looked up at each one, so a
test's ``mock.patch('psycopg2.connect')`` takes effect. A copy runs in one transaction with its marker
row, so a failed copy leaves neither rows nor marker, and a finished one is never repeated.

Config (``[postgres]``): ``marker_table`` (default ``table_updates``), ``use_db_timestamps`` (default
true), ``local_tmp_dir`` (where rows are staged before the COPY; default the system's).
"""

from __future__ import annotations

import contextlib
import datetime
import importlib
import logging
import re
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import IO, Any

from luigi import configuration
from luigi.contrib import rdbms
from luigi.contrib.optional import require
from luigi.contrib.rdbms import (
    ConfigDefault,
    DatabaseConnectionError,
    MarkerTableError,
    QueryError,
    TableCopyError,
    column_names,
    redact,
    split_table_name,
    sql_literal,
)

__all__ = ["CopyToTable", "MultiReplacer", "PostgresQuery", "PostgresTarget", "default_escape"]

logger = logging.getLogger("luigi-interface")

UNDEFINED_TABLE = "42P01"
DUPLICATE_TABLE = "42P07"
UNIQUE_VIOLATION = "23505"
NULL_MARKER = (
    "\\\\N"  # backslash, backslash, N: Luigi's marker, so a value that is literally \N loads as NULL
)
_COPY_BLOCK = 1 << 16


# -- the driver: psycopg2 or psycopg 3, chosen at first use ---------------------------------------------


@dataclass(frozen=True)
class Driver:
    """The DB-API module in use and the few calls that differ between psycopg2 and psycopg 3."""

    module: ModuleType

    @property
    def name(self) -> str:
        return self.module.__name__

    @property
    def Error(self) -> type[Exception]:  # noqa: N802 - mirrors the DB-API attribute name
        return self.module.Error

    def connect(self, host: str, port: Any, database: str, user: str, password: str) -> Any:
        """A new UTF-8 connection; psycopg2 is called with exactly Luigi's arguments."""
        if self.name == "psycopg2":
            connection = self.module.connect(
                host=host, port=port, database=database, user=user, password=password
            )
            connection.set_client_encoding("utf-8")
            return connection
        return self.module.connect(
            host=host, port=port, dbname=database, user=user, password=password, client_encoding="utf8"
        )

    def copy_from_file(self, cursor: Any, sql: str, file: IO[bytes]) -> None:
        """Run ``COPY ... FROM STDIN`` feeding it ``file``."""
        if self.name == "psycopg2":
            cursor.copy_expert(sql, file, size=_COPY_BLOCK)
            return
        with cursor.copy(sql) as copy:
            while block := file.read(_COPY_BLOCK):
                copy.write(block)


def driver() -> Driver:
    """psycopg2 when it imports, else psycopg (3), else MissingExtraError naming the ``postgres`` extra."""
    for name in ("psycopg2", "psycopg"):
        try:
            return Driver(importlib.import_module(name))
        except ImportError:
            continue
    return Driver(require("psycopg2", "postgres", "luigi.contrib.postgres"))


def driver_of(connection_or_cursor: Any) -> Driver | None:
    """The driver a connection or cursor came from, or None for one we do not know (e.g. pg8000)."""
    root = type(connection_or_cursor).__module__.split(".", 1)[0]
    if root not in ("psycopg", "psycopg2"):
        return None
    return Driver(importlib.import_module(root))


def driver_errors(connection_or_cursor: Any) -> tuple[type[Exception], ...]:
    """The exception types to translate for this connection: the driver's Error, or none."""
    known = driver_of(connection_or_cursor)
    return (known.Error,) if known else ()


def _errors_for(connection_or_cursor: Any) -> tuple[type[Exception], ...]:
    """The driver errors to catch for a connection, or for one we open ourselves when it is None."""
    if connection_or_cursor is None:
        return (driver().Error,)
    return driver_errors(connection_or_cursor)


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of a psycopg 3 or psycopg2 error."""
    return getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)


def error_text(exc: BaseException) -> str:
    """A driver error on one line: its SQLSTATE class name and first message line."""
    first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return f"{type(exc).__name__}: {first_line}"


def rollback_quietly(connection: Any) -> None:
    """Roll back after a failure; a connection that is already broken has nothing left to undo."""
    try:
        connection.rollback()
    except Exception:  # noqa: BLE001 - the original failure is what gets reported
        logger.debug("rollback after a failed copy failed too", exc_info=True)


# -- escaping for COPY's text format --------------------------------------------------------------------


class MultiReplacer:
    """Replace several substrings in one pass: ``MultiReplacer([("a", "1"), ("b", "2")])("ab") == "12"``."""

    def __init__(self, replace_pairs: Iterable[tuple[str, str]]) -> None:
        self._table = dict(replace_pairs)
        keys = sorted(self._table, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(key) for key in keys)) if keys else None

    def __call__(self, search_string: str) -> str:
        if self._pattern is None:
            return search_string
        return self._pattern.sub(lambda match: self._table[match.group(0)], search_string)


default_escape = MultiReplacer(
    [
        ("\\", "\\\\"),
        ("\t", "\\t"),
        ("\n", "\\n"),
        ("\r", "\\r"),
        ("\v", "\\v"),
        ("\b", "\\b"),
        ("\f", "\\f"),
    ]
)


# -- the target -----------------------------------------------------------------------------------------


class PostgresTarget(rdbms.DatabaseTarget):
    """A row ``update_id`` in the marker table: present once the load or query it names has finished.

    The marker table (``[postgres] marker_table``, default ``table_updates``) has the columns
    ``update_id TEXT PRIMARY KEY``, ``target_table TEXT`` and ``inserted TIMESTAMP``.
    """

    marker_table = ConfigDefault("postgres", "marker_table", "table_updates")
    use_db_timestamps = ConfigDefault("postgres", "use_db_timestamps", True)
    DEFAULT_DB_PORT = 5432
    engine = "PostgreSQL"

    def open(self, mode: str) -> Any:
        raise NotImplementedError(f"cannot open() {type(self).__name__}: it marks a database table")

    def connect(self) -> Any:
        """A new connection (transactional, UTF-8); DatabaseConnectionError naming the server if refused."""
        active = driver()
        try:
            return active.connect(self.host, self.port, self.database, self.user, self.password)
        except active.Error as exc:
            cause = redact(" ".join(str(exc).split()), [self.password])
        raise DatabaseConnectionError(f"cannot connect to {self.where()} as user {self.user!r}: {cause}")

    @contextlib.contextmanager
    def _own_connection(self) -> Iterator[Any]:
        connection = self.connect()
        connection.autocommit = True
        try:
            yield connection
        finally:
            connection.close()

    def exists(self, connection: Any = None) -> bool:
        """Whether the marker row exists; on ``connection`` (whose transaction is left usable) if given."""
        errors = _errors_for(connection)
        try:
            if connection is None:
                with self._own_connection() as own:
                    return self._marker_row_exists(own.cursor(), table_may_be_missing=True)
            if not self._marker_table_exists(connection.cursor()):
                return False
            return self._marker_row_exists(connection.cursor(), table_may_be_missing=False)
        except errors as exc:
            failure = self._marker_error("checking", exc)
        raise failure

    def _marker_row_exists(self, cursor: Any, table_may_be_missing: bool) -> bool:
        try:
            cursor.execute(
                f"SELECT 1 FROM {self.marker_table}\n{' ' * 16}WHERE update_id = %s\n{' ' * 16}LIMIT 1",
                (self.update_id,),
            )
        except _errors_for(cursor) as exc:
            if table_may_be_missing and sqlstate(exc) == UNDEFINED_TABLE:
                return False
            raise
        return cursor.fetchone() is not None

    def _marker_table_exists(self, cursor: Any) -> bool:
        """Ask the catalog, so a missing marker table does not abort the caller's transaction."""
        schema, table = split_table_name(self.marker_table)
        schema_sql = "%s" if schema else "current_schema()"
        cursor.execute(
            f"SELECT 1 FROM information_schema.tables WHERE table_schema = {schema_sql} AND table_name = %s",
            (*([schema] if schema else []), table),
        )
        return cursor.fetchone() is not None

    def touch(self, connection: Any = None) -> None:
        """Write the marker row, creating the marker table first if needed; on ``connection`` if given."""
        self.create_marker_table()
        errors = _errors_for(connection)
        try:
            if connection is None:
                with self._own_connection() as own:
                    self._insert_marker(own.cursor())
            else:
                self._insert_marker(connection.cursor())
            return
        except errors as exc:
            failure = self._marker_error("writing", exc)
        raise failure

    def _insert_marker(self, cursor: Any) -> None:
        if self.use_db_timestamps:
            cursor.execute(
                f"INSERT INTO {self.marker_table} (update_id, target_table)\n VALUES (%s, %s)\n",
                (self.update_id, self.table),
            )
        else:
            cursor.execute(
                f"INSERT INTO {self.marker_table} (update_id, target_table, inserted)\n"
                " VALUES (%s, %s, %s);\n",
                (self.update_id, self.table, datetime.datetime.now()),
            )

    def create_marker_table(self) -> None:
        """Create the marker table unless it exists (on a connection of its own, committed at once)."""
        inserted = "TIMESTAMP DEFAULT NOW())" if self.use_db_timestamps else "TIMESTAMP);"
        sql = (  # Luigi's DDL, to the whitespace
            f" CREATE TABLE {self.marker_table} (\n update_id TEXT PRIMARY KEY,\n target_table TEXT,\n"
            f" inserted {inserted}"
        )
        with self._own_connection() as own:
            if self._marker_table_exists(own.cursor()):
                return
            try:
                own.cursor().execute(sql)
            except _errors_for(own) as exc:
                # another worker created it between the check and the CREATE
                if sqlstate(exc) not in (DUPLICATE_TABLE, UNIQUE_VIOLATION):
                    failure = self._marker_error("creating", exc)
                    raise failure from None

    def _marker_error(self, action: str, exc: BaseException) -> MarkerTableError:
        cause = redact(error_text(exc), [self.password])
        return MarkerTableError(
            f"{action} the marker table {self.marker_table!r} of {self.where()} for "
            f"update_id {self.update_id!r} failed: {cause}"
        )


# -- the tasks ------------------------------------------------------------------------------------------


class CopyToTable(rdbms.CopyToTable):
    """Load ``rows()`` into a PostgreSQL table with COPY, in one transaction with the marker row.

    By default the rows are the tab-separated lines of ``self.input()``. A missing table is created from
    (name, type) ``columns`` inside the same transaction, so a failed first load leaves no table either.
    """

    def rows(self) -> Iterator[Sequence[Any]]:
        """The rows to load: by default each line of the input target split on tabs."""
        with self.input().open("r") as handle:
            for line in handle:
                yield line.rstrip("\n").split("\t")

    def map_column(self, value: Any) -> str:
        """One value in COPY's text format: ``null_values`` become NULL, the rest is escaped text."""
        if value in self.null_values:
            return NULL_MARKER
        escaped = default_escape(str(value))
        if self.column_separator != "\t":
            escaped = escaped.replace(self.column_separator, "\\" + self.column_separator)
        return escaped

    def output(self) -> PostgresTarget:
        return PostgresTarget(
            host=self.host,
            database=self.database,
            user=self.user,
            password=self.password,
            table=self.table,
            update_id=self.update_id,
            port=self.port,
        )

    def copy(self, cursor: Any, file: IO[bytes]) -> None:
        """COPY the staged rows in ``file`` into ``table`` (``schema.table`` works)."""
        names = ", ".join(column_names(self.columns))
        sql = (
            f"COPY {self.table} ({names}) FROM STDIN WITH (FORMAT text, "
            f"NULL {sql_literal(NULL_MARKER)}, DELIMITER {sql_literal(self.column_separator)})"
        )
        known = driver_of(cursor) or driver()
        known.copy_from_file(cursor, sql, file)

    def run(self) -> None:
        self._check_declared()
        with self._staged_rows() as staged:
            output = self.output()
            connection = output.connect()
            try:
                self._load(connection, output, staged)
            finally:
                connection.close()

    @contextlib.contextmanager
    def _staged_rows(self) -> Iterator[IO[bytes]]:
        """All rows written to a temporary file first, so a failing ``rows()`` never reaches the table."""
        tmp_dir = configuration.get_config().get("postgres", "local_tmp_dir", None)
        with tempfile.TemporaryFile(dir=tmp_dir) as staged:
            for row in self.rows():  # any iterable, as in Luigi: a row of the wrong length fails in COPY
                line = self.column_separator.join(self.map_column(value) for value in row) + "\n"
                staged.write(line.encode("utf-8"))
            staged.seek(0)
            yield staged

    def _load(self, connection: Any, output: PostgresTarget, staged: IO[bytes]) -> None:
        """init_copy, copy, post_copy and the marker in one transaction; rolled back on any failure."""
        errors = driver_errors(connection)
        try:
            self._copy_creating_table(connection, staged, errors)
            self.post_copy(connection)
            if self.enable_metadata_columns:
                self.post_copy_metacolumns(connection.cursor())
            output.touch(connection)
            connection.commit()
            return
        except errors as exc:
            rollback_quietly(connection)
            failure = self._copy_error(connection, output, exc)
        except BaseException:
            rollback_quietly(connection)
            raise
        raise failure

    def _copy_creating_table(
        self, connection: Any, staged: IO[bytes], errors: tuple[type[Exception], ...]
    ) -> None:
        for attempt in (1, 2):
            try:
                self.init_copy(connection)
                self.copy(connection.cursor(), staged)
                return
            except errors as exc:
                if attempt == 2 or sqlstate(exc) != UNDEFINED_TABLE:
                    raise
            connection.rollback()
            logger.info("Creating table %s", self.table)
            self.create_table(connection)
            staged.seek(0)

    def _copy_error(self, connection: Any, output: PostgresTarget, exc: BaseException) -> TableCopyError:
        cause = redact(error_text(exc), [self.password])
        hint = _column_mismatch(connection, self.table, column_names(self.columns))
        return TableCopyError(
            f"copying rows into table {self.table!r} of {output.where()} failed, nothing was written: "
            f"{cause}{hint}"
        )


def _column_mismatch(connection: Any, table: str, declared: list[str]) -> str:
    """`` (the table has columns ...)`` when ``table`` exists without all the ``declared`` columns."""
    schema, name = split_table_name(table)
    schema_sql = "%s" if schema else "current_schema()"
    try:
        cursor = connection.cursor()
        cursor.execute(
            "SELECT column_name FROM information_schema.columns "
            f"WHERE table_schema = {schema_sql} AND table_name = %s ORDER BY ordinal_position",
            (*([schema] if schema else []), name),
        )
        actual = [row[0] for row in cursor.fetchall()]
        connection.rollback()
    except Exception:  # noqa: BLE001 - only a hint; the copy error is what matters
        return ""
    missing = [column for column in declared if column.lower() not in actual]
    if not actual or not missing:
        return ""
    return (
        f" (table {table!r} has columns {actual}, but the task copies {declared}: "
        "alter the table or the task's columns)"
    )


class PostgresQuery(rdbms.Query):
    """Run ``query`` on PostgreSQL once; its marker row is written in the same transaction.

    With ``autocommit = True`` (for statements that cannot run in a transaction, like VACUUM) the
    statement and the marker commit separately.
    """

    def output(self) -> PostgresTarget:
        return PostgresTarget(
            host=self.host,
            database=self.database,
            user=self.user,
            password=self.password,
            table=self.table,
            update_id=self.update_id,
            port=self.port,
        )

    def run(self) -> None:
        output = self.output()
        connection = output.connect()
        connection.autocommit = self.autocommit
        try:
            self._execute(connection, output)
        finally:
            connection.close()

    def _execute(self, connection: Any, output: PostgresTarget) -> None:
        errors = driver_errors(connection)
        try:
            logger.info("Executing query from task: %s", type(self).__name__)
            connection.cursor().execute(self.query)
            output.touch(connection)
            connection.commit()
            return
        except errors as exc:
            rollback_quietly(connection)
            cause = redact(error_text(exc), [self.password])
        except BaseException:
            rollback_quietly(connection)
            raise
        raise QueryError(f"the query of {self} on {output.where()} failed and was rolled back: {cause}")
