"""The RPC client's HTTP/1.1 transport (``luigi.rpc.connection``), byte for byte.

A raw-socket server answers each request with scripted bytes, so every framing case is exact: how the
body is delimited, when the socket is kept or reopened, and which ``http.client`` exception a broken
answer raises (the RPC client retries on those, as it did when ``http.client`` did the talking).
"""

from __future__ import annotations

import http.client
import os
import shutil
import socket
import ssl
import subprocess
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from luigi.rpc.address import parse_scheduler_url, unix_socket_url
from luigi.rpc.connection import HTTPAnswer, KeepAliveConnection

DEADLINE = 10.0  # seconds any wait on the server may take before the test fails


def answer(
    body: bytes = b"ok", status: str = "200 OK", headers: str = "", version: str = "HTTP/1.1"
) -> bytes:
    """A complete response delimited by ``Content-Length``."""
    return f"{version} {status}\r\nContent-Length: {len(body)}\r\n{headers}\r\n".encode() + body


@dataclass(frozen=True)
class Send:
    """What the server does with one request: send ``data``, then maybe close the connection."""

    data: bytes
    close: bool = False
    byte_by_byte: bool = False  # one send per byte, so the client sees the answer arrive in pieces


HANG_UP = Send(b"", close=True)  # read the request, answer nothing, close


@dataclass(frozen=True)
class Received:
    """A request exactly as it arrived, and which connection (1, 2, ... in accept order) carried it."""

    raw: bytes
    connection: int


class ScriptedServer:
    """Answers each request with the next ``Send`` in ``script`` (``answer()`` when it runs out)."""

    def __init__(self, socket_path: str | None = None, tls: ssl.SSLContext | None = None) -> None:
        self.script: deque[Send] = deque()
        self.requests: list[Received] = []
        self.connections = 0  # accepted so far
        self.closed = 0  # connections whose server side has ended
        self._tls = tls
        self._changed = threading.Condition()
        self._open: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._stopping = False
        if socket_path is None:
            self._listener = socket.create_server(("127.0.0.1", 0))
            self.port = self._listener.getsockname()[1]
            self.url = f"{'https' if tls else 'http'}://localhost:{self.port}/"
        else:
            self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._listener.bind(socket_path)
            self._listener.listen()
            self.url = unix_socket_url(socket_path)
        self._acceptor = threading.Thread(target=self._accept_all, daemon=True)
        self._acceptor.start()

    def wait_until(self, condition: Callable[[], bool]) -> None:
        with self._changed:
            assert self._changed.wait_for(condition, DEADLINE), "the server never got there"

    def stop(self) -> None:
        self._stopping = True
        _wake = socket.socket(self._listener.family, socket.SOCK_STREAM)
        _wake.connect(self._listener.getsockname())
        _wake.close()
        self._acceptor.join(DEADLINE)
        with self._changed:
            for sock in self._open:
                try:
                    sock.shutdown(socket.SHUT_RDWR)  # wakes its thread out of recv
                except OSError:  # the client already dropped it (ENOTCONN): its thread is ending anyway
                    pass
        for thread in self._threads:
            thread.join(DEADLINE)
        self._listener.close()

    def _accept_all(self) -> None:
        while True:
            sock, _ = self._listener.accept()
            if self._stopping:
                sock.close()
                return
            with self._changed:
                self.connections += 1
                thread = threading.Thread(target=self._serve, args=(sock, self.connections), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, sock: socket.socket, number: int) -> None:
        try:
            if self._tls is not None:
                sock = self._tls.wrap_socket(sock, server_side=True)
            with self._changed:
                self._open.add(sock)
            with sock.makefile("rb") as reader:
                self._answer_requests(sock, reader, number)
        except OSError:
            pass  # the client dropped the connection mid-answer, which several tests do on purpose
        finally:
            with self._changed:
                self._open.discard(sock)
                sock.close()
                self.closed += 1
                self._changed.notify_all()

    def _answer_requests(self, sock: socket.socket, reader, number: int) -> None:
        while (raw := _read_request(reader)) is not None:
            with self._changed:
                self.requests.append(Received(raw, number))
                send = self.script.popleft() if self.script else Send(answer())
                self._changed.notify_all()
            if send.byte_by_byte:
                for index in range(len(send.data)):
                    sock.sendall(send.data[index : index + 1])
            else:
                sock.sendall(send.data)
            if send.close:
                return


def _read_request(reader) -> bytes | None:
    """One request (head and ``Content-Length`` body), or None when the client closed the connection."""
    head = b""
    while (line := reader.readline()) not in (b"\r\n", b""):
        head += line
    if not line:
        return None
    length = 0
    for header in head.split(b"\r\n"):
        name, _, value = header.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
    return head + line + reader.read(length)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    scripted = ScriptedServer()
    yield scripted
    scripted.stop()


@pytest.fixture
def connection(server: ScriptedServer) -> Iterator[KeepAliveConnection]:
    connection = KeepAliveConnection(parse_scheduler_url(server.url), timeout=DEADLINE)
    yield connection
    connection.close()


def post(connection: KeepAliveConnection) -> HTTPAnswer:
    return connection.post("/api/ping", b"data=%7B%7D", {})


# -- bodies --------------------------------------------------------------------------------------------------


def test_a_content_length_body_is_read_exactly(server, connection):
    server.script.append(Send(answer(b'{"response": null}', headers="Content-Type: application/json\r\n")))
    assert post(connection) == HTTPAnswer(200, b'{"response": null}')


def test_an_error_status_is_an_answer_not_an_exception(server, connection):
    server.script.append(Send(answer(b'{"error": "busy"}', status="503 Service Unavailable")))
    assert post(connection) == HTTPAnswer(503, b'{"error": "busy"}')


def test_a_chunked_body_is_joined_and_its_trailers_are_read_past(server, connection):
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n1;name=value\r\n,\r\n6\r\n world\r\n0\r\nX-Checksum: abc\r\nX-More: 1\r\n\r\n"
    )
    server.script.extend([Send(chunked), Send(answer(b"next"))])
    assert post(connection) == HTTPAnswer(200, b"hello, world")
    assert post(connection) == HTTPAnswer(200, b"next")
    assert server.connections == 1


def test_interim_1xx_responses_before_the_answer_are_skipped(server, connection):
    interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </style.css>\r\n\r\n"
    server.script.append(Send(interim + answer(b"done")))
    assert post(connection) == HTTPAnswer(200, b"done")


@pytest.mark.parametrize("version", ["HTTP/1.0", "HTTP/1.1"])
def test_a_body_without_length_is_read_until_the_server_closes(server, connection, version):
    server.script.append(
        Send(f"{version} 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it".encode(), close=True)
    )
    assert post(connection) == HTTPAnswer(200, b"all of it")
    assert post(connection) == HTTPAnswer(200, b"ok")
    assert server.connections == 2


def test_a_no_content_answer_has_no_body_and_keeps_the_socket(server, connection):
    server.script.extend([Send(b"HTTP/1.1 204 No Content\r\n\r\n"), Send(answer(b"next"))])
    assert post(connection) == HTTPAnswer(204, b"")
    assert post(connection) == HTTPAnswer(200, b"next")
    assert server.connections == 1


def test_an_answer_arriving_a_byte_at_a_time_reads_the_same(server, connection):
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    server.script.extend([Send(chunked, byte_by_byte=True), Send(answer(b"xyz"), byte_by_byte=True)])
    assert post(connection) == HTTPAnswer(200, b"abcde")
    assert post(connection) == HTTPAnswer(200, b"xyz")


@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_a_body_larger_than_any_buffer_arrives_whole(server, connection, framing):
    body = bytes(range(256)) * (3 * 4096 + 7)  # about 3 MiB
    if framing == "length":
        data = answer(body)
    else:
        data = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (
            len(body),
            body,
        )
    server.script.append(Send(data))
    assert post(connection).body == body


@pytest.mark.parametrize(
    "headers",
    [
        "content-LENGTH: 2\r\n\r\nhi",
        "TRANSFER-ENCODING: Chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
    ],
)
def test_header_names_and_values_are_matched_case_insensitively(server, connection, headers):
    server.script.append(Send(f"HTTP/1.1 200 OK\r\n{headers}".encode()))
    assert post(connection) == HTTPAnswer(200, b"hi")
    assert post(connection) == HTTPAnswer(200, b"ok")
    assert server.connections == 1


# -- keep-alive ----------------------------------------------------------------------------------------------


def test_bytes_left_over_after_an_answer_are_not_taken_for_the_next_one(server, connection):
    server.script.append(Send(answer(b"first") + b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale"))
    assert post(connection) == HTTPAnswer(200, b"first")
    assert post(connection) == HTTPAnswer(200, b"ok")
    assert server.connections == 2


def test_nothing_is_connected_before_the_first_post():
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    connection = KeepAliveConnection(parse_scheduler_url(f"http://127.0.0.1:{port}/"), timeout=DEADLINE)
    with pytest.raises(ConnectionRefusedError):
        post(connection)


def test_successive_posts_share_one_kept_alive_socket(server, connection):
    server.script.extend(Send(answer(f"answer {n}".encode())) for n in range(5))
    assert [post(connection).body for _ in range(5)] == [f"answer {n}".encode() for n in range(5)]
    assert server.connections == 1
    assert {request.connection for request in server.requests} == {1}


@pytest.mark.parametrize(
    ("version", "headers", "connections"),
    [
        ("HTTP/1.1", "Connection: close\r\n", 2),
        ("HTTP/1.1", "CONNECTION: Keep-Alive, Close\r\n", 2),
        ("HTTP/1.0", "", 2),
        ("HTTP/1.0", "Connection: keep-alive\r\n", 1),
        ("HTTP/1.1", "Connection: keep-alive\r\n", 1),
    ],
)
def test_the_socket_is_closed_after_an_answer_that_says_so(server, connection, version, headers, connections):
    # The server leaves its side open: closing is the client's own decision.
    server.script.append(Send(answer(b"first", headers=headers, version=version)))
    assert post(connection) == HTTPAnswer(200, b"first")
    assert post(connection) == HTTPAnswer(200, b"ok")
    assert server.connections == connections


def test_a_kept_alive_socket_the_server_closed_while_idle_is_reopened_once_transparently(server, connection):
    server.script.extend([Send(answer(b"first"), close=True), Send(answer(b"second"))])
    assert post(connection) == HTTPAnswer(200, b"first")
    server.wait_until(lambda: server.closed == 1)
    assert post(connection) == HTTPAnswer(200, b"second")
    assert server.connections == 2
    assert server.requests[-1].connection == 2


def test_a_reopened_socket_that_fails_too_raises_instead_of_trying_again(server, connection):
    server.script.extend([Send(answer(b"first"), close=True), HANG_UP])
    post(connection)
    server.wait_until(lambda: server.closed == 1)
    with pytest.raises(http.client.RemoteDisconnected):
        post(connection)
    assert server.connections == 2


def test_a_fresh_socket_closed_before_any_status_raises_remote_disconnected(server, connection):
    server.script.append(HANG_UP)
    with pytest.raises(http.client.RemoteDisconnected):
        post(connection)
    assert server.connections == 1 and len(server.requests) == 1


def test_a_server_silent_past_the_timeout_raises_timeout_and_the_socket_is_dropped(server):
    connection = KeepAliveConnection(parse_scheduler_url(server.url), timeout=0.2)
    server.script.append(Send(b""))
    with pytest.raises(TimeoutError):
        post(connection)
    assert post(connection) == HTTPAnswer(200, b"ok")
    assert server.connections == 2
    connection.close()


# -- broken answers ------------------------------------------------------------------------------------------


def assert_next_post_reconnects(server: ScriptedServer, connection: KeepAliveConnection) -> None:
    before = server.connections
    assert post(connection) == HTTPAnswer(200, b"ok")
    assert server.connections == before + 1


@pytest.mark.parametrize(
    "status_line",
    [b"garbage", b"HTTP/2 200 OK", b"HTTP/1.1 2000 OK", b"HTTP/1.1 OK", b"HTTP/1.1 099 Low", b"ICY 200 OK"],
)
def test_a_malformed_status_line_raises_bad_status_line(server, connection, status_line):
    server.script.append(Send(status_line + b"\r\nContent-Length: 0\r\n\r\n"))  # and the socket stays open
    with pytest.raises(http.client.BadStatusLine):
        post(connection)
    assert_next_post_reconnects(server, connection)


@pytest.mark.parametrize(
    "short",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nfour",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nfour\r\na\r\nabc",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nfour\r\n",
    ],
)
def test_a_body_cut_short_by_the_server_closing_raises_incomplete_read(server, connection, short):
    server.script.append(Send(short, close=True))
    with pytest.raises(http.client.IncompleteRead):
        post(connection)
    assert_next_post_reconnects(server, connection)


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 70_000,
        b"HTTP/1.1 200 " + b"O" * 70_000,
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"0" * 70_000,
    ],
    ids=["header line", "status line", "chunk size line"],
)
def test_an_endless_line_raises_line_too_long_without_waiting_for_its_end(server, connection, head):
    server.script.append(Send(head))  # no line end, and the socket stays open
    with pytest.raises(http.client.LineTooLong):
        post(connection)
    assert_next_post_reconnects(server, connection)


def test_more_than_a_hundred_headers_is_an_error_without_waiting_for_their_end(server, connection):
    server.script.append(Send(b"HTTP/1.1 200 OK\r\n" + b"X-Many: 1\r\n" * 101))
    with pytest.raises(http.client.HTTPException, match="got more than 100 headers"):
        post(connection)
    assert_next_post_reconnects(server, connection)


def test_a_hundred_headers_are_accepted(server, connection):
    server.script.append(Send(answer(b"fine", headers="X-Many: 1\r\n" * 99)))
    assert post(connection) == HTTPAnswer(200, b"fine")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n", "Bad Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "Bad Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc", "Bad Content-Length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "Bad chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x2\r\nab\r\n0\r\n\r\n", "Bad chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n", "not followed by"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "Malformed header line"),
    ],
)
def test_malformed_framing_raises_http_exception(server, connection, data, message):
    server.script.append(Send(data))
    with pytest.raises(http.client.HTTPException, match=message):
        post(connection)
    assert_next_post_reconnects(server, connection)


def test_a_server_closing_in_the_middle_of_the_headers_raises_http_exception(server, connection):
    server.script.append(Send(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n", close=True))
    with pytest.raises(http.client.HTTPException, match="in the middle of the response headers"):
        post(connection)
    assert_next_post_reconnects(server, connection)


def test_a_server_closing_in_the_chunked_trailers_still_delivers_the_whole_body(server, connection):
    server.script.append(
        Send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n", close=True)
    )
    assert post(connection) == HTTPAnswer(200, b"hi")
    assert_next_post_reconnects(server, connection)


# -- the request ---------------------------------------------------------------------------------------------


def test_the_request_is_a_post_with_host_the_given_headers_content_length_and_the_body(server, connection):
    headers = {"Content-Type": "application/x-www-form-urlencoded", "User-Agent": "luigi/test"}
    connection.post("/prefix/api/add_task", b"data=%7B%7D", headers)
    assert server.requests[0].raw == (
        b"POST /prefix/api/add_task HTTP/1.1\r\n"
        b"Host: localhost:%d\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\n"
        b"User-Agent: luigi/test\r\n"
        b"Content-Length: 11\r\n"
        b"\r\n"
        b"data=%%7B%%7D" % server.port
    )


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://scheduler/", "scheduler"),
        ("http://scheduler:80/", "scheduler"),
        ("http://scheduler:8082/", "scheduler:8082"),
        ("https://scheduler/", "scheduler"),
        ("https://scheduler:443/", "scheduler"),
        ("https://scheduler:80/", "scheduler:80"),
        ("http://[::1]:8082/", "[::1]:8082"),
        ("http://user:secret@Scheduler.Example:8082/luigi/", "scheduler.example:8082"),
        ("http+unix://%2Ftmp%2Fluigi.sock/", "localhost"),
    ],
)
def test_the_host_header_names_the_port_only_when_it_is_not_the_schemes_default(url, host):
    assert parse_scheduler_url(url).host_header == host


@pytest.mark.parametrize(
    ("path", "headers", "error"),
    [
        ("/api/ping", {"X-Token": "a\r\nX-Evil: 1"}, ValueError),
        ("/api/ping", {"Bad Name": "1"}, ValueError),
        ("/api/ping HTTP/1.1\r\nX-Evil: 1", {}, http.client.InvalidURL),
    ],
)
def test_what_would_break_the_request_framing_is_refused_before_anything_is_sent(
    server, connection, path, headers, error
):
    with pytest.raises(error):
        connection.post(path, b"", headers)
    assert post(connection) == HTTPAnswer(200, b"ok")
    assert len(server.requests) == 1


def test_a_tcp_socket_sends_small_writes_at_once(server):
    with parse_scheduler_url(server.url).open_socket(DEADLINE) as sock:
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


# -- Unix sockets and TLS ------------------------------------------------------------------------------------


def test_a_unix_socket_address_is_reached_with_host_localhost(tmp_path):
    unix_server = ScriptedServer(socket_path=str(tmp_path / "luigid.sock"))
    connection = KeepAliveConnection(parse_scheduler_url(unix_server.url), timeout=DEADLINE)
    try:
        assert post(connection) == HTTPAnswer(200, b"ok")
        assert post(connection) == HTTPAnswer(200, b"ok")
        assert unix_server.requests[0].raw.startswith(b"POST /api/ping HTTP/1.1\r\nHost: localhost\r\n")
        assert unix_server.connections == 1
    finally:
        connection.close()
        unix_server.stop()


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for ``localhost`` and its key, made with ``openssl``."""
    if shutil.which("openssl") is None:
        if os.environ.get("CI"):
            pytest.fail("openssl is needed to test TLS")
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        + ["-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=localhost"]
        + ["-addext", "subjectAltName=DNS:localhost"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


@pytest.fixture
def tls_server(certificate: tuple[Path, Path]) -> Iterator[tuple[ScriptedServer, list[str | None]]]:
    """A TLS server for ``localhost``, and the server names (SNI) its clients asked for."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificate)
    server_names: list[str | None] = []
    context.sni_callback = lambda _sock, name, _context: server_names.append(name)
    scripted = ScriptedServer(tls=context)
    yield scripted, server_names
    scripted.stop()


def test_an_https_address_speaks_tls_verifying_the_certificate_for_the_host_it_names(
    tls_server, certificate, monkeypatch
):
    server, server_names = tls_server
    monkeypatch.setenv("SSL_CERT_FILE", str(certificate[0]))  # trusted by ssl.create_default_context()
    connection = KeepAliveConnection(parse_scheduler_url(server.url), timeout=DEADLINE)
    try:
        assert post(connection) == HTTPAnswer(200, b"ok")
        assert post(connection) == HTTPAnswer(200, b"ok")
    finally:
        connection.close()
    assert server_names == ["localhost"]
    assert server.connections == 1
    assert server.requests[0].raw.startswith(
        b"POST /api/ping HTTP/1.1\r\nHost: localhost:%d\r\n" % server.port
    )


def test_an_https_server_with_an_untrusted_certificate_is_refused(tls_server, monkeypatch):
    server, _ = tls_server
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    connection = KeepAliveConnection(parse_scheduler_url(server.url), timeout=DEADLINE)
    with pytest.raises(ssl.SSLCertVerificationError):
        post(connection)
    assert server.requests == []


# -- switching to luigid's RPC channel -----------------------------------------------------------------------

SWITCHED = Send(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: luigi-rpc\r\n\r\n")


def ask(connection: KeepAliveConnection) -> None:
    connection.ask_for_channel("/api/_batch", {"Authorization": "Bearer t"})


def test_once_asked_the_socket_is_switched_before_its_next_post(server, connection):
    ask(connection)
    server.script.extend([SWITCHED, Send(answer(b"on the channel"))])
    assert post(connection) == HTTPAnswer(200, b"on the channel")
    assert connection.on_channel
    upgrade, request = (received.raw for received in server.requests)
    assert upgrade.startswith(b"GET /api/_batch HTTP/1.1\r\n")
    assert b"\r\nUpgrade: luigi-rpc\r\n" in upgrade and b"\r\nConnection: Upgrade\r\n" in upgrade
    assert b"\r\nAuthorization: Bearer t\r\n" in upgrade and b"Content-Length: 0\r\n" in upgrade
    assert request.startswith(b"POST /api/ping HTTP/1.1\r\n")
    post(connection)
    assert len(server.requests) == 3 and server.connections == 1  # asked once per socket


def test_a_socket_opened_again_goes_plain_once_then_is_switched(server, connection):
    ask(connection)
    script = [
        SWITCHED,
        Send(answer(), close=True),
        Send(answer(b"plain")),
        SWITCHED,
        Send(answer(b"switched")),
    ]
    server.script.extend(script)
    post(connection)
    server.wait_until(lambda: server.closed == 1)
    assert post(connection) == HTTPAnswer(200, b"plain")  # the stale socket's request, resent as it was
    assert not connection.on_channel
    assert post(connection) == HTTPAnswer(200, b"switched")
    assert [received.raw[:3] for received in server.requests] == [b"GET", b"POS", b"POS", b"GET", b"POS"]
    assert connection.on_channel and server.connections == 2


@pytest.mark.parametrize(
    "refusal, connections",
    [
        (Send(answer(b'{"error": "POST only"}', "405 Method Not Allowed")), 1),
        (Send(answer(b"no", "404 Not Found", headers="Connection: close\r\n")), 2),
    ],
)
def test_a_server_that_does_not_switch_is_never_asked_again(server, connection, refusal, connections):
    ask(connection)
    server.script.extend([refusal, Send(answer(b"plain"))])
    assert post(connection) == HTTPAnswer(200, b"plain")
    connection.close()
    post(connection)
    assert [received.raw[:3] for received in server.requests] == [b"GET", b"POS", b"POS"]
    assert not connection.on_channel and server.connections == connections + 1


def test_a_switch_cut_off_by_the_server_leaves_the_post_to_a_plain_fresh_socket(server, connection):
    ask(connection)
    server.script.extend([HANG_UP, Send(answer(b"after"))])
    assert post(connection) == HTTPAnswer(200, b"after")
    assert server.connections == 2 and not connection.on_channel
    post(connection)  # a server that hangs up on a new socket's switch is not asked again
    assert [received.raw[:3] for received in server.requests] == [b"GET", b"POS", b"POS"]
