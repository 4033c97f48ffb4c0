"""A stand-in Presto coordinator: the HTTP statement protocol over SQLite, for luigi.contrib.presto's tests.

No Presto server can run here. This serves the client protocol as Presto documents it: ``POST
/v1/statement`` with the SQL as the body and the ``X-Presto-User``/``-Catalog``/``-Schema`` headers
answers with the query's ``id``, ``infoUri``, ``stats`` and a ``nextUri``; each ``GET`` of ``nextUri``
moves the query on (QUEUED, RUNNING with a rising ``progressPercentage``, FINISHED with ``columns`` and
``data`` and no ``nextUri``); a failing query answers with an ``error`` object (``message``,
``errorName``, ``errorType``). Statements run in SQLite, with ``catalog.schema.table`` read as the
attached database ``schema``'s ``table``. Not shipped in the package.
"""

from __future__ import annotations

import itertools
import re
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from helpers.json_http import JsonHandler, serving

__all__ = ["PrestoStandIn", "running_presto"]

_QUALIFIED = re.compile(r"\b(\w+)\.(\w+)\.(\w+)\b")
PROGRESS_STEPS = (0.0, 40.0, 80.0)  # a query's progress on its QUEUED page and its two RUNNING pages


@dataclass
class _Query:
    id: str
    sql: str
    page: int = 0
    rows: list[list[Any]] = field(default_factory=list)
    columns: list[dict[str, str]] = field(default_factory=list)
    error: str | None = None


class PrestoStandIn:
    """The coordinator's state: one SQLite database, the queries in flight and what each request asked."""

    def __init__(self, catalog: str, schemas: tuple[str, ...]) -> None:
        self.catalog = catalog
        self._db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        for schema in schemas:
            self._db.execute(f"ATTACH DATABASE ':memory:' AS {schema}")
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._queries: dict[str, _Query] = {}
        self.statements: list[tuple[str, dict[str, str]]] = []  # (SQL, Presto headers) as received
        self.url = ""

    def sql(self, statement: str) -> list[Any]:
        """Run ``statement`` directly (to seed or inspect tables), in the stand-in's own dialect."""
        with self._lock:
            return self._db.execute(self._local(statement)).fetchall()

    def _local(self, statement: str) -> str:
        def schema_table(match: re.Match[str]) -> str:
            catalog, schema, table = match.groups()
            return f"{schema}.{table}" if catalog == self.catalog else match.group(0)

        return _QUALIFIED.sub(schema_table, statement)

    def submit(self, sql: str, headers: dict[str, str]) -> dict[str, Any]:
        with self._lock:
            query = _Query(id=f"20240101_000000_{next(self._ids):05d}_standin", sql=sql)
            self._queries[query.id] = query
            self.statements.append((sql, headers))
        return self._page(query)

    def advance(self, query_id: str) -> dict[str, Any] | None:
        with self._lock:
            query = self._queries.get(query_id)
            if query is None:
                return None
            query.page += 1
            if query.page == len(PROGRESS_STEPS) - 1:
                self._run(query)
        return self._page(query)

    def _run(self, query: _Query) -> None:
        try:
            cursor = self._db.execute(self._local(query.sql))
        except sqlite3.Error as error:
            query.error = str(error)
            return
        if cursor.description is None:  # a write: Presto answers with the count of rows it wrote
            query.columns = [{"name": "rows", "type": "bigint"}]
            query.rows = [[cursor.rowcount]]
            return
        query.columns = [{"name": d[0], "type": "varchar"} for d in cursor.description]
        query.rows = [list(row) for row in cursor.fetchall()]

    def _page(self, query: _Query) -> dict[str, Any]:
        page: dict[str, Any] = {"id": query.id, "infoUri": f"{self.url}/ui/query.html?{query.id}"}
        if query.error is not None:
            page["stats"] = {"state": "FAILED"}
            page["error"] = {
                "message": query.error,
                "errorCode": 1,
                "errorName": "SYNTAX_ERROR" if "syntax" in query.error else "TABLE_NOT_FOUND",
                "errorType": "USER_ERROR",
            }
            return page
        if query.page < len(PROGRESS_STEPS):
            state = "QUEUED" if query.page == 0 else "RUNNING"
            page["stats"] = {"state": state, "progressPercentage": PROGRESS_STEPS[query.page]}
            page["nextUri"] = f"{self.url}/v1/statement/{query.id}/{query.page + 1}"
            return page
        page["stats"] = {"state": "FINISHED", "progressPercentage": 100.0}
        page["columns"] = query.columns
        page["data"] = query.rows
        return page


def _handler(coordinator: PrestoStandIn) -> type[JsonHandler]:
    class Handler(JsonHandler):
        def do_POST(self) -> None:  # noqa: N802
            if self.path != "/v1/statement":
                self.reply(404, {"message": f"no such resource {self.path}"})
                return
            body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
            headers = {k: v for k, v in self.headers.items() if k.lower().startswith("x-presto-")}
            self.reply(200, coordinator.submit(body, headers))

        def do_GET(self) -> None:  # noqa: N802
            parts = self.path.strip("/").split("/")
            page = None
            if len(parts) == 4 and parts[:2] == ["v1", "statement"]:
                page = coordinator.advance(parts[2])
            if page is None:
                self.reply(404, {"message": f"no such query {self.path}"})
                return
            self.reply(200, page)

    return Handler


@contextmanager
def running_presto(catalog: str = "hive", schemas: tuple[str, ...] = ("db1",)) -> Iterator[PrestoStandIn]:
    """A stand-in coordinator on a free loopback port; ``.url`` is its base address."""
    coordinator = PrestoStandIn(catalog, schemas)
    with serving(_handler(coordinator), "presto-standin") as url:
        coordinator.url = url
        yield coordinator
