"""MySQL and MariaDB: a marker-table target and a ``CopyToTable`` that inserts rows in bulk.

The driver is mysql-connector-python, as in Luigi (``pip install 'luigi[mysql]'``), or PyMySQL when that is
not installed; it is imported at the first connection, and ``mysql.connector.connect`` is looked up at
each one, so a test's ``mock.patch('mysql.connector.connect')`` takes effect. A copy runs in one transaction
with its marker row: a failed copy leaves neither rows nor marker (nor a table the copy created), and a
finished one is never repeated.

Config (``[mysql]``): ``marker_table`` (default ``table_updates``).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from luigi.contrib import rdbms
from luigi.contrib.optional import require
from luigi.contrib.rdbms import (
    ConfigDefault,
    DatabaseConnectionError,
    MarkerDialect,
    TableCopyError,
    column_mismatch_hint,
    column_names,
    commit_or_raise,
    redact,
    rollback_quietly,
)

__all__ = ["CopyToTable", "MySqlTarget"]

logger = logging.getLogger("luigi-interface")

ER_NO_SUCH_TABLE = 1146
ER_TABLE_EXISTS_ERROR = 1050


@dataclass(frozen=True)
class Driver:
    """The DB-API module in use (mysql.connector or PyMySQL) and what differs between the two."""

    module: ModuleType

    @property
    def Error(self) -> type[Exception]:  # noqa: N802 - mirrors the DB-API attribute name
        return self.module.Error

    def connect(self, **params: Any) -> Any:
        if self.module.__name__ == "pymysql":
            params.setdefault("charset", "utf8mb4")
        return self.module.connect(**params)


def driver() -> Driver:
    """mysql.connector when it imports, else PyMySQL, else MissingExtraError naming the ``mysql`` extra."""
    for name in ("mysql.connector", "pymysql"):
        try:
            return Driver(importlib.import_module(name))
        except ImportError:
            continue
    return Driver(require("mysql.connector", "mysql", "luigi.contrib.mysqldb"))


def error_code(exc: BaseException) -> int | None:
    """The server's error number of a PyMySQL or mysql.connector error."""
    code = getattr(exc, "errno", None)
    if code is None and exc.args and isinstance(exc.args[0], int):
        code = exc.args[0]
    return code


def error_text(exc: BaseException) -> str:
    """A driver error on one line: its class name and message."""
    message = exc.args[1] if len(exc.args) > 1 and isinstance(exc.args[0], int) else str(exc)
    return f"{type(exc).__name__}: {' '.join(str(message).split())}"


class MySqlDialect(MarkerDialect):
    """The marker table on MySQL and MariaDB through mysql.connector or PyMySQL."""

    current_schema_sql = "DATABASE()"
    fold_identifiers = False  # MySQL table names are case-sensitive on Linux

    def errors(self, connection: Any) -> tuple[type[Exception], ...]:
        return (driver().Error,)

    def error_text(self, exc: BaseException) -> str:
        return error_text(exc)

    def is_missing_table(self, exc: BaseException) -> bool:
        return error_code(exc) == ER_NO_SUCH_TABLE

    def is_duplicate_table(self, exc: BaseException) -> bool:
        return error_code(exc) == ER_TABLE_EXISTS_ERROR

    def create_marker_table_sql(self, target: rdbms.DatabaseTarget) -> str:
        return (  # Luigi's DDL, to the whitespace
            f" CREATE TABLE {target.marker_table} (\n"
            " id            BIGINT(20)    NOT NULL AUTO_INCREMENT,\n"
            " update_id     VARCHAR(128)  NOT NULL,\n"
            " target_table  VARCHAR(128),\n"
            " inserted      TIMESTAMP DEFAULT NOW(),\n"
            " PRIMARY KEY (update_id),\n"
            " KEY id (id)\n"
            " )\n"
        )

    def insert_marker(self, target: rdbms.DatabaseTarget) -> tuple[str, tuple[Any, ...]]:
        sql = (
            f"INSERT INTO {target.marker_table} (update_id, target_table)\n VALUES (%s, %s)\n"
            " ON DUPLICATE KEY UPDATE\n update_id = VALUES(update_id)"
        )
        return sql, (target.update_id, target.table)


class MySqlTarget(rdbms.DatabaseTarget):
    """A row ``update_id`` in the marker table: present once the load it names has finished.

    ``cnx_kwargs`` go to the driver's ``connect()`` unchanged (e.g. ``ssl``, ``connect_timeout``).
    """

    marker_table = ConfigDefault("mysql", "marker_table", "table_updates")
    DEFAULT_DB_PORT = 3306
    engine = "MySQL"
    dialect = MySqlDialect()

    def __init__(
        self,
        host: str,
        database: str,
        user: str,
        password: str,
        table: str,
        update_id: str,
        **cnx_kwargs: Any,
    ) -> None:
        super().__init__(host, database, user, password, table, update_id, cnx_kwargs.pop("port", None))
        self.port = int(self.port)  # Luigi's MySqlTarget makes the port of "host:3307" an int
        self.cnx_kwargs = cnx_kwargs

    def connect(self, autocommit: bool = False) -> Any:
        """A new connection; DatabaseConnectionError naming the server (never the password) if refused."""
        active = driver()
        try:
            return active.connect(
                host=self.host,
                port=self.port,
                user=self.user,
                password=self.password,
                database=self.database,
                autocommit=autocommit,
                **self.cnx_kwargs,
            )
        except active.Error as exc:
            cause = redact(error_text(exc), [self.password])
        raise DatabaseConnectionError(f"cannot connect to {self.where()} as user {self.user!r}: {cause}")

    def _autocommit_connection(self) -> Any:
        return self.connect(autocommit=True)


class CopyToTable(rdbms.CopyToTable):
    """Insert ``rows()`` into a MySQL/MariaDB table in batches of ``bulk_size``, in one transaction.

    By default the rows are the tab-separated lines of ``self.input()``. A missing table is created from
    (name, type) ``columns``; MySQL commits DDL at once, so a failed copy drops a table it created.
    """

    bulk_size = 10000

    def rows(self) -> Iterator[Sequence[Any]]:
        """The rows to load: by default each line of the input target split on tabs."""
        with self.input().open("r") as handle:
            for line in handle:
                yield line.rstrip("\n").split("\t")

    def output(self) -> MySqlTarget:
        extra = {"port": self.port} if self.port else {}  # (Luigi's passes none; ours honours a port)
        return self.marker_target(MySqlTarget, self.table, **extra)

    def copy(self, cursor: Any, file: Any = None) -> None:
        """INSERT the rows in batches of ``bulk_size`` (the driver sends each batch as one statement)."""
        names = column_names(self.columns)
        placeholders = ",".join(["%s"] * len(names))
        sql = f"INSERT INTO {self.table} ({','.join(names)}) VALUES ({placeholders})"
        batch: list[Any] = []
        for row in self.rows():  # as given, as in Luigi: the driver rejects a row that does not fit
            batch.append(row)
            if len(batch) >= self.bulk_size:
                cursor.executemany(sql, batch)
                batch = []
        cursor.executemany(sql, batch)  # the remainder, even when empty, as Luigi

    def run(self) -> None:
        self._check_declared()
        output = self.output()
        connection = output.connect()
        try:
            self._load(connection, output)
        finally:
            connection.close()

    def _load(self, connection: Any, output: MySqlTarget) -> None:
        """init_copy, copy, post_copy and the marker in one transaction; undone on any failure."""
        created = [False]

        def load() -> None:
            self._copy_creating_table(connection, created)
            self.post_copy(connection)
            if self.enable_metadata_columns:
                self.post_copy_metacolumns(connection.cursor())
            output.touch(connection)

        commit_or_raise(
            connection,
            (driver().Error,),
            load,
            lambda exc: self._copy_error(connection, output, exc),
            undo=lambda connection: self._undo(connection, created[0]),
        )

    def _copy_creating_table(self, connection: Any, created: list[bool]) -> None:
        """Create a missing table first when ``columns`` say how, so ``rows()`` is read only once."""
        if self._declares_types() and not MySqlTarget.dialect.table_exists(connection.cursor(), self.table):
            self._create(connection, created)
        for attempt in (1, 2):
            try:
                self.init_copy(connection)
                self.copy(connection.cursor())
                return
            except driver().Error as exc:
                if attempt == 2 or error_code(exc) != ER_NO_SUCH_TABLE:
                    raise
            connection.rollback()
            self._create(connection, created)

    def _declares_types(self) -> bool:
        return all(isinstance(column, (tuple, list)) and len(column) == 2 for column in self.columns)

    def _create(self, connection: Any, created: list[bool]) -> None:
        logger.info("Creating table %s", self.table)
        self.create_table(connection)
        created[0] = True

    def _undo(self, connection: Any, drop_table: bool) -> None:
        """Roll back, and drop the table this copy created (its CREATE was committed by MySQL)."""
        rollback_quietly(connection)
        if not drop_table:
            return
        try:
            connection.cursor().execute(f"DROP TABLE IF EXISTS {self.table}")
        except Exception:  # noqa: BLE001 - the copy's own failure is what gets reported
            logger.warning("could not drop table %s created by the failed copy", self.table, exc_info=True)

    def _copy_error(self, connection: Any, output: MySqlTarget, exc: BaseException) -> TableCopyError:
        cause = redact(error_text(exc), [self.password])
        hint = column_mismatch_hint(connection, output.dialect, self.table, column_names(self.columns))
        return TableCopyError(
            f"copying rows into table {self.table!r} of {output.where()} failed, nothing was written: "
            f"{cause}{hint}"
        )
