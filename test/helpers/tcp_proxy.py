"""A TCP proxy that can cut a client off its server: for fault tests between a worker and luigid.

``TcpProxy(target_port)`` listens on a free port of 127.0.0.1 (``proxy.port``) and forwards every
connection to the target, from an asyncio loop in a thread of its own. Between two faults it is a plain
pipe. ``drop()`` resets every open connection and, for a while (``refuse_for``), resets new ones at once:
the client sees "connection reset". ``blackhole()`` keeps connections open but forwards nothing either
way, new ones included, until ``restore()``: the client sees a server that went silent. ``restore()``
closes the blackholed connections (bytes were lost, so the streams cannot go on) and forwards again.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

CHUNK = 65536
START_TIMEOUT = 10.0
PASS = "pass"
REFUSE = "refuse"
BLACKHOLE = "blackhole"


@dataclass(eq=False)
class _Link:
    """One client connection and its upstream twin."""

    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None
    blackholed: bool = False
    pumps: list[asyncio.Task[None]] = field(default_factory=list)


def _reset(writer: asyncio.StreamWriter | None) -> None:
    """Close ``writer`` with a TCP reset (SO_LINGER 0), not a polite FIN."""
    if writer is None or writer.transport.is_closing():
        return
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class TcpProxy:
    """Forward 127.0.0.1:<port> to ``target_host:target_port``; drop or blackhole on demand."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.mode = PASS
        self.port = 0
        self.connections_seen = 0
        self._links: set[_Link] = set()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stopped: asyncio.Event | None = None
        self._refuse_until = 0.0
        self._thread = threading.Thread(target=self._serve_forever, name="tcp-proxy", daemon=True)

    # -- control, from any thread --------------------------------------------------------------------

    def start(self) -> TcpProxy:
        """Start listening; returns once ``port`` is bound."""
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT):
            raise RuntimeError("the TCP proxy did not start listening")
        return self

    def stop(self) -> None:
        """Close every connection and the listener, and end the thread."""
        if self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        self._thread.join(START_TIMEOUT)

    def drop(self, refuse_for: float = 0.0) -> None:
        """Reset every open connection now, and new ones for ``refuse_for`` seconds."""
        self._refuse_until = time.monotonic() + refuse_for
        self._loop.call_soon_threadsafe(self._drop_all)

    def blackhole(self) -> None:
        """Forward nothing, on open and new connections alike, until ``restore()``."""
        self._loop.call_soon_threadsafe(self._blackhole_all)

    def restore(self) -> None:
        """Back to a plain pipe: blackholed connections are closed, new ones forwarded."""
        self._refuse_until = 0.0
        self._loop.call_soon_threadsafe(self._restore_all)

    @contextlib.contextmanager
    def running(self) -> Iterator[TcpProxy]:
        """``with proxy.running():`` starts it and stops it at the end of the block."""
        self.start()
        try:
            yield self
        finally:
            self.stop()

    # -- inside the loop -------------------------------------------------------------------------------

    def _serve_forever(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve())
        finally:
            self._loop.close()

    async def _serve(self) -> None:
        self._stopped = asyncio.Event()
        server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = int(server.sockets[0].getsockname()[1])
        self._ready.set()
        async with server:
            await self._stopped.wait()
            self._drop_all()
        await asyncio.sleep(0)  # let the aborted pumps see their end

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections_seen += 1
        if self.mode == REFUSE or time.monotonic() < self._refuse_until:
            _reset(writer)
            return
        link = _Link(writer, blackholed=self.mode == BLACKHOLE)
        self._links.add(link)
        try:
            up_reader, link.upstream = await asyncio.open_connection(*self.target)
        except OSError:
            self._close(link)
            return
        link.pumps = [
            asyncio.ensure_future(self._pump(reader, link.upstream, link)),
            asyncio.ensure_future(self._pump(up_reader, writer, link)),
        ]
        await asyncio.gather(*link.pumps, return_exceptions=True)
        self._close(link)

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, link: _Link) -> None:
        """Copy ``source`` to ``sink`` until either end closes; swallow the bytes while blackholed."""
        try:
            while chunk := await source.read(CHUNK):
                if link.blackholed:
                    continue
                sink.write(chunk)
                await sink.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            if not link.blackholed:
                self._close(link)

    def _close(self, link: _Link) -> None:
        self._links.discard(link)
        _reset(link.client)
        _reset(link.upstream)

    def _drop_all(self) -> None:
        self.mode = PASS
        for link in list(self._links):
            self._close(link)

    def _blackhole_all(self) -> None:
        self.mode = BLACKHOLE
        for link in self._links:
            link.blackholed = True

    def _restore_all(self) -> None:
        self.mode = PASS
        for link in [link for link in self._links if link.blackholed]:
            self._close(link)
