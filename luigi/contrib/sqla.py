"""Copying rows into any SQLAlchemy database, with a marker table that records which copies are done.

``CopyToTable`` inserts what ``rows()`` yields into ``table``, in chunks of ``chunk_size``, and writes its
``update_id`` into the marker table (``[sqlalchemy] marker_table``, default ``table_updates``) in the same
transaction: a copy is either all there, marker included, or not there at all. ``SQLAlchemyTarget`` is
that marker, also usable on its own. Built on SQLAlchemy 2; the database driver is the user's choice (a
bare ``postgresql://`` URL uses psycopg2 as in Luigi, or psycopg 3 when psycopg2 is not installed).
Connection strings are only ever shown with their password masked.
"""

from __future__ import annotations

import abc
import contextlib
import datetime
import importlib.util
import itertools
import logging
import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, NamedTuple

import sqlalchemy
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.engine import Connection as DBConnection

from luigi.configuration import get_config
from luigi.target import Target
from luigi.task import Task

__all__ = [
    "CopyFailedError",
    "CopyToTable",
    "DatabaseConnectionError",
    "DatabaseDriverMissingError",
    "InvalidConnectionStringError",
    "RowShapeError",
    "SQLAlchemyTarget",
    "SqlaError",
    "TableCreationError",
    "TableDefinitionError",
    "safe_url",
]

logger = logging.getLogger("luigi-interface")

DEFAULT_MARKER_TABLE = "table_updates"
MARKER_KEY_LENGTH = 128
MASK = "***"
# Query options that carry secrets in some drivers' URLs (masked like the password).
_SECRET_QUERY_KEYS = frozenset(
    {"password", "passwd", "pwd", "sslpassword", "secret", "token", "access_token"}
)
_MAX_ROW_REPR = 200


class SqlaError(Exception):
    """Base of this module's errors about a database, a table or the rows copied into it."""


class DatabaseConnectionError(SqlaError, ConnectionError):
    """The database could not be reached: refused, wrong credentials, unknown database, ..."""


class DatabaseDriverMissingError(SqlaError, ImportError):
    """The connection string names a dialect or DB-API driver that is not installed."""


class InvalidConnectionStringError(SqlaError, ValueError):
    """The connection string is not a SQLAlchemy URL."""


class TableDefinitionError(SqlaError, ValueError):
    """The declared columns do not fit the table (or the table to reflect does not exist)."""


class TableCreationError(SqlaError):
    """The database refused to create the table (or the marker table), e.g. for lack of privileges."""


class RowShapeError(SqlaError, ValueError):
    """A row from ``rows()`` does not have one value per column of the table."""


class CopyFailedError(SqlaError):
    """The database refused a chunk of rows or the marker row; the whole copy was rolled back."""


# -- connection strings and errors, with secrets masked ---------------------------------------------------


def _parse_url(connection_string: str | URL) -> URL | None:
    try:
        return make_url(connection_string)
    except sqlalchemy.exc.ArgumentError:
        return None


def safe_url(connection_string: str | URL) -> str:
    """The connection string with its password and password-like query options masked, for messages."""
    url = _parse_url(connection_string)
    if url is None:
        return "<unparseable connection string>"
    masked = {key: MASK for key in url.query if key.lower() in _SECRET_QUERY_KEYS}
    return url.update_query_dict(masked).render_as_string(hide_password=True)


def _secrets_of(url: URL) -> list[str]:
    secrets = [str(url.password)] if url.password else []
    for key, value in url.query.items():
        if key.lower() in _SECRET_QUERY_KEYS:
            secrets.extend([value] if isinstance(value, str) else list(value))
    return [secret for secret in secrets if secret]


def _cause(exc: BaseException, url: URL) -> str:
    """The driver's own message for ``exc`` on one line, with any secret of ``url`` masked."""
    text = " ".join(str(getattr(exc, "orig", None) or exc).split())
    for secret in _secrets_of(url):
        text = text.replace(secret, MASK)
    return text


# The DB-API drivers a bare ``postgresql://`` URL may use, Luigi's first. SQLAlchemy 2.1 defaults to
# psycopg 3, so without this a Luigi user's URL would fail where only psycopg2 (Luigi's driver) is installed.
_POSTGRESQL_DRIVERS = ("psycopg2", "psycopg")


def _with_installed_driver(connection_string: str | URL) -> str | URL:
    """A bare ``postgresql://`` URL made explicit with the installed driver: psycopg2, else psycopg 3.

    Any other URL (one naming its driver, another database, or not a URL at all) is returned unchanged.
    """
    url = _parse_url(connection_string)
    if url is None or url.drivername != "postgresql":
        return connection_string
    for driver in _POSTGRESQL_DRIVERS:
        if importlib.util.find_spec(driver) is not None:
            return url.set(drivername=f"postgresql+{driver}")
    return connection_string  # neither: SQLAlchemy's own error names the driver it wanted


def _connection_hint(url: URL) -> str:
    if url.get_backend_name() == "sqlite":
        return "Check that the database file's folder exists and is writable."
    return "Check the host, port, database name, user and password of the connection string."


@contextlib.contextmanager
def _transaction(engine: Engine, table: str) -> Iterator[DBConnection]:
    """A connection in a transaction (committed when the block ends); failing to connect names ``table``."""
    try:
        connection = engine.connect()
    except sqlalchemy.exc.DBAPIError as exc:
        raise DatabaseConnectionError(
            f"Cannot connect to {safe_url(engine.url)} for table {table!r}: {_cause(exc, engine.url)}. "
            f"{_connection_hint(engine.url)}"
        ) from exc
    with connection, connection.begin():
        yield connection


def _create_table_once(engine: Engine, table: sqlalchemy.Table, target: str) -> None:
    """Create ``table`` unless it exists; losing a creation race to another process is fine."""
    try:
        with _transaction(engine, target) as connection:
            table.create(connection, checkfirst=True)
    except sqlalchemy.exc.DBAPIError as exc:
        with _transaction(engine, target) as connection:
            if sqlalchemy.inspect(connection).has_table(table.name, schema=table.schema):
                return
        raise TableCreationError(
            f"Creating table {table.fullname!r} at {safe_url(engine.url)} failed: {_cause(exc, engine.url)}. "
            "Check that the user may create tables there, or create it beforehand."
        ) from exc


# -- the marker ---------------------------------------------------------------------------------------------


class _CachedEngine(NamedTuple):
    """An engine and the process that created it (a forked child must not share its parent's pool)."""

    engine: Engine
    pid: int


class SQLAlchemyTarget(Target):
    """Marks that ``update_id`` was copied into ``target_table``: a row of the marker table.

    The engine is created on first use and shared per process by all targets with the same connection
    string, ``echo`` and ``connect_args``; a forked child creates its own instead of using the parent's
    connections.
    """

    marker_table: str | None = None
    Connection = _CachedEngine  # Luigi's name for an entry of the engine cache
    _engine_dict: ClassVar[dict[tuple[str, bool, str], _CachedEngine]] = {}
    _engine_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        connection_string: str | URL,
        target_table: str,
        update_id: str,
        echo: bool = False,
        connect_args: Mapping[str, Any] | None = None,
    ) -> None:
        self.connection_string = connection_string
        self.target_table = target_table
        self.update_id = update_id
        self.echo = echo
        self.connect_args = dict(connect_args or {})
        if self.marker_table is None:
            self.marker_table = get_config().get("sqlalchemy", "marker_table", DEFAULT_MARKER_TABLE)
        self.marker_table_bound: sqlalchemy.Table | None = None

    def __repr__(self) -> str:
        return (
            f"SQLAlchemyTarget({safe_url(self.connection_string)}, target_table={self.target_table!r}, "
            f"update_id={self.update_id!r})"
        )

    __str__ = __repr__

    # -- the engine ----------------------------------------------------------------------------------------

    @property
    def engine(self) -> Engine:
        """This process's engine for the connection string, created on first use."""
        key = self._engine_key()
        pid = os.getpid()
        with SQLAlchemyTarget._engine_lock:
            cached = SQLAlchemyTarget._engine_dict.get(key)
            if cached is None or cached.pid != pid:
                if cached is not None:
                    cached.engine.dispose(close=False)  # the parent's pool: forget it, leave its sockets be
                cached = _CachedEngine(self._create_engine(), pid)
                SQLAlchemyTarget._engine_dict[key] = cached
        return cached.engine

    def _engine_key(self) -> tuple[str, bool, str]:
        url = self.connection_string
        text = url.render_as_string(hide_password=False) if isinstance(url, URL) else str(url)
        args = repr(sorted(self.connect_args.items(), key=lambda item: str(item[0])))
        return text, bool(self.echo), args

    def _create_engine(self) -> Engine:
        shown = safe_url(self.connection_string)
        try:
            return sqlalchemy.create_engine(
                _with_installed_driver(self.connection_string),
                echo=self.echo,
                connect_args=self.connect_args,
                pool_pre_ping=True,
            )
        except sqlalchemy.exc.NoSuchModuleError as exc:
            raise DatabaseDriverMissingError(
                f"SQLAlchemy has no dialect for {shown} (table {self.target_table!r}): {exc}. "
                "Check the URL's scheme or install the package that provides the dialect."
            ) from None
        except ImportError as exc:
            raise DatabaseDriverMissingError(
                f"The connection string {shown} (table {self.target_table!r}) needs the database driver "
                f"module {exc.name!r}, which is not installed: install the package that provides it"
            ) from exc
        except sqlalchemy.exc.ArgumentError:
            raise InvalidConnectionStringError(
                f"The connection string of table {self.target_table!r} is not a SQLAlchemy URL "
                "(dialect+driver://user:password@host:port/database)"
            ) from None

    # -- the marker table ----------------------------------------------------------------------------------

    @property
    def _marker_name(self) -> str:
        return self.marker_table or DEFAULT_MARKER_TABLE

    def _marker_definition(self) -> sqlalchemy.Table:
        return sqlalchemy.Table(
            self._marker_name,
            sqlalchemy.MetaData(),
            sqlalchemy.Column("update_id", sqlalchemy.String(MARKER_KEY_LENGTH), primary_key=True),
            sqlalchemy.Column("target_table", sqlalchemy.String(MARKER_KEY_LENGTH)),
            sqlalchemy.Column("inserted", sqlalchemy.DateTime, default=datetime.datetime.now),
        )

    def create_marker_table(self) -> None:
        """Create the marker table if it is missing (safe when several processes do it at once)."""
        table = self._marker_definition()
        _create_table_once(self.engine, table, self.target_table)
        self.marker_table_bound = table

    @contextlib.contextmanager
    def _begin(self, connection: DBConnection | None) -> Iterator[DBConnection]:
        if connection is not None:
            yield connection
            return
        with _transaction(self.engine, self.target_table) as own:
            yield own

    def exists(self, connection: DBConnection | None = None) -> bool:
        """Whether the marker row of ``update_id`` is there (False while there is no marker table).

        ``connection`` checks inside that connection's transaction instead of a new one.
        """
        with self._begin(connection) as conn:
            if self.marker_table_bound is None and not sqlalchemy.inspect(conn).has_table(self._marker_name):
                return False
            table = self.marker_table_bound
            if table is None:
                table = self._marker_definition()
            found = conn.execute(
                sqlalchemy.select(table.c.update_id).where(table.c.update_id == self.update_id)
            ).first()
        return found is not None

    def touch(self, connection: DBConnection | None = None) -> None:
        """Record ``update_id`` as done now (refreshing the time if it already was), creating the table.

        ``connection`` writes the row inside that connection's transaction, so it commits with the data.
        """
        if self.marker_table_bound is None:
            self.create_marker_table()
        table = self.marker_table_bound
        assert table is not None  # set by create_marker_table
        values = {"target_table": self.target_table, "inserted": datetime.datetime.now()}
        with self._begin(connection) as conn:
            updated = conn.execute(
                table.update().where(table.c.update_id == self.update_id).values(**values)
            ).rowcount
            if not updated:
                conn.execute(table.insert().values(update_id=self.update_id, **values))

    def open(self, mode: str) -> Any:
        """Not supported: the target is a row in a database, not a file."""
        raise NotImplementedError(f"{self!r} is a marker row in a database table; it cannot be open()ed")


def _reset_engine_lock_in_child() -> None:
    # A fork taken while another thread held the lock would leave it locked forever in the child.
    SQLAlchemyTarget._engine_lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_engine_lock_in_child)


# -- the copy task ------------------------------------------------------------------------------------------


class CopyToTable(Task):
    """Insert the rows of ``rows()`` into ``table`` at ``connection_string``, then mark the copy done.

    Set ``connection_string``, ``table`` and either ``columns`` (entries ``([name, sqlalchemy_type],
    {column keyword arguments})``, used to create the table when missing) or ``reflect = True`` (copy into
    an existing table, with one value per table column in its order). By default ``rows()`` reads the
    input file, one row per line, values split by ``column_separator``. Rows go in chunks of ``chunk_size``
    in one transaction with the marker row: a failure leaves neither rows nor marker (only the table, which
    is created first), and a finished copy is never repeated.
    """

    echo: bool = False
    connect_args: Mapping[str, Any] = {}
    columns: Sequence[Any] = []
    reflect: bool = False
    column_separator: str = "\t"
    chunk_size: int = 5000
    table_bound: sqlalchemy.Table | None = None

    @property
    @abc.abstractmethod
    def connection_string(self) -> str | URL:
        """The SQLAlchemy URL of the database, e.g. ``postgresql+psycopg://user:pw@host/db``."""

    @property
    @abc.abstractmethod
    def table(self) -> str:
        """The table the rows go into (``schema.table`` names a schema)."""

    def update_id(self) -> str:
        """The key of this copy in the marker table: the task id, so each parameter set copies once."""
        return self.task_id

    def output(self) -> SQLAlchemyTarget:
        """The marker row of this copy."""
        return SQLAlchemyTarget(
            connection_string=self.connection_string,
            target_table=self.table,
            update_id=self.update_id(),
            echo=self.echo,
            connect_args=self.connect_args,
        )

    def rows(self) -> Iterable[Sequence[Any]]:
        """The rows to insert: by default each line of the input, split by ``column_separator``."""
        with self.input().open("r") as lines:
            for line in lines:
                yield line.rstrip("\r\n").split(self.column_separator)

    # -- the table -----------------------------------------------------------------------------------------

    def create_table(self, engine: Engine) -> None:
        """Set ``table_bound`` to the table rows go into, creating it from ``columns`` when missing.

        With ``reflect`` the existing table's definition is used (it must exist). Otherwise an existing
        table must have every declared column, or TableDefinitionError names what it lacks.
        """
        schema, name = self._schema_and_name()
        if self.reflect:
            self.table_bound = self._reflected_table(engine, schema, name)
            return
        declared = self._declared_table(schema, name)
        existing = self._existing_columns(engine, schema, name)
        if existing is None:
            _create_table_once(engine, declared, self.table)
        else:
            self._check_has_columns(engine, declared, existing)
        self.table_bound = declared

    def _schema_and_name(self) -> tuple[str | None, str]:
        schema, _, name = self.table.rpartition(".")
        return schema or None, name

    def _reflected_table(self, engine: Engine, schema: str | None, name: str) -> sqlalchemy.Table:
        with _transaction(engine, self.table) as conn:
            if not sqlalchemy.inspect(conn).has_table(name, schema=schema):
                raise TableDefinitionError(
                    f"{type(self).__name__} has reflect = True but table {self.table!r} does not exist at "
                    f"{safe_url(engine.url)}: create it first, or declare columns and leave reflect False"
                )
            return sqlalchemy.Table(name, sqlalchemy.MetaData(), schema=schema, autoload_with=conn)

    def _declared_table(self, schema: str | None, name: str) -> sqlalchemy.Table:
        if not self.columns:
            raise NotImplementedError(
                f"{type(self).__name__} declares no columns for table {self.table!r}: set columns = "
                "[([name, sqlalchemy_type], {keyword arguments}), ...], or reflect = True to use the "
                "existing table's, or override create_table()"
            )
        columns = [self._declared_column(entry, number) for number, entry in enumerate(self.columns, 1)]
        return sqlalchemy.Table(name, sqlalchemy.MetaData(), *columns, schema=schema)

    def _declared_column(self, entry: Any, number: int) -> sqlalchemy.Column[Any]:
        try:
            args, kwargs = entry
            return sqlalchemy.Column(*args, **kwargs)
        except (TypeError, ValueError, sqlalchemy.exc.ArgumentError) as exc:
            raise TableDefinitionError(
                f"columns entry {number} of {type(self).__name__} (table {self.table!r}) is {entry!r}, "
                f"not ([name, sqlalchemy_type], {{keyword arguments}}): {exc}"
            ) from None

    def _existing_columns(self, engine: Engine, schema: str | None, name: str) -> list[str] | None:
        with _transaction(engine, self.table) as conn:
            inspector = sqlalchemy.inspect(conn)
            if not inspector.has_table(name, schema=schema):
                return None
            return [column["name"] for column in inspector.get_columns(name, schema=schema)]

    def _check_has_columns(self, engine: Engine, declared: sqlalchemy.Table, existing: list[str]) -> None:
        missing = [column.name for column in declared.columns if column.name not in existing]
        if missing:
            raise TableDefinitionError(
                f"Table {self.table!r} at {safe_url(engine.url)} already exists with columns "
                f"({', '.join(existing)}), which lack the declared {', '.join(missing)}. Copy into another "
                "table, migrate this one, or set reflect = True to copy into it as it is."
            )

    # -- the copy ------------------------------------------------------------------------------------------

    def run(self) -> None:
        """Create the tables if needed, then copy every row and the marker in one transaction."""
        output = self.output()
        logger.info("Copying into table %s (update id %s)", self.table, output.update_id)
        engine = output.engine
        self.create_table(engine)
        output.create_marker_table()
        with _transaction(engine, self.table) as conn:
            if output.exists(connection=conn):
                logger.info("Table %s already holds update %s: nothing to copy", self.table, output.update_id)
                return
            copied = self._copy_all(conn, engine)
            self._mark_done(output, conn, engine)
        logger.info("Copied %d rows into table %s (update id %s)", copied, self.table, output.update_id)

    def copy(self, conn: DBConnection, ins_rows: list[dict[str, Any]], table_bound: sqlalchemy.Table) -> None:
        """Insert one chunk; ``ins_rows`` map ``"_" + column key`` to each row's values."""
        bound: dict[str, Any] = {
            column.key: sqlalchemy.bindparam("_" + column.key) for column in table_bound.columns
        }
        conn.execute(table_bound.insert().values(bound), ins_rows)

    def _copy_all(self, conn: DBConnection, engine: Engine) -> int:
        table = self._bound_table()
        keys = ["_" + column.key for column in table.columns]
        rows = iter(self.rows())
        copied = 0
        while chunk := list(itertools.islice(rows, self._checked_chunk_size())):
            ins_rows = [self._row_values(keys, row, copied + offset) for offset, row in enumerate(chunk, 1)]
            try:
                self.copy(conn, ins_rows, table)
            except sqlalchemy.exc.DBAPIError as exc:
                raise CopyFailedError(
                    f"Inserting rows {copied + 1}-{copied + len(chunk)} into table {self.table!r} at "
                    f"{safe_url(engine.url)} failed, so the whole copy was rolled back: "
                    f"{_cause(exc, engine.url)}"
                ) from exc
            copied += len(chunk)
        return copied

    def _mark_done(self, output: SQLAlchemyTarget, conn: DBConnection, engine: Engine) -> None:
        try:
            output.touch(connection=conn)
        except sqlalchemy.exc.IntegrityError as exc:
            raise CopyFailedError(
                f"Another run marked update {output.update_id!r} of table {self.table!r} done while this one "
                f"copied, so this run's rows were rolled back: {_cause(exc, engine.url)}"
            ) from exc

    def _bound_table(self) -> sqlalchemy.Table:
        if self.table_bound is None:
            raise TableDefinitionError(
                f"{type(self).__name__}.create_table() did not set table_bound for table {self.table!r}"
            )
        return self.table_bound

    def _checked_chunk_size(self) -> int:
        if not isinstance(self.chunk_size, int) or self.chunk_size < 1:
            raise ValueError(
                f"{type(self).__name__}.chunk_size must be a positive int, got {self.chunk_size!r}"
            )
        return self.chunk_size

    def _row_values(self, keys: list[str], row: Sequence[Any], number: int) -> dict[str, Any]:
        values = list(row)
        if len(values) != len(keys):
            shown = repr(values)
            if len(shown) > _MAX_ROW_REPR:
                shown = shown[:_MAX_ROW_REPR] + "..."
            raise RowShapeError(
                f"Row {number} for table {self.table!r} has {len(values)} values, but the table has "
                f"{len(keys)} columns ({', '.join(key[1:] for key in keys)}): {shown}"
            )
        return dict(zip(keys, values, strict=True))
