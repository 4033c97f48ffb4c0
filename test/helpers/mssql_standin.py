"""A stand-in for pymssql's ``_mssql`` driver, for luigi.contrib.mssqldb's tests (no SQL Server runs here).

It answers exactly the statements ``MSSqlTarget`` sends, as SQL Server would: ``SELECT 1 FROM <marker>
WHERE update_id = %s`` (error 208 while the table is missing), the marker table's ``CREATE TABLE`` (error
2714 when it exists), and the ``IF NOT EXISTS ... INSERT ... ELSE UPDATE`` upsert; any other statement
raises, so a changed statement fails the test. Every connection and call is recorded. Not shipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MssqlDatabaseException", "MssqlStandIn"]

_SELECT = re.compile(r"^SELECT 1 FROM (\w+)\s+WHERE update_id = %s$")
_CREATE = re.compile(r"^CREATE TABLE (\w+) \(\s*id\s+BIGINT\s+NOT NULL IDENTITY\(1,1\),")
_UPSERT = re.compile(r"^IF NOT EXISTS\(SELECT 1\s+FROM (\w+)\s+WHERE update_id = %\(update_id\)s\)")


class MssqlDatabaseException(Exception):
    """pymssql's error for a statement the server refused, with SQL Server's error ``number``."""

    def __init__(self, number: int, message: str) -> None:
        super().__init__(message)
        self.number = number


@dataclass
class MssqlStandIn:
    """The server's marker tables ({table: {update_id: target_table}}) and what clients did."""

    tables: dict[str, dict[str, str]] = field(default_factory=dict)
    connects: list[dict[str, Any]] = field(default_factory=list)
    calls: list[tuple[str, str, Any]] = field(default_factory=list)
    refuse: bool = False
    MssqlDatabaseException = MssqlDatabaseException

    def connect(self, **settings: Any) -> _Connection:
        self.connects.append(settings)
        if self.refuse:
            message = "Unable to connect: Adaptive Server is unavailable or does not exist"
            raise MssqlDatabaseException(20009, f"{message} ({settings['server']})")
        return _Connection(self)


class _Connection:
    def __init__(self, server: MssqlStandIn) -> None:
        self._server = server
        self.closed = False

    def execute_row(self, query: str, params: Any = None) -> tuple[int] | None:
        self._server.calls.append(("execute_row", query, params))
        match = _SELECT.match(" ".join(query.split()))
        if match is None:
            raise MssqlDatabaseException(102, f"Incorrect syntax: {query!r}")
        rows = self._table(match.group(1))
        return (1,) if params[0] in rows else None

    def execute_non_query(self, query: str, params: Any = None) -> None:
        self._server.calls.append(("execute_non_query", query, params))
        text = " ".join(query.split())
        if created := _CREATE.match(text):
            name = created.group(1)
            if name in self._server.tables:
                raise MssqlDatabaseException(2714, f"There is already an object named '{name}'")
            self._server.tables[name] = {}
        elif upsert := _UPSERT.match(text):
            self._table(upsert.group(1))[params["update_id"]] = params["table"]
        else:
            raise MssqlDatabaseException(102, f"Incorrect syntax: {query!r}")

    def close(self) -> None:
        self.closed = True

    def _table(self, name: str) -> dict[str, str]:
        if name not in self._server.tables:
            raise MssqlDatabaseException(208, f"Invalid object name '{name}'.")
        return self._server.tables[name]
