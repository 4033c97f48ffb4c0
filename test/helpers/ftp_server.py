"""A throwaway FTP or FTPS server for tests: pyftpdlib in a child process, one user, a home dir in tmp.

``running_ftp_server(workdir, tls=...)`` starts ``python ftp_server.py`` on a port-0 socket (the child
reports the port it got through a file), waits until it greets, and stops it when the block ends. With
``tls=True`` it makes a self-signed certificate for 127.0.0.1 with ``openssl`` and requires TLS on both
channels. ``machine_listings=False`` turns MLST/MLSD off, like older servers.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

START_TIMEOUT = 20.0
USERNAME = "luigi"
PASSWORD = "pa55-w0rd-for-tests"


@dataclass(frozen=True)
class FtpServer:
    """Where a running test FTP server listens, its one account, and the directory it serves."""

    host: str
    port: int
    username: str
    password: str
    home: Path
    certificate: Path | None  # the server's self-signed certificate, for the client to trust (FTPS only)
    log_file: Path

    def log(self) -> str:
        """What the server logged so far (for a failing test's message)."""
        return self.log_file.read_text(errors="replace")


def _make_certificate(workdir: Path) -> tuple[Path, Path]:
    from helpers.services import require_program

    openssl = require_program("openssl", "openssl")
    cert, key = workdir / "cert.pem", workdir / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        + ["-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1"]
        + ["-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )
    return cert, key


def _greets(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as conn:
            return conn.recv(3) == b"220"
    except OSError:
        return False


def _read_port(port_file: Path) -> int | None:
    try:
        return int(port_file.read_text())
    except (FileNotFoundError, ValueError):
        return None


@contextlib.contextmanager
def running_ftp_server(
    workdir: Path, tls: bool = False, machine_listings: bool = True
) -> Iterator[FtpServer]:
    """Run the server for the duration of the block."""
    from helpers.luigid import wait_until
    from helpers.services import require_module

    require_module("pyftpdlib", "test")
    if tls:
        require_module("OpenSSL", "test")
    home, port_file, log_file = workdir / "home", workdir / "port", workdir / "ftpd.log"
    home.mkdir()
    command = [sys.executable, __file__, "--home", str(home), "--port-file", str(port_file)]
    cert = None
    if tls:
        cert, key = _make_certificate(workdir)
        command += ["--certfile", str(cert), "--keyfile", str(key)]
    if not machine_listings:
        command.append("--no-machine-listings")
    with log_file.open("ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: _read_port(port_file) or process.poll() is not None, START_TIMEOUT, "the FTP port")
        port = _read_port(port_file)
        if process.poll() is not None or port is None:
            raise RuntimeError(f"the test FTP server did not start:\n{log_file.read_text(errors='replace')}")
        wait_until(lambda: _greets(port), START_TIMEOUT, f"the FTP server on port {port}")
        yield FtpServer("127.0.0.1", port, USERNAME, PASSWORD, home, cert, log_file)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _serve(args: argparse.Namespace) -> None:
    """The child process: serve ``--home`` to the test user until terminated."""
    from pyftpdlib.authorizers import DummyAuthorizer
    from pyftpdlib.handlers import FTPHandler, TLS_FTPHandler
    from pyftpdlib.servers import FTPServer

    authorizer = DummyAuthorizer()
    authorizer.add_user(USERNAME, PASSWORD, args.home, perm="elradfmwMT")
    base = TLS_FTPHandler if args.certfile else FTPHandler
    handler = type("TestHandler", (base,), {"authorizer": authorizer, "proto_cmds": dict(base.proto_cmds)})
    handler.auth_failed_timeout = 0.05  # pyftpdlib stalls 3 s after a wrong password; tests try on purpose
    if args.certfile:
        handler.certfile, handler.keyfile = args.certfile, args.keyfile
        handler.tls_control_required = handler.tls_data_required = True
    if args.no_machine_listings:
        for command in ("MLST", "MLSD"):
            del handler.proto_cmds[command]
    server = FTPServer(("127.0.0.1", 0), handler)
    port_file = Path(args.port_file)
    staging = port_file.with_suffix(".tmp")
    staging.write_text(str(server.address[1]))
    staging.replace(port_file)  # the test reads a whole number or nothing
    server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--home", required=True)
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--certfile")
    parser.add_argument("--keyfile")
    parser.add_argument("--no-machine-listings", action="store_true")
    _serve(parser.parse_args())
