"""A real SMTP server for e-mail tests: aiosmtpd on a free localhost port, keeping what it accepts.

``smtp_on_localhost(**controller_kwargs)`` serves until the block ends and yields its ``Mailbox``; the
test points ``[smtp] host``/``port`` (or a luigid's config) at ``mailbox.port``. The server listens on a
socket bound to port 0 here, so its port is never free between being chosen and being served (another
process could take a port probed free and let go).
"""

from __future__ import annotations

import asyncio
import contextlib
import email as email_lib
import socket
import threading
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass
from email.message import Message
from typing import Any

from aiosmtpd.controller import Controller

from helpers.luigid import wait_until


@dataclass
class Delivery:
    """One message as the server received it."""

    mail_from: str
    rcpt_tos: list[str]
    message: Message
    over_tls: bool
    login: str | None

    @property
    def body(self) -> str:
        part = self.message.get_payload()[0]
        return part.get_payload(decode=True).decode("utf-8")

    @property
    def subject(self) -> str:
        return str(self.message["Subject"])


class Mailbox:
    """aiosmtpd handler keeping every message it accepts (``port`` is set once it serves)."""

    def __init__(self) -> None:
        self.deliveries: list[Delivery] = []
        self.port = 0
        self._lock = threading.Lock()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        login = session.auth_data.login.decode() if session.authenticated else None
        delivery = Delivery(
            envelope.mail_from,
            list(envelope.rcpt_tos),
            email_lib.message_from_bytes(envelope.content),
            session.ssl is not None,
            login,
        )
        with self._lock:
            self.deliveries.append(delivery)
        return "250 OK"

    def only(self) -> Delivery:
        """The single message received (aiosmtpd inspects handler attributes, so this is no property)."""
        assert len(self.deliveries) == 1, self.deliveries
        return self.deliveries[0]

    def to(self, recipient: str) -> list[Delivery]:
        """The messages delivered to ``recipient``."""
        with self._lock:
            return [d for d in self.deliveries if recipient in d.rcpt_tos]

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Delivery]:
        """Wait (with a deadline) until at least ``count`` messages arrived; all of them."""
        wait_until(lambda: len(self.deliveries) >= count, timeout=timeout, what=f"{count} e-mail(s)")
        with self._lock:
            return list(self.deliveries)


class _BoundSocketController(Controller):
    """aiosmtpd's Controller serving on a socket bound beforehand (its port is known before it serves)."""

    def __init__(self, handler: Any, bound: socket.socket, **controller_kwargs: Any) -> None:
        host, port = bound.getsockname()[:2]
        super().__init__(handler, hostname=host, port=port, **controller_kwargs)
        self._bound = bound

    def _create_server(self) -> Awaitable[asyncio.AbstractServer]:
        """aiosmtpd's hook for making the listener: on the bound socket rather than binding host:port."""
        return self.loop.create_server(self._factory_invoker, sock=self._bound, ssl=self.ssl_context)


@contextlib.contextmanager
def smtp_on_localhost(**controller_kwargs: Any) -> Iterator[Mailbox]:
    """An aiosmtpd server on 127.0.0.1 (keyword arguments go to its Controller) until the block ends."""
    mailbox = Mailbox()
    bound = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        bound.bind(("127.0.0.1", 0))  # the system picks a free port, held from now until the server stops
        controller = _BoundSocketController(mailbox, bound, **controller_kwargs)
        controller.start()
    except BaseException:
        bound.close()
        raise
    mailbox.port = controller.port
    try:
        yield mailbox
    finally:
        controller.stop()
