"""A real ``redis-server`` for the tests: one open, one with ``--requirepass``, each on a free loopback port.

Use them from a test module with ``pytest_plugins = ["helpers.redis_server"]`` (importing the fixture
functions instead makes ruff see each test parameter as a redefinition, F811). Each is session-scoped
(so one per xdist worker), keeps nothing on disk (``--save ''``, no append-only file) and is stopped at
the end of the session.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from helpers.luigid import free_port, wait_until
from helpers.services import require_module, require_program

START_ATTEMPTS = 3
STOP_TIMEOUT = 10.0


@dataclass(frozen=True)
class RedisServer:
    """Where a running test server listens, and the password it demands (None: no AUTH)."""

    host: str
    port: int
    password: str | None = None

    def client(self, db: int = 0) -> Any:
        """A plain redis-py client, for checking what the server holds."""
        import redis

        return redis.Redis(host=self.host, port=self.port, db=db, password=self.password)


def _answers(server: RedisServer, process: subprocess.Popen[bytes]) -> bool:
    """True once the server answers PING; raises if the process died (the port was taken, say)."""
    import redis

    if process.poll() is not None:
        raise RuntimeError(f"redis-server on port {server.port} exited with code {process.returncode}")
    try:
        return bool(server.client().ping())
    except redis.exceptions.ConnectionError:
        return False


def _launch(program: str, workdir: Path, password: str | None) -> tuple[RedisServer, subprocess.Popen[bytes]]:
    """Start redis-server on a free port and wait until it answers."""
    server = RedisServer(host="127.0.0.1", port=free_port(), password=password)
    args = [program, "--port", str(server.port), "--bind", server.host, "--dir", str(workdir)]
    args += ["--save", "", "--appendonly", "no", "--daemonize", "no"]
    if password is not None:
        args += ["--requirepass", password]
    log = open(workdir / f"redis-{server.port}.log", "wb")  # noqa: SIM115 - the server owns it until stop
    process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
    log.close()
    try:
        wait_until(lambda: _answers(server, process), what=f"redis-server on port {server.port}")
    except (RuntimeError, AssertionError):
        _stop(process)
        raise
    return server, process


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate the server, killing it if it does not exit in time."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT)


@contextlib.contextmanager
def running_redis(workdir: Path, password: str | None = None) -> Iterator[RedisServer]:
    """A redis-server for the duration of the block; retries on a port lost to another process."""
    require_module("redis", "redis")
    program = require_program("redis-server", "redis-server")
    workdir.mkdir(parents=True, exist_ok=True)
    for attempt in range(START_ATTEMPTS):
        try:
            server, process = _launch(program, workdir, password)
            break
        except RuntimeError:
            if attempt + 1 == START_ATTEMPTS:
                raise
    try:
        yield server
    finally:
        _stop(process)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server without a password."""
    with running_redis(tmp_path_factory.mktemp("redis-open")) as server:
        yield server


@pytest.fixture(scope="session")
def redis_server_with_password(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server that demands a password (``--requirepass``)."""
    with running_redis(tmp_path_factory.mktemp("redis-auth"), password="s3cr3t-redis-pw-7f2c") as server:
        yield server
