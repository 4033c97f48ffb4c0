"""A real Azurite (Microsoft's Azure Storage emulator) Blob service on a free loopback port, for the tests.

Use it from a test module with ``pytest_plugins = ["helpers.azurite_server"]``. Session-scoped (one per
xdist worker), its data in a private temporary folder, stopped at the end of the session. Azurite comes
from npm (``npm install -g azurite``; ``scripts/ensure-test-services.sh`` installs it).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers.luigid import free_port, wait_until
from helpers.services import require_module, unavailable

# Azurite's documented development account (the same for every Azurite; not a secret).
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
START_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0


@dataclass(frozen=True)
class Azurite:
    """Where the emulator's Blob service listens."""

    host: str
    port: int

    @property
    def custom_domain(self) -> str:
        """``host:port``: with ``protocol='http'`` the client reaches ``http://host:port/<account>``."""
        return f"{self.host}:{self.port}"


def _listening(server: Azurite, process: subprocess.Popen[bytes]) -> bool:
    if process.poll() is not None:
        raise RuntimeError(f"azurite-blob exited ({process.returncode}) before listening: see azurite.log")
    with socket.socket() as probe:
        return probe.connect_ex((server.host, server.port)) == 0


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    require_module("azure.storage.blob", "test")
    program = shutil.which("azurite-blob")
    if program is None:
        unavailable("azurite-blob is not installed (npm install -g azurite@3.35.0)")
    workdir: Path = tmp_path_factory.mktemp("azurite")
    server = Azurite("127.0.0.1", free_port())
    args = [program, "--blobHost", server.host, "--blobPort", str(server.port)]
    args += ["--location", str(workdir), "--silent", "--skipApiVersionCheck", "--loose"]
    log = (workdir / "azurite.log").open("wb")
    process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: _listening(server, process), timeout=START_TIMEOUT)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
