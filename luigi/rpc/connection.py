"""One keep-alive HTTP connection to the scheduler, reopened when the server closed it between requests."""

from __future__ import annotations

import http.client
from dataclasses import dataclass

from luigi.rpc.address import SchedulerAddress

# What a request on a kept-alive socket raises when the server closed that socket while it was idle.
_STALE_SOCKET_ERRORS = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


@dataclass(frozen=True)
class HTTPAnswer:
    """A complete HTTP response: its status code and body."""

    status: int
    body: bytes


class KeepAliveConnection:
    """POSTs over one persistent connection; not thread-safe (the client serialises calls).

    Transport failures raise ``OSError`` or ``http.client.HTTPException``; the connection is then
    dropped, and the next request opens a new one.
    """

    def __init__(self, address: SchedulerAddress, timeout: float | None) -> None:
        self._address = address
        self._timeout = timeout
        self._connection: http.client.HTTPConnection | None = None
        self._used = False  # whether the open connection has already carried a full exchange

    def post(self, path: str, body: bytes, headers: dict[str, str]) -> HTTPAnswer:
        """Send one POST and read the whole answer."""
        reused = self._connection is not None and self._used
        try:
            return self._exchange(path, body, headers)
        except _STALE_SOCKET_ERRORS:
            if not reused:
                raise
        # The server closed the idle socket before reading our request: resend once on a fresh one.
        return self._exchange(path, body, headers)

    def close(self) -> None:
        """Close the socket (a later ``post`` reconnects)."""
        connection, self._connection = self._connection, None
        self._used = False
        if connection is not None:
            connection.close()

    def _exchange(self, path: str, body: bytes, headers: dict[str, str]) -> HTTPAnswer:
        if self._connection is None:
            self._connection = self._address.new_connection(self._timeout)
            self._used = False
        try:
            self._connection.request("POST", path, body=body, headers=headers)
            response = self._connection.getresponse()
            answer = HTTPAnswer(response.status, response.read())
        except (OSError, http.client.HTTPException):
            self.close()
            raise
        if response.will_close:
            self.close()
        else:
            self._used = True
        return answer
