"""A throwaway OpenSSH server for tests: its own host key, client key and config, on a free loopback port.

``running_sshd(workdir)`` generates the keys with ``ssh-keygen``, writes an ``sshd_config`` that accepts
only the generated client key, runs ``sshd -D -e`` and waits until it greets; leaving the block stops it.
The login user is whoever runs the tests (root in CI), so remote paths are plain local paths under
``workdir``, and a test can check what a client wrote by looking at the disk.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from helpers.luigid import free_port, wait_until
from helpers.services import require_program, unavailable

START_ATTEMPTS = 3
GREETING_TIMEOUT = 15.0


@dataclass(frozen=True)
class SshServer:
    """Where a running test sshd listens, who may log in, and with which key."""

    host: str
    port: int
    username: str
    key_file: str
    root: Path  # a scratch directory on the "remote" host, empty when the server starts
    log_file: Path

    def log(self) -> str:
        """What sshd printed so far (for a failing test's message)."""
        return self.log_file.read_text(errors="replace")


def _generate_keys(workdir: Path, keygen: str) -> tuple[Path, Path]:
    """A host key and a client key pair, both without passphrase."""
    host_key = workdir / "ssh_host_ed25519_key"
    client_key = workdir / "client_ed25519"
    for path in (host_key, client_key):
        subprocess.run(
            [keygen, "-q", "-t", "ed25519", "-N", "", "-C", "luigi-test", "-f", str(path)],
            check=True,
            capture_output=True,
        )
    return host_key, client_key


def _write_config(workdir: Path, port: int, host_key: Path, client_key: Path) -> Path:
    config = workdir / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"Port {port}",
                "ListenAddress 127.0.0.1",
                f"HostKey {host_key}",
                f"AuthorizedKeysFile {client_key}.pub",
                "PubkeyAuthentication yes",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "PermitRootLogin prohibit-password",
                "UsePAM no",
                "StrictModes no",
                "AllowTcpForwarding yes",
                f"PidFile {workdir / 'sshd.pid'}",
                "Subsystem sftp internal-sftp",
                "LogLevel VERBOSE",
                "",
            ]
        )
    )
    return config


def _greets(port: int) -> bool:
    """Whether an SSH server answers on ``port`` with its version banner."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as conn:
            return conn.recv(4).startswith(b"SSH-")
    except OSError:
        return False


def _ensure_privsep_dir() -> None:
    """Debian's sshd refuses to start without its privilege separation directory."""
    if os.path.isdir("/run/sshd"):
        return
    try:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    except PermissionError:
        unavailable("sshd needs /run/sshd, which is missing and cannot be created by this user")


def _start(sshd: str, config: Path, log_file: Path) -> subprocess.Popen[bytes]:
    with log_file.open("ab") as log:
        return subprocess.Popen(
            [sshd, "-D", "-e", "-f", str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _serve(sshd: str, workdir: Path, host_key: Path, client_key: Path) -> tuple[subprocess.Popen[bytes], int]:
    """Start sshd on a free port, trying again if another process took the port in the meantime."""
    log_file = workdir / "sshd.log"
    for _attempt in range(START_ATTEMPTS):
        port = free_port()
        process = _start(sshd, _write_config(workdir, port, host_key, client_key), log_file)
        try:
            wait_until(
                lambda p=process, n=port: _greets(n) or p.poll() is not None,  # type: ignore[misc]
                timeout=GREETING_TIMEOUT,
                what=f"sshd on port {port}",
            )
        except AssertionError:
            _stop(process)
            raise
        if process.poll() is None:
            return process, port
    raise RuntimeError(f"sshd did not start; its log:\n{log_file.read_text(errors='replace')}")


@contextlib.contextmanager
def running_sshd(workdir: Path) -> Iterator[SshServer]:
    """Run an sshd for the current user on 127.0.0.1 for the duration of the block."""
    sshd = require_program("sshd", "openssh-server")
    require_program("ssh", "openssh-client")
    require_program("scp", "openssh-client")
    keygen = require_program("ssh-keygen", "openssh-client")
    _ensure_privsep_dir()
    host_key, client_key = _generate_keys(workdir, keygen)
    process, port = _serve(sshd, workdir, host_key, client_key)
    root = workdir / "remote"
    root.mkdir()
    try:
        yield SshServer("127.0.0.1", port, getpass.getuser(), str(client_key), root, workdir / "sshd.log")
    finally:
        _stop(process)
