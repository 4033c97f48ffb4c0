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
    MarkerDialect,
    QueryError,
    TableCopyError,
    column_mismatch_hint,
    column_names,
    commit_or_raise,
    redact,
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


class PostgresDialect(MarkerDialect):
    """The marker table on PostgreSQL (and Redshift) through psycopg2 or psycopg 3."""

    def errors(self, connection: Any) -> tuple[type[Exception], ...]:
        return _errors_for(connection)

    def error_text(self, exc: BaseException) -> str:
        return error_text(exc)

    def is_missing_table(self, exc: BaseException) -> bool:
        return sqlstate(exc) == UNDEFINED_TABLE

    def is_duplicate_table(self, exc: BaseException) -> bool:
        return sqlstate(exc) in (DUPLICATE_TABLE, UNIQUE_VIOLATION)

    def create_marker_table_sql(self, target: rdbms.DatabaseTarget) -> str:
        inserted = "TIMESTAMP DEFAULT NOW())" if target.use_db_timestamps else "TIMESTAMP);"
        return (  # Luigi's DDL, to the whitespace
            f" CREATE TABLE {target.marker_table} (\n update_id TEXT PRIMARY KEY,\n target_table TEXT,\n"
            f" inserted {inserted}"
        )

    def insert_marker(self, target: rdbms.DatabaseTarget) -> tuple[str, tuple[Any, ...]]:
        if target.use_db_timestamps:
            sql = f"INSERT INTO {target.marker_table} (update_id, target_table)\n VALUES (%s, %s)\n"
            return sql, (target.update_id, target.table)
        sql = (
            f"INSERT INTO {target.marker_table} (update_id, target_table, inserted)\n VALUES (%s, %s, %s);\n"
        )
        return sql, (target.update_id, target.table, datetime.datetime.now())


class PostgresTarget(rdbms.DatabaseTarget):
    """A row ``update_id`` in the marker table: present once the load or query it names has finished.

    The marker table (``[postgres] marker_table``, default ``table_updates``) has the columns
    ``update_id TEXT PRIMARY KEY``, ``target_table TEXT`` and ``inserted TIMESTAMP``.
    """

    marker_table = ConfigDefault("postgres", "marker_table", "table_updates")
    use_db_timestamps = ConfigDefault("postgres", "use_db_timestamps", True)
    DEFAULT_DB_PORT = 5432
    engine = "PostgreSQL"
    dialect = PostgresDialect()

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

    def _autocommit_connection(self) -> Any:
        connection = self.connect()
        connection.autocommit = True
        return connection


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
        return self.marker_target(PostgresTarget, self.table, port=self.port)

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

        def load() -> None:
            self._copy_creating_table(connection, staged, errors)
            self.post_copy(connection)
            if self.enable_metadata_columns:
                self.post_copy_metacolumns(connection.cursor())
            output.touch(connection)

        commit_or_raise(connection, errors, load, lambda exc: self._copy_error(connection, output, exc))

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
        hint = column_mismatch_hint(connection, output.dialect, self.table, column_names(self.columns))
        return TableCopyError(
            f"copying rows into table {self.table!r} of {output.where()} failed, nothing was written: "
            f"{cause}{hint}"
        )


class PostgresQuery(rdbms.Query):
    """Run ``query`` on PostgreSQL once; its marker row is written in the same transaction.

    With ``autocommit = True`` (for statements that cannot run in a transaction, like VACUUM) the
    statement and the marker commit separately.
    """

    def output(self) -> PostgresTarget:
        return self.marker_target(PostgresTarget, self.table, port=self.port)

    def run(self) -> None:
        output = self.output()
        connection = output.connect()
        connection.autocommit = self.autocommit
        try:
            self._execute(connection, output)
        finally:
            connection.close()

    def _execute(self, connection: Any, output: PostgresTarget) -> None:
        def execute() -> None:
            logger.info("Executing query from task: %s", type(self).__name__)
            connection.cursor().execute(self.query)
            output.touch(connection)

        commit_or_raise(
            connection, driver_errors(connection), execute, lambda exc: self._query_error(output, exc)
        )

    def _query_error(self, output: PostgresTarget, exc: BaseException) -> QueryError:
        cause = redact(error_text(exc), [self.password])
        return QueryError(f"the query of {self} on {output.where()} failed and was rolled back: {cause}")
