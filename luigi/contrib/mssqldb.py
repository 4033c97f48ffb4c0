"""Microsoft SQL Server: a marker-table target, complete once its task has recorded its update.

``MSSqlTarget`` keeps Luigi's marker table (``[mssql] marker_table``, or Luigi's ``marker-table``;
default ``table_updates``) through pymssql's low-level ``_mssql`` connection, with Luigi's statements.
Needs pymssql: ``pip install 'luigi[mssql]'``.
"""

from __future__ import annotations

from typing import Any

from luigi.contrib.optional import MissingExtraError
from luigi.contrib.rdbms import ConfigDefault, MarkerLocation

try:  # a module attribute, so that tests can patch luigi.contrib.mssqldb._mssql as Luigi's do
    from pymssql import _mssql
except ImportError:  # the module still imports; connecting says which extra to install
    _mssql = None  # type: ignore[assignment]

__all__ = ["MSSqlTarget"]

MISSING_TABLE = 208  # SQL Server's "Invalid object name"
TABLE_EXISTS = 2714  # "There is already an object named ... in the database"


def _driver() -> Any:
    if _mssql is None:
        raise MissingExtraError(
            "luigi.contrib.mssqldb needs the 'pymssql' package, which is not installed: "
            "pip install 'luigi[mssql]' (or pip install pymssql)"
        )
    return _mssql


class MSSqlTarget(MarkerLocation):
    """The marker row of ``update_id`` in the marker table of a SQL Server database."""

    DEFAULT_DB_PORT = 1433
    engine = "SQL Server"
    marker_table = ConfigDefault("mssql", "marker_table", "table_updates")

    def __init__(
        self, host: str, database: str, user: str, password: str, table: str, update_id: str
    ) -> None:
        """``host`` may carry a port (``host:port``); the default port is 1433."""
        super().__init__(host, database, user, password, table, update_id)
        self.port = int(self.port)

    def connect(self) -> Any:
        """A new ``_mssql`` connection to the target's database."""
        return _driver().connect(
            user=self.user,
            password=self.password,
            server=self.host,
            port=self.port,
            database=self.database,
        )

    def exists(self, connection: Any = None) -> bool:
        """Whether the marker row exists (a missing marker table counts as no row)."""
        if connection is None:
            connection = self.connect()
        try:
            row = connection.execute_row(
                f"""SELECT 1 FROM {self.marker_table}
                    WHERE update_id = %s
                """,
                (self.update_id,),
            )
        except _driver().MssqlDatabaseException as error:
            if error.number != MISSING_TABLE:
                raise
            row = None
        return row is not None

    def touch(self, connection: Any = None) -> None:
        """Record the update (creating or refreshing its marker row), then check that it is there."""
        self.create_marker_table()
        if connection is None:
            connection = self.connect()
        connection.execute_non_query(
            f"""IF NOT EXISTS(SELECT 1
                    FROM {self.marker_table}
                    WHERE update_id = %(update_id)s)
                    INSERT INTO {self.marker_table} (update_id, target_table)
                        VALUES (%(update_id)s, %(table)s)
                ELSE
                    UPDATE t
                    SET target_table = %(table)s
                        , inserted = GETDATE()
                    FROM {self.marker_table} t
                    WHERE update_id = %(update_id)s
            """,
            {"update_id": self.update_id, "table": self.table},
        )
        if not self.exists(connection):
            raise RuntimeError(f"the marker of {self} was written but cannot be read back")

    def create_marker_table(self) -> None:
        """Create the marker table with Luigi's columns, unless it exists already."""
        connection = self.connect()
        try:
            connection.execute_non_query(
                f""" CREATE TABLE {self.marker_table} (
                        id            BIGINT    NOT NULL IDENTITY(1,1),
                        update_id     VARCHAR(128)  NOT NULL,
                        target_table  VARCHAR(128),
                        inserted      DATETIME DEFAULT(GETDATE()),
                        PRIMARY KEY (update_id)
                    )
                """
            )
        except _driver().MssqlDatabaseException as error:
            if error.number != TABLE_EXISTS:
                raise
        finally:
            connection.close()
