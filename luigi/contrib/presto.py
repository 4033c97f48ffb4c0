"""Presto (and Trino's Presto protocol) queries as tasks, and tables or partitions as targets.

``PrestoTask`` runs its ``query`` through PyHive's Presto client, reporting the query's info page as the
task's tracking URL and its progress as it polls; its output is a ``PrestoTarget``, complete once its
table (or partition) has a row. Connection settings come from the ``[presto]`` section. Needs PyHive:
``pip install 'luigi[presto]'``.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Mapping
from contextlib import closing
from time import sleep
from typing import Any

import luigi
from luigi.contrib import rdbms
from luigi.contrib.optional import MissingExtraError
from luigi.task_register import Register

try:  # module attributes, so that tests can patch luigi.contrib.presto.Connection as Luigi's do
    from pyhive.exc import DatabaseError
    from pyhive.presto import Connection, Cursor
except ImportError:  # the module still imports; using a client says which extra to install

    class DatabaseError(Exception):  # type: ignore[no-redef]
        """Stands in for PyHive's error class while PyHive is not installed (it is never raised)."""

    Connection = Cursor = None

__all__ = [
    "PrestoClient",
    "PrestoTarget",
    "PrestoTask",
    "WithPrestoClient",
    "presto",
    "sleep",
]

WATCH = "watch"
FETCH = "fetch"
_DEFAULT_PROGRESS = 0.1


class presto(luigi.Config):  # noqa: N801  # Luigi's section name is the class name
    """The ``[presto]`` section: where the server is and how to log in."""

    host = luigi.Parameter(default="localhost", description="Presto coordinator host")
    port = luigi.IntParameter(default=8090, description="Presto coordinator port")
    user = luigi.Parameter(default="anonymous", description="user to run queries as")
    catalog = luigi.Parameter(default="hive", description="default catalog")
    password = luigi.OptionalParameter(default=None, description="password (then HTTPS is used)")
    protocol = luigi.Parameter(default="https", description="http or https")
    poll_interval = luigi.FloatParameter(default=1.0, description="seconds between status polls")


def _require_pyhive() -> None:
    if Connection is None:
        raise MissingExtraError(
            "luigi.contrib.presto needs the 'pyhive' package, which is not installed: "
            "pip install 'luigi[presto]' (or pip install 'pyhive[presto]')"
        )


class PrestoClient:
    """Runs queries on one PyHive connection, keeping the last status the server sent."""

    def __init__(self, connection: Any, sleep_time: float = 1) -> None:
        self._connection = connection
        self.sleep_time = sleep_time
        self._status: dict[str, Any] = {}

    @property
    def percentage_progress(self) -> float:
        """The query's progress in percent, as the server last reported it."""
        return float(self._status.get("stats", {}).get("progressPercentage", _DEFAULT_PROGRESS))

    @property
    def info_uri(self) -> str | None:
        """The address of the query's page on the Presto coordinator."""
        return self._status.get("infoUri")

    def execute(
        self, query: str, parameters: Any = None, mode: str | None = None
    ) -> Iterator[Any]:
        """Run ``query``, polling every ``sleep_time`` seconds until the server says it has finished.

        In ``watch`` mode (the default) yields each status; in ``fetch`` mode yields the result's rows
        once the query is done. A failed query raises PyHive's ``DatabaseError`` with Presto's message.
        """
        mode = mode or WATCH
        with closing(self._connection.cursor()) as cursor:
            cursor.execute(query, parameters)
            while True:
                sleep(self.sleep_time)
                status = cursor.poll()
                if not status:
                    break
                self._status = status
                if mode == WATCH:
                    yield status
            if mode == FETCH:
                yield from cursor.fetchall()


def _connection_arguments(task: Any) -> dict[str, Any]:
    """Every argument of PyHive's ``Cursor`` the task gives a value for (falsy values are left out)."""
    names = [name for name in inspect.signature(Cursor.__init__).parameters if name != "self"]
    return {name: value for name in names if (value := getattr(task, name, None))}


def _client_of(task: Any) -> PrestoClient:
    _require_pyhive()
    return PrestoClient(Connection(**_connection_arguments(task)), sleep_time=task.poll_interval)


class WithPrestoClient(Register):
    """The metaclass of ``PrestoTask``: gives the class a ``_client`` built from the task's settings."""

    def __new__(mcs, name: str, bases: tuple[type, ...], attrs: dict[str, Any]) -> Any:  # noqa: N804
        attrs.setdefault("_client", property(_client_of))
        return super().__new__(mcs, name, bases, attrs)


class PrestoTarget(luigi.Target):
    """A Presto table, or one partition of it: it exists once it holds at least one row."""

    def __init__(
        self,
        client: PrestoClient,
        catalog: str,
        database: str,
        table: str,
        partition: Mapping[Any, Any] | None = None,
    ) -> None:
        self._client = client
        self.catalog = catalog
        self.database = database
        self.table = table
        self.partition = partition
        self._count: int | None = None

    @property
    def _count_query(self) -> tuple[str, list[Any]]:
        partition = self.partition or {1: 1}
        where = " AND ".join(f"{key} = %s" for key in partition)
        query = (
            f"SELECT COUNT(*) AS cnt FROM {self.catalog}.{self.database}.{self.table} "
            f"WHERE {where} LIMIT 1"
        )
        return query, list(partition.values())

    def count(self) -> int:
        """The number of rows in the table or partition (asked once per target)."""
        if self._count is None:
            query, parameters = self._count_query
            self._count = int(next(self._client.execute(query, parameters, mode=FETCH))[0])
        return self._count

    def exists(self) -> bool:  # type: ignore[return]  # None on a database error, as Luigi's
        try:
            return self.count() > 0
        except DatabaseError:  # a missing table or catalog: not there yet
            pass


class PrestoTask(rdbms.Query, metaclass=WithPrestoClient):
    """Run ``query`` on Presto; done once the output table (or ``partition``) has rows."""

    query: Any = None  # set it in a subclass (a string or a property)
    _client: PrestoClient  # (given by WithPrestoClient)

    @property
    def host(self) -> str:
        return str(presto().host)

    @property
    def port(self) -> int:  # type: ignore[override]  # a property here, a class attribute in rdbms
        return int(presto().port)

    @property
    def user(self) -> str:
        return str(presto().user)

    @property
    def username(self) -> str:
        return self.user

    @property
    def schema(self) -> str:
        return self.database

    @property
    def password(self) -> str | None:  # type: ignore[override]  # None (no password) as Luigi's
        return presto().password

    @property
    def catalog(self) -> str:
        return str(presto().catalog)

    @property
    def poll_interval(self) -> float:
        return float(presto().poll_interval)

    @property
    def source(self) -> str:
        return "pyhive"

    @property
    def partition(self) -> Mapping[Any, Any] | None:
        return None

    @property
    def protocol(self) -> str:
        return "https" if self.password else str(presto().protocol)

    @property
    def session_props(self) -> Mapping[str, Any] | None:
        return None

    @property
    def requests_session(self) -> Any:
        return None

    @property
    def requests_kwargs(self) -> dict[str, Any]:
        return {"verify": False}

    def run(self) -> None:
        client = self._client
        track, progress = self.set_tracking_url, self.set_progress_percentage  # (given while running)
        tracking = False
        for _status in client.execute(self.query):
            if not tracking and client.info_uri and track is not None:
                track(client.info_uri)
                tracking = True
            if progress is not None:
                progress(client.percentage_progress)

    def output(self) -> PrestoTarget:
        return PrestoTarget(
            client=self._client,
            catalog=self.catalog,
            database=self.database,
            table=self.table,
            partition=self.partition,
        )
