"""A PostgreSQL schema of a test's own on the test server, for the luigi.contrib postgres and redshift tests.

``pg`` (a fixture) creates the schema, points the ``[pg_test]`` settings at it and drops it afterwards;
``ServerSettings`` is the mixin that gives test tasks those settings.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import luigi
from helpers.postgres import require_postgres


@dataclass
class PgServer:
    """Where the test server is, the test's own schema, and a direct connection for checking."""

    host: str
    port: int
    database: str
    user: str
    password: str
    schema: str
    psycopg: Any  # kept here: some tests hide the module from the code under test

    def connect(self) -> Any:
        return self.psycopg.connect(
            host=self.host,
            port=self.port,
            dbname=self.database,
            user=self.user,
            password=self.password,
            autocommit=True,
        )

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        with self.connect() as connection:
            return connection.execute(sql, params).fetchall()

    def execute(self, sql: str) -> None:
        with self.connect() as connection:
            connection.execute(sql)

    def table_exists(self, name: str) -> bool:
        return bool(self.query("SELECT to_regclass(%s)::text", (f"{self.schema}.{name}",))[0][0])

    def markers(self) -> list[tuple]:
        if not self.table_exists("table_updates"):
            return []
        return self.query(f"SELECT update_id, target_table FROM {self.schema}.table_updates ORDER BY 1")

    def configure(self, password: str | None = None, port: int | None = None) -> None:
        """Point the test tasks (section ``[pg_test]``) at this server; the marker table in the schema."""
        config = luigi.configuration.get_config()
        config.set("postgres", "marker_table", f"{self.schema}.table_updates")
        config.set("pg_test", "host", self.host)
        config.set("pg_test", "port", str(port or self.port))
        config.set("pg_test", "database", self.database)
        config.set("pg_test", "user", self.user)
        config.set("pg_test", "password", password or self.password)


@pytest.fixture
def pg() -> Iterator[PgServer]:
    from sqlalchemy.engine import make_url

    url = make_url(require_postgres())
    import psycopg

    server = PgServer(
        host=str(url.host),
        port=int(url.port or 5432),
        database=str(url.database),
        user=str(url.username),
        password=str(url.password),
        schema=f"luigi_pg_{uuid.uuid4().hex[:12]}",
        psycopg=psycopg,
    )
    server.execute(f"CREATE SCHEMA {server.schema}")
    server.configure()
    try:
        yield server
    finally:
        server.execute(f"DROP SCHEMA {server.schema} CASCADE")


def _setting(name: str) -> str:
    return luigi.configuration.get_config().get("pg_test", name)


class ServerSettings:
    """Connection settings from config, as users keep them: never parameters, so never in task ids."""

    @property
    def host(self) -> str:
        return _setting("host")

    @property
    def port(self) -> int:
        return int(_setting("port"))

    @property
    def database(self) -> str:
        return _setting("database")

    @property
    def user(self) -> str:
        return _setting("user")

    @property
    def password(self) -> str:
        return _setting("password")
