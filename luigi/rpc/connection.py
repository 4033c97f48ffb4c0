"""One keep-alive HTTP/1.1 connection to the scheduler, reopened when the server closed it between requests.

The client side of HTTP is written out here rather than taken from ``http.client``, whose request building
and ``email``-based header parsing cost more client CPU per call (about 0.15 ms) than a raw socket
round trip to a local scheduler takes in all. It speaks just what a scheduler client needs: POST,
``Content-Length``, chunked and close-delimited bodies, keep-alive. Failures raise ``http.client``'s
exception classes, so callers handle them as before.
"""

from __future__ import annotations

import http.client
import re
import socket
from dataclasses import dataclass

from luigi.rpc.address import SchedulerAddress
from luigi.rpc_methods import CHANNEL_UPGRADE

# What a request on a kept-alive socket raises when the server closed that socket while it was idle.
_STALE_SOCKET_ERRORS = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)

_MAX_LINE = 65536  # bytes in a status, header or chunk-size line (with its end), as http.client allows
_MAX_HEADERS = 100  # header (or trailer) lines in one response, as http.client allows
_READ_PIECE = 1 << 20  # a long body is read in pieces, so a lying Content-Length cannot allocate it all
_RECV_SIZE = 65536
_NO_BODY_STATUSES = frozenset({204, 304})
_FRAMING_HEADERS = frozenset({b"content-length", b"transfer-encoding", b"connection"})
_LINE_ENDS = (b"\r\n", b"\n")
_STATUS_LINE = re.compile(rb"HTTP/1\.([01]) ([1-9][0-9][0-9])[ \r\n]")
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_ILLEGAL_IN_PATH = re.compile(r"[\x00-\x20\x7f]")


@dataclass(frozen=True)
class HTTPAnswer:
    """A complete HTTP response: its status code and body."""

    status: int
    body: bytes


class KeepAliveConnection:
    """POSTs over one persistent socket, opened on the first post; not thread-safe (the caller serialises).

    Transport failures raise ``OSError`` or ``http.client.HTTPException``; the socket is then closed, and
    the next request opens a new one.
    """

    def __init__(self, address: SchedulerAddress, timeout: float | None) -> None:
        self._address = address
        self.timeout = timeout  # of each socket; change it with ``set_timeout``
        self._stream: _SocketStream | None = None
        self._host_header = ""
        self._used = False  # whether the open socket has already carried a full exchange
        self._sent: tuple[bytes, bool] | None = None  # the request awaiting its answer; on a reused socket?
        self._channel: tuple[str, dict[str, str]] | None = None  # the upgrade each socket is asked for
        self._channel_wanted: tuple[str, dict[str, str]] | None = None  # as the client asked it
        self._asked = False  # whether the open socket was asked to switch to the channel
        self.on_channel = False  # whether the open socket switched

    def ask_for_channel(self, path: str, headers: dict[str, str]) -> None:
        """Ask each socket, before its next request, to switch to luigid's RPC channel (``GET path``).

        Only for a server known to be one of ours; a server that does not switch answers the ``GET``
        otherwise, and then no socket is asked again. On the channel, requests must have JSON bodies.
        """
        self._channel = self._channel_wanted = (path, headers)

    @property
    def address(self) -> SchedulerAddress:
        """The scheduler this connection talks to."""
        return self._address

    def follow(self, address: SchedulerAddress) -> None:
        """Talk to ``address`` from the next request on (another luigid of the same state took over);
        the channel, if asked for, is asked of it again under its own mount point."""
        if address is self._address:
            return
        old, self._address = self._address, address
        self.close()
        self._host_header = ""
        if self._channel_wanted is not None:
            path, headers = self._channel_wanted
            if path.startswith(old.base_path):
                path = address.base_path + path[len(old.base_path) :]
            self.ask_for_channel(path, headers)

    def set_timeout(self, timeout: float | None) -> None:
        """Use ``timeout`` from now on, on the open socket too."""
        self.timeout = timeout
        if self._stream is not None:
            self._stream.settimeout(timeout)

    def post(self, path: str, body: bytes, headers: dict[str, str]) -> HTTPAnswer:
        """Send one POST and read the whole answer."""
        self.send(path, body, headers)
        return self.receive()

    def send(self, path: str, body: bytes, headers: dict[str, str]) -> None:
        """Send one POST whose answer ``receive()`` reads later (the server works on it meanwhile)."""
        if self._sent is not None:
            raise RuntimeError("the answer to the previous request must be received before sending another")
        if self._channel is not None and not (self._asked and self._stream is not None):
            self._switch_to_channel()
        request = _encode_request(self._host_header or self._address.host_header, path, headers, body)
        reused = self._stream is not None and self._used
        try:
            self._send(request)
        except _STALE_SOCKET_ERRORS:
            if not reused:
                raise
            reused = False
            self._send(request)  # the server had closed the idle socket: once more on a fresh one
        self._sent = (request, reused)

    def receive(self) -> HTTPAnswer:
        """The answer to the request ``send`` sent."""
        if self._sent is None:
            raise RuntimeError("no request is waiting for its answer")
        request, reused = self._sent
        self._sent = None
        try:
            return self._receive()
        except _STALE_SOCKET_ERRORS:
            if not reused:
                raise
        # The server closed the idle socket before reading our request: resend once on a fresh one.
        self._send(request)
        return self._receive()

    def close(self) -> None:
        """Close the socket (a later ``post`` reconnects); a request awaiting its answer is forgotten."""
        stream, self._stream, self._used, self._sent = self._stream, None, False, None
        if stream is not None:
            stream.close()

    def _send(self, request: bytes) -> None:
        stream = self._stream if self._stream is not None else self._open()
        try:
            stream.sendall(request)
        except BaseException:  # whatever broke (even KeyboardInterrupt), the stream is out of step now
            self.close()
            raise

    def _receive(self) -> HTTPAnswer:
        stream = self._stream
        if stream is None:
            raise http.client.RemoteDisconnected("the connection was closed before the answer was read")
        finished = False
        try:
            answer, keep_alive = _read_response(stream)
            finished = True
        finally:
            if not finished:
                self.close()
        if keep_alive:
            self._used = True
        else:
            self.close()
        return answer

    def _open(self) -> _SocketStream:
        self._host_header = self._address.host_header
        self._stream = _SocketStream(self._address.open_socket(self.timeout))
        self._used = self._asked = self.on_channel = False
        return self._stream

    def _switch_to_channel(self) -> None:
        """Ask the open (or a new) socket to switch; a server that will not is never asked again.

        A failed exchange leaves the socket closed, so the request that follows opens a plain one and meets
        the failure, if any, the ordinary way. On a socket that had been idle that is the server having
        closed it meanwhile; on a new one, something between us that will not switch: never asked again.
        """
        assert self._channel is not None
        path, headers = self._channel
        reused = self._stream is not None and self._used
        stream = self._stream if self._stream is not None else self._open()
        self._asked = True
        try:
            stream.sendall(_encode_upgrade(self._host_header, path, headers))
            switched, keep_alive = _read_upgrade_answer(stream)
        except (OSError, http.client.HTTPException):
            self.close()
            if not reused:
                self._channel = None
            return
        if switched:
            self.on_channel = True
            return
        self._channel = None
        if keep_alive:
            self._used = True
        else:
            self.close()


def _encode_request(host: str, path: str, headers: dict[str, str], body: bytes) -> bytes:
    """The bytes of ``POST path`` with ``headers``, ``Host`` and ``Content-Length``, then ``body``.

    Raises ``http.client.InvalidURL`` for a path with spaces or control characters and ValueError for a
    header that would break the framing, as ``http.client`` does, so nothing can be smuggled into it.
    """
    if _ILLEGAL_IN_PATH.search(path):
        raise http.client.InvalidURL(f"URL path {path!r} contains spaces or control characters")
    lines = [f"POST {path} HTTP/1.1\r\nHost: {host}\r\n"]
    for name, value in headers.items():
        if not _HEADER_NAME.fullmatch(name) or "\r" in value or "\n" in value:
            raise ValueError(f"Invalid HTTP header {name!r}: {value!r}")
        lines.append(f"{name}: {value}\r\n")
    lines.append(f"Content-Length: {len(body)}\r\n\r\n")
    return "".join(lines).encode("latin-1") + body


def _encode_upgrade(host: str, path: str, headers: dict[str, str]) -> bytes:
    """``GET path`` asking the server to switch the connection to its RPC channel."""
    channel_headers = {**headers, "Connection": "Upgrade", "Upgrade": CHANNEL_UPGRADE}
    request = _encode_request(host, path, channel_headers, b"")
    return b"GET" + request[len(b"POST") :]


def _read_upgrade_answer(reader: _SocketStream) -> tuple[bool, bool]:
    """Whether the server switched (``101``); if not, its whole answer is read, and whether it keeps alive."""
    head = _read_head(reader, until_switch=True)
    if head.status == 101:
        return True, True
    _, closed = _read_body(reader, head)
    return False, not closed and not reader.has_unread() and _keeps_alive(head)


@dataclass(slots=True)
class _ResponseHead:
    """A status line and the headers that decide how the body is delimited and whether the socket lives."""

    http11: bool  # else HTTP/1.0
    status: int
    fields: dict[bytes, bytes]  # lower-cased framing header names -> their values, comma-joined

    def tokens(self, name: bytes) -> list[bytes]:
        """The comma-separated, lower-cased tokens of header ``name``."""
        value = self.fields.get(name)
        return [token.strip().lower() for token in value.split(b",")] if value is not None else []


def _read_response(reader: _SocketStream) -> tuple[HTTPAnswer, bool]:
    """Read one response to a POST; the answer and whether the connection may carry another request."""
    head = _read_head(reader)
    body, closed = _read_body(reader, head)
    # Bytes past the answer would be taken for the next one: a socket out of step is not reused.
    return HTTPAnswer(head.status, body), not closed and not reader.has_unread() and _keeps_alive(head)


def _read_head(reader: _SocketStream, until_switch: bool = False) -> _ResponseHead:
    """The status line and headers of the final answer (or of a 101 if ``until_switch``), past 1xx ones."""
    while True:
        http11, status = _read_status_line(reader)
        fields = _read_fields(reader, "header line")
        if fields is None:
            raise http.client.HTTPException(
                "Server closed the connection in the middle of the response headers"
            )
        if not 100 <= status < 200 or (until_switch and status == 101):
            return _ResponseHead(http11, status, fields)


def _read_status_line(reader: _SocketStream) -> tuple[bool, int]:
    """Whether the server speaks HTTP/1.1 (not 1.0), and the status code."""
    line = reader.readline("status line")
    if not line:
        raise http.client.RemoteDisconnected("Remote end closed connection without response")
    matched = _STATUS_LINE.match(line)
    if matched is None:
        raise http.client.BadStatusLine(f"{line[:200]!r} is not an HTTP/1.0 or HTTP/1.1 status line")
    return matched[1] == b"1", int(matched[2])


def _read_fields(reader: _SocketStream, kind: str) -> dict[bytes, bytes] | None:
    """Header (or trailer) lines up to the blank line, keeping only the framing headers; None at EOF."""
    fields: dict[bytes, bytes] = {}
    for _ in range(_MAX_HEADERS + 1):
        line = reader.readline(kind)
        if line in _LINE_ENDS:
            return fields
        if not line:
            return None
        name, colon, value = line.partition(b":")
        if not colon:
            if line[:1] in (b" ", b"\t"):  # an obsolete folded continuation of the previous field
                continue
            raise http.client.HTTPException(f"Malformed {kind} in the response: {line[:200]!r}")
        name = name.lower()
        if name in _FRAMING_HEADERS:
            value = value.strip()
            fields[name] = fields[name] + b", " + value if name in fields else value
    raise http.client.HTTPException(f"got more than {_MAX_HEADERS} headers")


def _read_body(reader: _SocketStream, head: _ResponseHead) -> tuple[bytes, bool]:
    """The body, and whether reading it reached the end of the connection."""
    if head.status in _NO_BODY_STATUSES:
        return b"", False
    codings = head.tokens(b"transfer-encoding")
    if codings and codings[-1] == b"chunked":
        return _read_chunked(reader)
    length = _content_length(head.fields.get(b"content-length"))
    if codings or length is None:
        return reader.read_to_eof(), True  # delimited by the server closing the connection
    return _read_exact(reader, length), False


def _content_length(value: bytes | None) -> int | None:
    if value is None:
        return None
    if value.isdigit():
        return int(value)
    lengths = {length.strip() for length in value.split(b",")}
    length = lengths.pop()
    if lengths or not length.isdigit():
        raise http.client.HTTPException(f"Bad Content-Length {value[:200]!r} in the response")
    return int(length)


def _read_exact(reader: _SocketStream, length: int) -> bytes:
    data = reader.read(length)
    if len(data) < length:
        raise http.client.IncompleteRead(data, length - len(data))
    return data


def _read_chunked(reader: _SocketStream) -> tuple[bytes, bool]:
    """A chunked body and its trailers; also whether the server closed the connection during the trailers."""
    chunks: list[bytes] = []
    while size := _read_chunk_size(reader, chunks):
        chunks.append(_read_exact(reader, size))
        end = reader.readline("chunk end")
        if end not in _LINE_ENDS:
            if not end:
                raise http.client.IncompleteRead(b"".join(chunks))
            raise http.client.HTTPException(f"Chunk of {size} bytes not followed by a line end: {end!r}")
    # The body is whole once the last chunk is in: a server hanging up in the trailers only ends the socket.
    return b"".join(chunks), _read_fields(reader, "trailer line") is None


def _read_chunk_size(reader: _SocketStream, chunks: list[bytes]) -> int:
    line = reader.readline("chunk size line")
    if not line:
        raise http.client.IncompleteRead(b"".join(chunks))
    size = line.partition(b";")[0].strip()  # drop chunk extensions
    if not _CHUNK_SIZE.fullmatch(size):
        raise http.client.HTTPException(f"Bad chunk size line {line[:200]!r} in the response")
    return int(size, 16)


class _SocketStream:
    """A socket with a read buffer: reads capped lines, counted bytes, or all until EOF.

    Unlike ``socket.makefile`` it holds no lock, so a forked child can close a socket that a thread of
    its parent was reading from when it forked.
    """

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = b""
        self._start = 0  # where the unread part of the buffer begins

    def sendall(self, data: bytes) -> None:
        self._sock.sendall(data)

    def close(self) -> None:
        self._sock.close()

    def settimeout(self, timeout: float | None) -> None:
        self._sock.settimeout(timeout)

    def has_unread(self) -> bool:
        """Whether bytes already received have not been read yet."""
        return self._start < len(self._buffer)

    def readline(self, kind: str) -> bytes:
        """The next line with its end (at EOF, what is left); LineTooLong if it runs past ``_MAX_LINE``."""
        while True:
            start = self._start
            end = self._buffer.find(b"\n", start, start + _MAX_LINE)
            if end >= 0:
                self._start = end + 1
                return self._buffer[start : end + 1]
            if len(self._buffer) - start >= _MAX_LINE:
                raise http.client.LineTooLong(kind)
            if not self._fill():
                return self._take(_MAX_LINE)

    def read(self, size: int) -> bytes:
        """``size`` bytes, fewer only if the connection ends first."""
        pieces = [self._take(size)]
        missing = size - len(pieces[0])
        while missing > 0:
            piece = self._sock.recv(min(missing, _READ_PIECE))
            if not piece:
                break
            pieces.append(piece)
            missing -= len(piece)
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def read_to_eof(self) -> bytes:
        pieces = [self._take(len(self._buffer))]
        while piece := self._sock.recv(_RECV_SIZE):
            pieces.append(piece)
        return b"".join(pieces)

    def _take(self, size: int) -> bytes:
        """Up to ``size`` buffered bytes, consumed."""
        start = self._start
        self._start = min(start + size, len(self._buffer))
        return self._buffer[start : self._start]

    def _fill(self) -> bool:
        """Receive more into the buffer; False at EOF."""
        received = self._sock.recv(_RECV_SIZE)
        if not received:
            return False
        self._buffer = self._buffer[self._start :] + received
        self._start = 0
        return True


def _keeps_alive(head: _ResponseHead) -> bool:
    connection = head.tokens(b"connection")
    if b"close" in connection:
        return False
    return head.http11 or b"keep-alive" in connection
