"""One request to the scheduler on the wire: its body, its retries, and reading its answer.

Luigi's ``luigid`` gets ``data=<json kwargs>`` form bodies (LUIGI_COMPAT f.1). ``/api/_batch``, which
only our own server has, gets the JSON as the body itself (no form encoding, which costs more than the
rest of a small request), and so does every call once the server has answered a batch (the RPC channel
takes nothing else).
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
from luigi.rpc.retry import RetryPolicy

__all__ = ["TRANSPORT_ERRORS", "Wire"]

TRANSPORT_ERRORS = (OSError, http.client.HTTPException)
# A failed ping is not ridden out: the keep-alive thread pings again at its next interval anyway.
_NOT_RIDDEN_OUT = frozenset({"ping"})


class Wire:
    """How requests to one scheduler are encoded, retried and read; the connection is the caller's."""

    def __init__(self, address: SchedulerAddress, retry: RetryPolicy, headers: dict[str, str]) -> None:
        self.address = address
        self.retry = retry
        self.headers = headers
        self.json_headers = {**headers, "Content-Type": "application/json"}
        self.json_bodies = False  # set once the server answered a /api/_batch: it is one of ours

    def fetch(self, connection: KeepAliveConnection, url_suffix: str, data_json: str) -> Any:
        """POST ``data_json`` to ``url_suffix``, retried by the retry policy; the ``response``."""
        if url_suffix == BATCH_URL_SUFFIX or self.json_bodies:
            body, headers = data_json.encode("utf-8"), self.json_headers
        else:
            body, headers = urlencode({"data": data_json}).encode("ascii"), self.headers
        path = self.address.path_for(url_suffix)
        ride_out = url_suffix.rpartition("/")[2] not in _NOT_RIDDEN_OUT
        return self.retry.run(path, lambda: self._exchange(connection, path, body, headers), ride_out)

    def send_batch(self, connection: KeepAliveConnection, payload: str) -> None:
        """Send a ``/api/_batch`` whose answer ``receive_batch`` reads later (transport errors raise)."""
        connection.send(self.address.path_for(BATCH_URL_SUFFIX), payload.encode("utf-8"), self.json_headers)

    def receive_batch(self, connection: KeepAliveConnection) -> Any:
        """The ``response`` to the ``/api/_batch`` sent last (raising as ``read_answer`` or the socket)."""
        return self.read_answer(self.address.path_for(BATCH_URL_SUFFIX), connection.receive())

    def _exchange(
        self, connection: KeepAliveConnection, path: str, body: bytes, headers: dict[str, str]
    ) -> Any:
        try:
            answer = connection.post(path, body, headers)
        except TRANSPORT_ERRORS as exc:
            raise TransientError(exc) from exc
        return self.read_answer(path, answer)

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
