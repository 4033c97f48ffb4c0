"""luigid's RPC channel: a connection our client upgraded (``Upgrade: luigi-rpc``), served without tornado.

Once a server has shown it is one of ours, our client asks each connection to switch (``GET /api/_batch``
with ``Upgrade: luigi-rpc``, answered ``101``; ``api.BatchHandler`` detaches the socket from tornado, as
tornado's websocket handler does); from then on that socket belongs to an ``RpcChannel``, a plain
asyncio protocol that parses each request from its buffer and answers it with one write. For the request a
worker makes once per task, tornado's connection, stream and future machinery cost luigid about as much
CPU as the scheduler's own work. The channel speaks only what our client sends: ``POST /api/<method>``
with a JSON body and ``Content-Length``; anything else is answered with a JSON error and the channel closed.
Browsers cannot ask for it (``Upgrade`` is a header scripts may not set), and its bearer token, when one is
configured, was checked at the upgrade. Calls answer exactly as on ``/api`` (``dispatch.serve_json_call``).
"""

from __future__ import annotations

import asyncio
import logging
import math
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.client import responses

from tornado import iostream

from luigi.rpc_methods import CHANNEL_UPGRADE
from luigi.server.dispatch import decode_data, serve_json_call, utf8_text
from luigi.server.errors import ClientError, error_json
from luigi.server.served import ServedScheduler
from luigi.server.settings import ServerSettings

logger = logging.getLogger("luigi.server")

SWITCHING = (
    "HTTP/1.1 101 Switching Protocols\r\nServer: luigid\r\nConnection: Upgrade\r\n"
    f"Upgrade: {CHANNEL_UPGRADE}\r\n\r\n"
).encode("latin-1")
_MAX_HEAD = 65536  # bytes of a request line and headers
IDLE_TIMEOUT = 3600.0  # seconds a channel may carry no request, as tornado allows an idle HTTP connection
_API_PREFIX = b"/api/"


class Channels:
    """The channels of one server: each adopted from tornado after its upgrade, all closed at shutdown."""

    def __init__(
        self,
        scheduler: ServedScheduler,
        settings: ServerSettings,
        after_answers: Callable[[], None] | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.settings = settings
        # Run soon after channels answered (the server folds its state journal there); settable later.
        self.after_answers = after_answers
        self._after_pending = False
        self._open: set[RpcChannel] = set()
        self._starting: set[asyncio.Task[None]] = set()
        self.clock = time.monotonic  # replaceable in tests
        self.last_answer = -math.inf  # when a channel last answered, by ``clock``

    def adopt(self, stream: iostream.IOStream, client: str | None) -> None:
        """Take the socket of a detached tornado stream and serve it as a channel (it answers 101 first).

        The client sends nothing more until it has the 101, so tornado's buffer holds nothing of ours.
        """
        sock = stream.socket.dup()  # closing tornado's stream then leaves the connection open
        stream.close()
        task = asyncio.ensure_future(self._start(sock, client))
        self._starting.add(task)
        task.add_done_callback(self._starting.discard)

    async def _start(self, sock: socket.socket, client: str | None) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.connect_accepted_socket(lambda: RpcChannel(self, client), sock=sock)
        except OSError as exc:  # the client went away during the switch
            logger.debug("RPC channel from %s not started: %s", client, exc)
            sock.close()

    def answered(self) -> None:
        """A channel wrote answers: run ``after_answers`` once the event loop is done with them.

        Its client is then busy with what it was told, so work done there (folding the state journal)
        is off that client's path.
        """
        self.last_answer = self.clock()
        if self.after_answers is not None and not self._after_pending:
            self._after_pending = True
            asyncio.get_running_loop().call_soon(self._run_after_answers)

    def _run_after_answers(self) -> None:
        self._after_pending = False
        if self.after_answers is not None:
            self.after_answers()

    def answered_within(self, seconds: float) -> bool:
        """Whether a channel answered in the last ``seconds``: its client is likely to ask again soon."""
        return self.clock() - self.last_answer < seconds

    def opened(self, channel: RpcChannel) -> None:
        self._open.add(channel)

    def closed(self, channel: RpcChannel) -> None:
        self._open.discard(channel)

    def close_all(self) -> None:
        """Close every channel once its pending answers are written (server shutdown)."""
        for channel in list(self._open):
            channel.close()

    def close_idle(self, idle: float = IDLE_TIMEOUT) -> int:
        """Close the channels without a request for ``idle`` seconds (clients gone without a word)."""
        now = self.clock()
        stale = [channel for channel in self._open if now - channel.last_request > idle]
        for channel in stale:
            channel.close()
        return len(stale)

    @property
    def count(self) -> int:
        """How many channels are open."""
        return len(self._open)


@dataclass(frozen=True)
class _Request:
    """A request head on the channel: the API name, the body length, and whether the client closes after."""

    name: str
    length: int
    close: bool


class RpcChannel(asyncio.Protocol):
    """One upgraded connection: requests are served in order, as soon as each is wholly in the buffer."""

    def __init__(self, owner: Channels, client: str | None) -> None:
        self._owner = owner
        self._client = client
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._head: _Request | None = None  # the request whose body is awaited
        self._refusal: ClientError | None = None  # answered once the refused request's body has gone by
        self._paused = False
        self.last_request = owner.clock()

    # -- asyncio.Protocol ---------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._owner.opened(self)
        transport.write(SWITCHING)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        self._serve_buffered()

    def connection_lost(self, exc: Exception | None) -> None:
        self._owner.closed(self)
        self._transport = None

    def pause_writing(self) -> None:  # the client is not reading its answers: stop reading its requests
        self._paused = True
        if self._transport is not None:
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        self._paused = False
        if self._transport is not None:
            self._transport.resume_reading()
            self._serve_buffered()

    def close(self) -> None:
        """Close after the answers already written."""
        if self._transport is not None:
            self._transport.close()

    # -- requests -----------------------------------------------------------------------------------------

    def _serve_buffered(self) -> None:
        while self._transport is not None and not self._transport.is_closing() and not self._paused:
            try:
                if self._head is None and not self._read_head():
                    return
                if not self._serve_body():
                    return
            except ClientError as error:  # the request cannot be framed: answer and end the channel
                self._refuse(error, None)
                self._respond(error.status, _error_body(error), close=True)
                return

    def _read_head(self) -> bool:
        end = self._buffer.find(b"\r\n\r\n", 0, _MAX_HEAD + 4)
        if end < 0:
            if len(self._buffer) > _MAX_HEAD:
                raise ClientError(431, f"Request head is longer than {_MAX_HEAD} bytes")
            return False
        head = bytes(self._buffer[:end])
        del self._buffer[: end + 4]
        self._head = _parse_head(head)
        if self._head.length > self._owner.settings.max_body_size:
            self._refusal = ClientError(
                413,
                f"Request body is larger than the limit of {self._owner.settings.max_body_size} bytes "
                "([scheduler] max_body_size)",
            )
        return True

    def _serve_body(self) -> bool:
        """Answer the request whose head was read once its body is in (a refused body is only skipped)."""
        request = self._head
        assert request is not None
        if self._refusal is not None:
            skipped = min(request.length, len(self._buffer))
            del self._buffer[:skipped]
            self._head = request = _Request(request.name, request.length - skipped, request.close)
            if request.length:
                return False
            self._head, error, self._refusal = None, self._refusal, None
            self._refuse(error, request.name)
            self._respond(error.status, _error_body(error), close=True)
            return False
        if len(self._buffer) < request.length:
            return False
        body = bytes(self._buffer[: request.length])
        del self._buffer[: request.length]
        self._head = None
        self.last_request = self._owner.clock()
        status, text = self._answer(request.name, body)
        self._respond(status, text.encode("utf-8"), close=request.close)
        self._owner.answered()
        return True

    def _answer(self, name: str, body: bytes) -> tuple[int, str]:
        try:
            data = decode_data(utf8_text(body, "request body"))
            return 200, '{"response": ' + serve_json_call(
                self._owner.scheduler, name, data, self._client
            ) + "}"
        except ClientError as error:
            self._refuse(error, name)
            return error.status, _error_body(error).decode("utf-8")
        except Exception as exc:  # a bug here must still answer, and the channel live on
            logger.exception("RPC channel call %s from %s failed", name, self._client)
            return 500, error_json(f"{name} failed: {type(exc).__name__}: {exc}")

    def _refuse(self, error: ClientError, name: str | None) -> None:
        if error.status < 500:
            logger.warning(
                "RPC channel request %s from %s refused (%d): %s",
                name or "(unreadable)",
                self._client,
                error.status,
                error.message,
            )

    def _respond(self, status: int, body: bytes, close: bool) -> None:
        transport = self._transport
        if transport is None:
            return
        reason = responses.get(status, "Unknown")
        ending = "Connection: close\r\n\r\n" if close else "\r\n"
        head = (
            f"HTTP/1.1 {status} {reason}\r\nServer: luigid\r\n"
            f"Content-Type: application/json; charset=UTF-8\r\nContent-Length: {len(body)}\r\n{ending}"
        )
        transport.write(head.encode("latin-1") + body)
        if close:
            transport.close()


def _parse_head(head: bytes) -> _Request:
    """The request a head announces, or ClientError naming what the channel does not take."""
    request_line, *lines = head.split(b"\r\n")
    parts = request_line.split(b" ")
    if len(parts) != 3 or parts[2] != b"HTTP/1.1":
        raise ClientError(400, f"Malformed request line on the RPC channel: {request_line[:200]!r}")
    verb, target, _ = parts
    if verb != b"POST":
        raise ClientError(405, f"The RPC channel takes POST only, not {verb[:20].decode('latin-1')}")
    path = target.partition(b"?")[0]
    if not path.startswith(_API_PREFIX) or len(path) == len(_API_PREFIX):
        raise ClientError(404, f"The RPC channel serves /api/<method> only, not {path[:200]!r}")
    length: int | None = None
    close = False
    for line in lines:
        name, colon, value = line.partition(b":")
        if not colon:
            raise ClientError(400, f"Malformed header line on the RPC channel: {line[:200]!r}")
        name, value = name.strip().lower(), value.strip()
        if name == b"content-length":
            if not value.isdigit() or (length is not None and int(value) != length):
                raise ClientError(400, f"Bad Content-Length {value[:40]!r} on the RPC channel")
            length = int(value)
        elif name == b"transfer-encoding":
            raise ClientError(400, "The RPC channel takes a Content-Length, not Transfer-Encoding")
        elif name == b"connection":
            close = b"close" in (token.strip().lower() for token in value.split(b","))
    if length is None:
        raise ClientError(411, "A request on the RPC channel needs a Content-Length")
    return _Request(path[len(_API_PREFIX) :].decode("latin-1"), length, close)


def _error_body(error: ClientError) -> bytes:
    return error_json(error.message).encode("utf-8")
