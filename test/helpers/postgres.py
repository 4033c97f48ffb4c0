"""PostgreSQL for the tests: the throwaway server of ``scripts/start-postgres.sh``.

``postgres_url()`` finds it (``LUIGI_TEST_POSTGRES_URL``, else the URL the start script left in its
folder) and checks that it answers; ``require_postgres()`` skips the test when it does not, unless
``CI`` is set, where a missing server fails the test. ``fresh_schema(url)`` gives each test its own
schema (dropped afterwards), so tests never see each other's rows. ``private_cluster(port)`` starts a
server of the test's own with the same scripts, which the outage test stops and starts again.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
START_SCRIPT = REPO / "scripts" / "start-postgres.sh"
STOP_SCRIPT = REPO / "scripts" / "stop-postgres.sh"
URL_ENV = "LUIGI_TEST_POSTGRES_URL"
SCRIPT_TIMEOUT = 180.0


def _script_url() -> str | None:
    url_file = Path(os.environ.get("LUIGI_PG_DIR", "/tmp/luigi-test-postgres")) / "url"
    try:
        return url_file.read_text().strip() or None
    except OSError:
        return None


def configured_url() -> str | None:
    """The test server's SQLAlchemy URL, whether or not it is running."""
    return os.environ.get(URL_ENV) or _script_url()


def answers(url: str, timeout: int = 3) -> bool:
    """Whether the PostgreSQL server at ``url`` accepts a connection now."""
    try:
        import psycopg
        from sqlalchemy.engine import make_url
    except ImportError:
        return False
    parsed = make_url(url)
    try:
        with psycopg.connect(
            host=parsed.host,
            port=parsed.port or 5432,
            user=parsed.username,
            password=parsed.password,
            dbname=parsed.database,
            connect_timeout=timeout,
        ):
            return True
    except psycopg.Error:
        return False


def postgres_url() -> str | None:
    """The URL of a running test server, or None."""
    url = configured_url()
    return url if url is not None and answers(url) else None


def require_postgres() -> str:
    """The running server's URL; otherwise skip (locally) or fail (``CI`` set: CI starts the server)."""
    url = postgres_url()
    if url is not None:
        return url
    why = (
        f"no PostgreSQL server answers (start one with {START_SCRIPT.relative_to(REPO)} and export "
        f"{URL_ENV}; the psycopg driver is needed too)"
    )
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the PostgreSQL tests, but {why}")
    pytest.skip(why)


@contextlib.contextmanager
def fresh_schema(url: str) -> Iterator[str]:
    """A URL like ``url`` whose tables land in a new, empty schema (dropped when the block ends)."""
    from sqlalchemy import create_engine, text

    schema = f"luigi_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(url)
    try:
        with admin.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        separator = "&" if "?" in url else "?"
        yield f"{url}{separator}options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()


@dataclass
class PostgresCluster:
    """A PostgreSQL server of the start script in its own folder and port (``LUIGI_PG_DIR``/``_PORT``)."""

    folder: Path
    port: int

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://luigi_test:luigi_test@127.0.0.1:{self.port}/luigi_test"

    def start(self) -> None:
        """Start it (creating it the first time); returns once it accepts connections."""
        self._run(START_SCRIPT)

    def stop(self, purge: bool = False) -> None:
        """Stop it now (fast shutdown: clients are cut off, as in an outage); ``purge`` deletes it."""
        self._run(STOP_SCRIPT, *(["--purge"] if purge else []))

    def _run(self, script: Path, *args: str) -> None:
        env = dict(os.environ, LUIGI_PG_DIR=str(self.folder), LUIGI_PG_PORT=str(self.port))
        done = subprocess.run(
            ["bash", str(script), *args],
            capture_output=True,
            text=True,
            timeout=SCRIPT_TIMEOUT,
            check=False,
            env=env,
        )
        if done.returncode != 0:
            raise AssertionError(f"{script.name} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")


@contextlib.contextmanager
def private_cluster(port: int) -> Iterator[PostgresCluster]:
    """A server of its own for a test that stops and starts it (the shared one serves other tests).

    Its folder is directly under the temporary directory: the ``postgres`` user must be able to reach it.
    """
    require_postgres()
    cluster = PostgresCluster(Path(tempfile.mkdtemp(prefix="luigi-pg-")), port)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop(purge=True)
