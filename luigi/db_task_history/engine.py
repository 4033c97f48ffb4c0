"""Where the history lives: the database URL from ``[task_history]``, and a SQLAlchemy engine for it.

SQLite (a file beside the scheduler's ``state_path``) is the default; any SQLAlchemy URL works, and
PostgreSQL (``postgresql+psycopg://...``) is the production choice. SQLite runs in WAL mode so the
pages can read while the writer writes; server databases get a connect timeout, so an unreachable
server is noticed in seconds, and pre-pinged connections, so a restarted server is reconnected to.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import StaticPool

from luigi.database import sqlite_engine
from luigi.db_task_history.errors import TaskHistoryError

SECTION = "task_history"
_CONNECT_TIMEOUT_S = 5
_SQLITE_BUSY_TIMEOUT_MS = 10_000


def default_sqlite_path(state_path: str) -> Path:
    """The history file beside ``[scheduler] state_path``: ``state.pickle`` -> ``state.history.sqlite``."""
    path = Path(state_path).expanduser().absolute()
    return path.with_name(f"{path.stem}.history.sqlite")


def configured_url() -> URL:
    """``[task_history] db_connection``, or the SQLite file beside ``[scheduler] state_path``."""
    from luigi import configuration

    config = configuration.get_config()
    connection = config.get(SECTION, "db_connection", None)
    if connection:
        return parse_url(str(connection))
    state_path = config.get("scheduler", "state_path", "/var/lib/luigi-server/state.pickle")
    return URL.create("sqlite", database=str(default_sqlite_path(str(state_path))))


def parse_url(url: str | URL) -> URL:
    """``url`` as a SQLAlchemy URL, or TaskHistoryError naming the bad value."""
    if isinstance(url, URL):
        return url
    try:
        return make_url(url)
    except ArgumentError:
        raise TaskHistoryError(
            f"[task_history] db_connection {url!r} is not a SQLAlchemy URL "
            "(expected e.g. sqlite:////var/lib/luigi/history.sqlite or postgresql+psycopg://user@host/db)"
        ) from None


def describe(url: URL) -> str:
    """The URL for messages, password hidden."""
    return url.render_as_string(hide_password=True)


def sqlite_file(url: URL) -> Path | None:
    """The file of a SQLite URL (None for in-memory SQLite and for server databases)."""
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return Path(str(url.database)).expanduser().absolute()


def make_engine(url: URL) -> Engine:
    """An engine for ``url`` set up for a background writer and concurrent page reads."""
    if url.get_backend_name() == "sqlite":
        return _sqlite_engine(url)
    connect_args: dict[str, Any] = {}
    if url.get_backend_name() == "postgresql" and "connect_timeout" not in url.query:
        connect_args["connect_timeout"] = _CONNECT_TIMEOUT_S
    try:
        return create_engine(url, pool_pre_ping=True, connect_args=connect_args)
    except (ArgumentError, ImportError) as exc:
        raise TaskHistoryError(
            f"Cannot use the task history database {describe(url)}: {exc}. For PostgreSQL install the "
            "driver (pip install 'psycopg[binary]') and use a postgresql+psycopg:// URL."
        ) from None


def _sqlite_engine(url: URL) -> Engine:
    path = sqlite_file(url)
    if path is None:  # one shared in-memory database for every thread
        return sqlite_engine(url, True, _SQLITE_BUSY_TIMEOUT_MS, StaticPool)
    _prepare_directory(path)
    return sqlite_engine(url, True, _SQLITE_BUSY_TIMEOUT_MS)


def _prepare_directory(path: Path) -> None:
    if path.is_dir():
        raise TaskHistoryError(f"The task history file {path} is a directory; give a file name")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TaskHistoryError(
            f"Cannot create the directory of the task history file {path}: {exc}. Set [task_history] "
            "db_connection, or [scheduler] state_path, to a writable place."
        ) from None
