"""Running luigid in tests: a real ``luigid`` subprocess, or the server in a thread of the test process.

``running_luigid(tmp_path)`` starts the real command on a free port with its own config file and state
path, and waits (with a deadline) until ``HEAD /`` answers 204. ``serving_in_thread(scheduler)`` serves
a scheduler the test holds, on a port-0 socket. ``HttpProbe`` sends raw requests to either (TCP or a
Unix socket) and returns status, headers and body untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import psutil

from luigi.server import SchedulerServer, ServerSettings

LUIGID = Path(sys.executable).parent / "luigid"
START_TIMEOUT = 30.0


def wait_until(condition: Callable[[], Any], timeout: float = START_TIMEOUT, what: str = "condition") -> Any:
    """Poll ``condition`` until it returns something truthy (returned); AssertionError past the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a running process (a zombie counts as dead: nobody may reap a daemon here)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def listening_addresses(pid: int, port: int) -> list[str]:
    """The local IPs ``pid`` listens on at TCP ``port``."""
    connections = psutil.Process(pid).net_connections(kind="inet")
    return [c.laddr.ip for c in connections if c.status == psutil.CONN_LISTEN and c.laddr.port == port]


# -- raw HTTP ---------------------------------------------------------------------------------------------


class UnixHTTPConnection(http.client.HTTPConnection):
    """``http.client`` over an AF_UNIX socket."""

    def __init__(self, path: str, timeout: float = 10.0) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.socket_path)
        self.sock = sock


@dataclass
class Reply:
    """One HTTP answer as received."""

    status: int
    headers: http.client.HTTPMessage  # case-insensitive, as HTTP header names are
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class HttpProbe:
    """Sends one request per connection to a luigid, over TCP or a Unix socket, optionally with a token."""

    port: int | None = None
    host: str = "127.0.0.1"
    unix_socket: str | None = None
    token: str | None = None
    timeout: float = 10.0
    default_headers: dict[str, str] = field(default_factory=dict)

    def connection(self) -> http.client.HTTPConnection:
        if self.unix_socket is not None:
            return UnixHTTPConnection(self.unix_socket, timeout=self.timeout)
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def request(
        self, verb: str, path: str, body: Any = None, headers: Mapping[str, str] | None = None, **kwargs: Any
    ) -> Reply:
        """Send ``verb path`` with ``body`` (bytes, str or an iterable for chunked) and read the answer."""
        all_headers = dict(self.default_headers)
        if self.token is not None:
            all_headers["Authorization"] = f"Bearer {self.token}"
        all_headers.update(headers or {})
        connection = self.connection()
        try:
            connection.request(verb, path, body=body, headers=all_headers, **kwargs)
            response = connection.getresponse()
            return Reply(response.status, response.msg, response.read())
        finally:
            connection.close()

    def call(self, method: str, kwargs: Any = None, verb: str = "POST", **request_kwargs: Any) -> Reply:
        """``/api/<method>`` with ``data=<json kwargs>`` in the form body (POST) or the query (GET)."""
        data = urlencode({"data": json.dumps({} if kwargs is None else kwargs)})
        if verb == "GET":
            return self.request("GET", f"/api/{method}?{data}", **request_kwargs)
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        return self.request(verb, f"/api/{method}", body=data, headers=form, **request_kwargs)

    def batch(self, calls: list[dict[str, Any]], **request_kwargs: Any) -> Reply:
        """``POST /api/_batch`` with ``data={"calls": calls}``."""
        return self.call("_batch", {"calls": calls}, **request_kwargs)

    def health(self) -> int | None:
        """The status of ``HEAD /``, or None while nothing answers."""
        try:
            return self.request("HEAD", "/").status
        except (OSError, http.client.HTTPException):
            return None


# -- in-process ---------------------------------------------------------------------------------------------


@contextlib.contextmanager
def serving_in_thread(
    scheduler: Any, settings: ServerSettings | None = None, **server_kwargs: Any
) -> Iterator[SchedulerServer]:
    """Serve ``scheduler`` from a thread of this process (port 0 unless given) until the block ends."""
    server_kwargs.setdefault("port", 0)
    server = SchedulerServer(scheduler, settings or ServerSettings(), **server_kwargs)
    server.bind()
    failure: list[BaseException] = []

    def serve() -> None:
        try:
            asyncio.run(server.serve())
        except BaseException as exc:  # re-raised in the test thread below
            failure.append(exc)

    thread = threading.Thread(target=serve, name="luigid-test-server", daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.ready.is_set() or failure, what="the in-process server to listen")
        if failure:
            raise failure[0]
        yield server
    finally:
        server.stop()
        thread.join(timeout=START_TIMEOUT)
    if failure:
        raise failure[0]


def probe_for(server: SchedulerServer, token: str | None = None) -> HttpProbe:
    """An HttpProbe aimed at a server from ``serving_in_thread``."""
    if server.unix_socket is not None:
        return HttpProbe(unix_socket=server.unix_socket, token=token)
    return HttpProbe(port=server.bound_port(), token=token)


# -- a real luigid -------------------------------------------------------------------------------------------


@dataclass
class LuigidProcess:
    """A ``luigid`` subprocess started by ``running_luigid``."""

    process: subprocess.Popen
    workdir: Path
    log_path: Path
    state_path: Path
    port: int | None
    unix_socket: str | None

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def url(self) -> str:
        """The scheduler URL a client would use (``http://127.0.0.1:<port>/``)."""
        return f"http://127.0.0.1:{self.port}/"

    def probe(self, token: str | None = None) -> HttpProbe:
        return HttpProbe(port=self.port, unix_socket=self.unix_socket, token=token)

    def logs(self) -> str:
        """Everything luigid wrote to stdout and stderr so far."""
        return self.log_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = START_TIMEOUT) -> int:
        """Send ``sig`` and wait for the exit status (killed, and the test failed, past ``timeout``)."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=timeout)
            raise AssertionError(
                f"luigid did not stop within {timeout}s of {signal.Signals(sig).name}"
            ) from None


def luigid_env(workdir: Path, config: str = "", env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a luigid run in ``workdir``: its own config file, nothing inherited from ours."""
    config_file = workdir / "luigid-test.cfg"
    config_file.write_text(textwrap.dedent(config))
    full = {k: v for k, v in os.environ.items() if k not in ("LUIGI_CONFIG_PARSER", "LUIGI_AUTH_TOKEN")}
    full["LUIGI_CONFIG_PATH"] = str(config_file)
    full.update(env or {})
    return full


@contextlib.contextmanager
def running_luigid(
    workdir: Path,
    *args: str,
    config: str = "",
    env: Mapping[str, str] | None = None,
    unix_socket: str | None = None,
    timeout: float = START_TIMEOUT,
) -> Iterator[LuigidProcess]:
    """Start ``luigid`` (a free port, or ``unix_socket``), wait until ``HEAD /`` answers, stop it afterwards.

    ``args`` are extra command-line options; ``config`` is the text of its config file. Raises
    AssertionError with luigid's output if it exits or stays silent past ``timeout``.
    """
    for attempt in range(3):
        started = _start(workdir, args, config, env, unix_socket, attempt)
        try:
            wait_until(
                partial(_exited_or_answering, started),
                timeout=timeout,
                what=f"luigid to answer HEAD / ({started.log_path})",
            )
        except AssertionError:
            started.stop(signal.SIGKILL)
            raise
        if started.process.poll() is None:
            break
        if "Address already in use" not in started.logs() or unix_socket is not None:
            raise AssertionError(f"luigid exited with {started.process.returncode}:\n{started.logs()}")
    else:
        raise AssertionError("luigid found no free port in three attempts")
    try:
        yield started
    finally:
        if started.process.poll() is None:
            started.stop(signal.SIGTERM)


def _exited_or_answering(luigid: LuigidProcess) -> bool:
    return luigid.process.poll() is not None or luigid.probe().health() is not None


def _start(
    workdir: Path,
    args: tuple[str, ...],
    config: str,
    env: Mapping[str, str] | None,
    unix_socket: str | None,
    attempt: int,
) -> LuigidProcess:
    state_path = workdir / "luigid-state.db"
    log_path = workdir / f"luigid-{attempt}.log"
    port = None if unix_socket is not None else free_port()
    where = ["--unix-socket", unix_socket] if unix_socket is not None else ["--port", str(port)]
    argv = [str(LUIGID), *where, "--state-path", str(state_path), *args]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            argv, cwd=workdir, env=luigid_env(workdir, config, env), stdout=log, stderr=subprocess.STDOUT
        )
    return LuigidProcess(process, workdir, log_path, state_path, port, unix_socket)
