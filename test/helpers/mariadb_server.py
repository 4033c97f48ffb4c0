"""A throwaway MariaDB server for the tests: ``mariadbd`` in a temp dir, on a free 127.0.0.1 port.

``mariadb_server`` (session-scoped, so once per xdist worker) initialises a data directory with
``mariadb-install-db``, starts ``mariadbd`` as the current user, and creates a login with a password
(grant tables on, so a wrong password is refused as in production). ``MariaDB.fresh_database()`` gives
each test its own database. Missing programs skip the tests locally and fail them when ``CI`` is set.

    from helpers.mariadb_server import mariadb_server  # noqa: F401 - a fixture
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from helpers.luigid import free_port, wait_until
from helpers.services import require_module, require_program

USER = "luigi_test"
PASSWORD = "mariadb-test-secret"
START_TIMEOUT = 60.0


@dataclass
class MariaDB:
    """A running server: where it listens, the test login, and an admin connection for checks."""

    host: str
    port: int
    user: str
    password: str
    socket: Path
    datadir: Path
    log: Path
    pymysql: Any  # kept here: some tests hide the module from the code under test

    def admin(self, database: str | None = None) -> Any:
        """A root connection over the Unix socket (autocommit), for setting up and checking."""
        return self.pymysql.connect(
            unix_socket=str(self.socket), user="root", database=database, autocommit=True, charset="utf8mb4"
        )

    def query(self, sql: str, params: tuple = (), database: str | None = None) -> list[tuple]:
        connection = self.admin(database)
        try:
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
                return list(cursor.fetchall())
        finally:
            connection.close()

    @contextlib.contextmanager
    def fresh_database(self) -> Iterator[str]:
        """A new, empty database (dropped when the block ends)."""
        name = f"luigi_{uuid.uuid4().hex[:12]}"
        self.query(f"CREATE DATABASE {name}")
        try:
            yield name
        finally:
            self.query(f"DROP DATABASE IF EXISTS {name}")


def _initialise(mariadbd_user: list[str], datadir: Path, tmpdir: Path, log: Path) -> None:
    install = require_program("mariadb-install-db", "mariadb-server")
    done = subprocess.run(
        [
            install,
            "--no-defaults",
            f"--datadir={datadir}",
            f"--tmpdir={tmpdir}",  # bootstraps of parallel test processes clash in a shared /tmp
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            *mariadbd_user,
        ],
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
        check=False,
        env=dict(os.environ, TMPDIR=str(tmpdir)),
    )
    log.write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise AssertionError(f"mariadb-install-db failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")


def _start(server: MariaDB, mariadbd_user: list[str]) -> subprocess.Popen:
    mariadbd = require_program("mariadbd", "mariadb-server")
    command = [
        mariadbd,
        "--no-defaults",
        f"--datadir={server.datadir}",
        f"--tmpdir={server.datadir.parent / 'tmp'}",
        f"--port={server.port}",
        "--bind-address=127.0.0.1",
        f"--socket={server.socket}",
        f"--pid-file={server.datadir / 'mariadbd.pid'}",
        f"--log-error={server.log}",
        "--skip-name-resolve",
        "--character-set-server=utf8mb4",
        "--collation-server=utf8mb4_unicode_ci",
        "--innodb-buffer-pool-size=32M",
        "--innodb-flush-log-at-trx-commit=0",
        *mariadbd_user,
    ]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _answers(server: MariaDB, process: subprocess.Popen) -> bool:
    if process.poll() is not None:
        log = server.log.read_text() if server.log.exists() else ""
        raise AssertionError(f"mariadbd exited with {process.returncode}:\n{log[-3000:]}")
    try:
        server.query("SELECT 1")
    except Exception:  # noqa: BLE001 - not up yet; the deadline reports a server that never answers
        return False
    return True


def _create_login(server: MariaDB) -> None:
    for host in ("127.0.0.1", "localhost"):
        server.query(f"CREATE USER '{USER}'@'{host}' IDENTIFIED BY '{PASSWORD}'")
        server.query(f"GRANT ALL PRIVILEGES ON *.* TO '{USER}'@'{host}'")


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


@pytest.fixture(scope="session")
def mariadb_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDB]:
    """A MariaDB server of this test process, with the login ``USER``/``PASSWORD``; stopped at the end."""
    require_module("pymysql", "mysql")
    import pymysql

    folder = tmp_path_factory.mktemp("mariadb")
    server = MariaDB(
        host="127.0.0.1",
        port=free_port(),
        user=USER,
        password=PASSWORD,
        socket=folder / "mariadbd.sock",
        datadir=folder / "data",
        log=folder / "mariadbd.log",
        pymysql=pymysql,
    )
    mariadbd_user = ["--user=root"] if os.geteuid() == 0 else []
    (folder / "tmp").mkdir()
    _initialise(mariadbd_user, server.datadir, folder / "tmp", folder / "install.log")
    process = _start(server, mariadbd_user)
    try:
        wait_until(lambda: _answers(server, process), timeout=START_TIMEOUT, what="mariadbd to answer")
        _create_login(server)
        yield server
    finally:
        _stop(process)
