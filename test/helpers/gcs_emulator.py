"""A real gcp-storage-emulator (PyPI) on a free loopback port, reached through GCSClient's ``descriptor``.

Use it from a test module with ``pytest_plugins = ["helpers.gcs_emulator"]``. Session-scoped (one per
xdist worker), its data in a private temporary folder, stopped at the end of the session. The emulator runs
in a child process (`gcs_emulator_main.py`), which first puts right the two calls it gets wrong (an empty
simple upload, the batch answer's parts: see that file).
"""

from __future__ import annotations

import json
import selectors
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from helpers.services import require_module, unavailable

START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
LAUNCHER = Path(__file__).with_name("gcs_emulator_main.py")


def storage_descriptor(root_url: str) -> dict[str, Any]:
    """The storage v1 discovery document googleapiclient ships, pointed at ``root_url``: how a user sends
    `GCSClient` to an emulator or a proxy (uploads and batches included)."""
    import googleapiclient

    bundled = Path(googleapiclient.__file__).parent / "discovery_cache" / "documents" / "storage.v1.json"
    document: dict[str, Any] = json.loads(bundled.read_text())
    document["rootUrl"] = root_url
    return document


@dataclass(frozen=True)
class GCSEmulator:
    """Where the emulator listens."""

    host: str
    port: int

    @property
    def root_url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    def client(self, **kwargs: Any) -> Any:
        """A `GCSClient` on the emulator, unauthenticated (the emulator checks no credentials)."""
        import httplib2

        from luigi.contrib.gcs import GCSClient

        kwargs.setdefault("http_", httplib2.Http())
        return GCSClient(descriptor=storage_descriptor(self.root_url), **kwargs)


def _read_port(process: subprocess.Popen[str]) -> int:
    """The port the launcher prints, within the deadline; RuntimeError if it exits or stays silent."""
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout=START_TIMEOUT):
            raise RuntimeError(f"gcp-storage-emulator printed no port within {START_TIMEOUT}s")
    line = process.stdout.readline()
    if not line.startswith("port "):
        raise RuntimeError(
            f"gcp-storage-emulator exited ({process.wait()}) before listening: see emulator.log"
        )
    return int(line.split()[1])


def _stop(process: subprocess.Popen[str]) -> None:
    process.terminate()
    try:
        process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="session")
def gcs_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GCSEmulator]:
    require_module("googleapiclient", "test")
    try:
        import gcp_storage_emulator  # noqa: F401
    except ImportError:
        unavailable("gcp-storage-emulator is not installed (pip install -e '.[test]')")
    workdir = tmp_path_factory.mktemp("gcs-emulator")
    log = (workdir / "emulator.log").open("wb")
    args = [sys.executable, str(LAUNCHER), "127.0.0.1", str(workdir / "data"), "luigi-default"]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True, cwd=workdir)
    try:
        yield GCSEmulator("127.0.0.1", _read_port(process))
    finally:
        _stop(process)
        log.close()
