"""One request to the scheduler on the wire: its body, its retries, and reading its answer.

Luigi's ``luigid`` gets ``data=<json kwargs>`` form bodies (LUIGI_COMPAT f.1). ``/api/_batch``, which
only our own server has, gets the JSON as the body itself (no form encoding, which costs more than the
rest of a small request), and so does every call once the server has answered a batch (the RPC channel
takes nothing else). Given several luigid URLs, each attempt tries them in turn from the one followed
(``luigi.rpc.failover``): a standby's 503 or no answer moves on to the next at once.
"""

from __future__ import annotations

import http.client
import json
from typing import Any
from urllib.parse import urlencode

from luigi.rpc.address import SchedulerAddress
from luigi.rpc.calls import BATCH_URL_SUFFIX
from luigi.rpc.connection import HTTPAnswer, KeepAliveConnection
from luigi.rpc.errors import RPCError, SchedulerHTTPError, TransientError, error_message, snippet
from luigi.rpc.failover import SchedulerAddresses, is_standby_answer
from luigi.rpc.retry import RetryPolicy

__all__ = ["TRANSPORT_ERRORS", "Wire"]

TRANSPORT_ERRORS = (OSError, http.client.HTTPException)
# A failed ping is not ridden out: the keep-alive thread pings again at its next interval anyway.
_NOT_RIDDEN_OUT = frozenset({"ping"})


class Wire:
    """How requests to one scheduler are encoded, retried and read; the connection is the caller's."""

    def __init__(self, addresses: SchedulerAddresses, retry: RetryPolicy, headers: dict[str, str]) -> None:
        self.addresses = addresses
        self.retry = retry
        self.headers = headers
        self.json_headers = {**headers, "Content-Type": "application/json"}
        self.json_bodies = False  # set once the server answered a /api/_batch: it is one of ours

    @property
    def address(self) -> SchedulerAddress:
        """The scheduler followed now."""
        return self.addresses.current

    def fetch(self, connection: KeepAliveConnection, url_suffix: str, data_json: str) -> Any:
        """POST ``data_json`` to ``url_suffix``, retried by the retry policy; the ``response``."""
        if url_suffix == BATCH_URL_SUFFIX or self.json_bodies:
            body, headers = data_json.encode("utf-8"), self.json_headers
        else:
            body, headers = urlencode({"data": data_json}).encode("ascii"), self.headers
        ride_out = url_suffix.rpartition("/")[2] not in _NOT_RIDDEN_OUT
        what = self.address.path_for(url_suffix)
        return self.retry.run(what, lambda: self._exchange(connection, url_suffix, body, headers), ride_out)

    def send_batch(self, connection: KeepAliveConnection, payload: str) -> None:
        """Send a ``/api/_batch`` whose answer ``receive_batch`` reads later (transport errors raise)."""
        address = self.address
        connection.follow(address)
        connection.send(address.path_for(BATCH_URL_SUFFIX), payload.encode("utf-8"), self.json_headers)

    def receive_batch(self, connection: KeepAliveConnection) -> Any:
        """The ``response`` to the ``/api/_batch`` sent last (raising as ``read_answer`` or the socket)."""
        return self.read_answer(self.address.path_for(BATCH_URL_SUFFIX), connection.receive())

    def _exchange(
        self, connection: KeepAliveConnection, url_suffix: str, body: bytes, headers: dict[str, str]
    ) -> Any:
        """One attempt: the followed scheduler, then each other one while they are standbys or silent."""
        last = len(self.addresses) - 1
        for number in range(last + 1):
            address = self.address
            connection.follow(address)
            path = address.path_for(url_suffix)
            try:
                answer = connection.post(path, body, headers)
            except TRANSPORT_ERRORS as exc:
                if number == last:
                    raise TransientError(exc) from exc
                self.addresses.move_on(address, f"does not answer ({exc})")
                continue
            if number < last and is_standby_answer(answer):
                self.addresses.move_on(address, "is a standby")
                continue
            return self.read_answer(path, answer)
        raise AssertionError("unreachable: the last address answers or raises")

    def read_answer(self, path: str, answer: HTTPAnswer) -> Any:
        """The ``response`` of a 2xx answer; TransientError for a 5xx one, RPCError for any other."""
        url = self.address.url
        if 200 <= answer.status < 300:
            try:
                payload = json.loads(answer.body)
            except ValueError:
                payload = None
            if not isinstance(payload, dict) or "response" not in payload:
                raise RPCError(
                    f"Remote scheduler {url!r} sent a malformed answer to {path} "
                    f'(expected JSON {{"response": ...}}): {snippet(answer.body)}',
                    status=answer.status,
                )
            return payload["response"]
        error = SchedulerHTTPError(answer.status, error_message(answer), path)
        if answer.status >= 500:
            raise TransientError(error)
        raise RPCError(
            f"Remote scheduler {url!r} refused {path}: HTTP {answer.status}: {error.message}",
            error,
            status=answer.status,
        )
