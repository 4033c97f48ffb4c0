"""``RemoteScheduler``: the central scheduler's RPC methods, called over HTTP (LUIGI_COMPAT f.1).

Each method of ``luigi.rpc_methods`` becomes a method here that POSTs ``data=<json kwargs>`` to
``<scheduler_url>/api/<name>`` and returns the ``response`` of the JSON answer, the wire format of
Luigi's ``luigid``. Connection failures and 5xx answers are retried with capped exponential backoff
(``[core] rpc_retry_attempts`` / ``rpc_retry_wait``); 4xx answers are the caller's error and raise at once.

Calls whose answer nobody reads (``add_task``, status messages, ...) are held and sent in order as one
``/api/_batch`` request, before any other call, on ``flush()``/``close()``, or when ``batch_size`` are
waiting; a server without ``/api/_batch`` (a real ``luigid``) gets them one by one instead. A held call
that fails raises RPCError from whichever call sends it (that call is then not sent itself).
"""

from __future__ import annotations

import atexit
import http.client
import json
import logging
import os
import random
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from luigi.__version__ import VERSION
from luigi.configuration import get_config
from luigi.rpc.address import SchedulerAddress, parse_scheduler_url, unix_socket_url
from luigi.rpc.calls import (
    BATCH_URL_SUFFIX,
    BUFFERABLE_METHODS,
    BatchItemError,
    EncodedCall,
    batch_errors,
    batch_payload,
    encode_call,
    signature_of,
)
from luigi.rpc.connection import HTTPAnswer, KeepAliveConnection
from luigi.rpc.errors import (
    RPCError,
    SchedulerHTTPError,
    TransientError,
    describe,
    error_message,
    snippet,
    summarise,
)
from luigi.rpc_methods import RPC_METHODS, RpcMethod

__all__ = ["RPCError", "RemoteScheduler", "SchedulerHTTPError", "logger", "retry_delay", "unix_socket_url"]

logger = logging.getLogger("luigi-interface")

DEFAULT_BATCH_SIZE = 200
_MAX_BATCH_BYTES = 1 << 20  # also send once this much JSON is held (the server caps request bodies)
_FIRST_RETRY_WAIT = 1.0  # seconds; doubled after each failed attempt, up to rpc_retry_wait
_NO_BATCH_ENDPOINT = frozenset({404, 405, 501})  # how a server without /api/_batch answers it
_EXIT_FLUSH_LOCK_TIMEOUT = 5.0
# This process's id, renewed in a forked child by _reset_clients_in_child: os.getpid() is a system call,
# and a client checks on every call that its socket and held calls belong to this process.
_this_process: list[int] = [os.getpid()]


def retry_delay(attempt: int, cap: float, rng: random.Random) -> float:
    """Seconds to wait after failed attempt ``attempt`` (1-based): doubling from 1 s, at most ``cap``.

    The wait is drawn from the upper half of that ceiling so that many workers retrying after one
    scheduler restart do not all come back in the same instant.
    """
    if cap <= 0:
        return 0.0
    ceiling = min(cap, _FIRST_RETRY_WAIT * 2 ** (attempt - 1))
    return rng.uniform(ceiling / 2, ceiling)


def _sleep(seconds: float) -> None:
    time.sleep(seconds)  # looked up at call time so that patching ``time.sleep`` reaches it


@dataclass
class _ProcessState:
    """What must not cross a fork: the socket, the held calls, and the lock guarding both."""

    connection: KeepAliveConnection
    pid: int = field(default_factory=lambda: _this_process[0])
    lock: threading.RLock = field(default_factory=threading.RLock)
    buffer: list[EncodedCall] = field(default_factory=list)
    buffered_bytes: int = 0
    unanswered: list[EncodedCall] | None = None  # a batch sent whose answer is not read yet
    ahead: list[EncodedCall] | None = None  # held calls and a get_work sent by ``ask_ahead``, unread
    ahead_response: Any = None  # that get_work's response, once read (None: no usable answer)


class RemoteScheduler:
    """A scheduler on another host (or Unix socket), used by a ``Worker`` like the in-process one.

    Args:
        url: ``http://host:port/``, ``https://...`` or ``http+unix://<percent-encoded socket path>/``;
            ``user:password@`` in it is sent as HTTP Basic auth.
        connect_timeout: socket timeout in seconds (``[core] rpc_connect_timeout``, default 10).
        retry_attempts, retry_wait, log_retries: override ``[core] rpc_retry_attempts`` (3),
            ``rpc_retry_wait`` (30, the cap of the backoff) and ``rpc_log_retries`` (True).
        auth_token: sent as ``Authorization: Bearer``; default ``$LUIGI_AUTH_TOKEN``, then
            ``[scheduler] auth_token``. It takes precedence over URL credentials.
        batch_size: how many fire-and-forget calls to hold before sending them; 1 or less disables.
        sleep, rng: injectable for tests (the retry wait and its jitter).
    """

    def __init__(
        self,
        url: str = "http://localhost:8082/",
        connect_timeout: float | None = None,
        *,
        retry_attempts: int | None = None,
        retry_wait: float | None = None,
        log_retries: bool | None = None,
        auth_token: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        sleep: Callable[[float], None] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        config = get_config()
        self._url = url
        self._address: SchedulerAddress = parse_scheduler_url(url)
        if connect_timeout is None:
            connect_timeout = config.getfloat("core", "rpc_connect_timeout", 10.0)
        if retry_attempts is None:
            retry_attempts = config.getint("core", "rpc_retry_attempts", 3)
        if retry_wait is None:
            retry_wait = config.getfloat("core", "rpc_retry_wait", 30.0)
        if log_retries is None:
            log_retries = config.getboolean("core", "rpc_log_retries", True)
        self._connect_timeout = _checked(
            "rpc_connect_timeout", float(connect_timeout), minimum=0.0, strict=True
        )
        self._rpc_retry_attempts = int(_checked("rpc_retry_attempts", retry_attempts, minimum=1))
        self._rpc_retry_wait = _checked("rpc_retry_wait", float(retry_wait), minimum=0.0)
        self._rpc_log_retries = bool(log_retries)
        self._headers = _request_headers(self._address, _auth_token(auth_token, config))
        self._json_headers = {**self._headers, "Content-Type": "application/json"}
        self._batch_size = int(batch_size)
        self._batching = self._batch_size > 1
        self._batch_answered = False  # the server has answered a /api/_batch: it is one of ours
        self._use_channel = config.getboolean("core", "rpc_channel", True)
        self._sleep = sleep if sleep is not None else _sleep
        self._rng = rng if rng is not None else random.Random()
        self._state = self._new_process_state()
        # A worker riding out a scheduler restart sets this: held calls the scheduler never answered are
        # then kept and resent with the next call instead of being dropped once reported.
        self.retain_undelivered = False
        _LIVE_CLIENTS.add(self)

    if TYPE_CHECKING:  # the RPC methods are generated from luigi.rpc_methods below the class

        def __getattr__(self, name: str) -> Any: ...

    def __repr__(self) -> str:
        return f"RemoteScheduler({self._address.url!r})"

    # -- public ---------------------------------------------------------------------------------------

    def flush(self) -> None:
        """Send every held call now; RPCError if the scheduler refused or failed any of them."""
        state = self._own_state()
        with state.lock:
            self._flush_locked(state)

    def close(self) -> None:
        """Send the held calls, then close the connection (a later call opens a new one)."""
        state = self._own_state()
        with state.lock:
            try:
                self._flush_locked(state)
            finally:
                state.connection.close()

    def ask_ahead(self, **get_work_kwargs: Any) -> bool:
        """Send the held calls and a ``get_work`` without waiting; ``take_ahead`` returns its response.

        Meanwhile the caller runs its current task while the server answers. Only a server known to be
        ours takes this (False, nothing sent, for any other, or while an earlier one is unread).
        """
        call = encode_call(RPC_METHODS["get_work"], (), get_work_kwargs)
        state = self._own_state()
        with state.lock:
            if not (self._batching and self._batch_answered) or state.ahead is not None:
                return False
            self._settle_unanswered(state)
            calls, state.buffer, state.buffered_bytes = [*state.buffer, call], [], 0
            payload = batch_payload(calls, stop_on_error=True).encode("utf-8")
            try:
                state.connection.send(self._address.path_for(BATCH_URL_SUFFIX), payload, self._json_headers)
            except (OSError, http.client.HTTPException):
                self._hold_again(state, calls[:-1])  # they go with the next call, with its retries
                return False
            state.ahead, state.ahead_response = calls, None
            return True

    def take_ahead(self) -> Any:
        """The response to the ``get_work`` that ``ask_ahead`` sent, or None when there is none to use
        (nothing was asked, no usable answer came, or the server refused it): ask again the ordinary way,
        which a scheduler answers with the task it granted and we never heard of."""
        state = self._own_state()
        with state.lock:
            self._settle_unanswered(state)
            response, state.ahead_response = state.ahead_response, None
            return response

    @property
    def batching(self) -> bool:
        """Whether fire-and-forget calls are currently held and sent through ``/api/_batch``."""
        return self._batching

    # -- one call -------------------------------------------------------------------------------------

    def _call(self, method: RpcMethod, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        """What every generated RPC method does: check, then hold or send."""
        call = encode_call(method, args, kwargs)
        state = self._own_state()
        with state.lock:
            if self._batching and call.method in BUFFERABLE_METHODS:
                state.buffer.append(call)
                state.buffered_bytes += len(call.kwargs_json)
                if len(state.buffer) >= self._batch_size or state.buffered_bytes >= _MAX_BATCH_BYTES:
                    self._send_full_batch(state)
                return None
            self._settle_unanswered(state)
            if self._batching and state.buffer:
                return self._send_with_held(state, method, call)
            self._flush_locked(state)
            return self._request(f"api/{method.name}", call.kwargs_json, method.attempts, method.allow_null)

    def _send_with_held(self, state: _ProcessState, method: RpcMethod, call: EncodedCall) -> Any:
        """Send the held calls and then ``call`` in one ``/api/_batch`` request; ``call``'s response.

        The server stops at the first refused call, so ``call`` does not run after a held call failed
        (the failure raises here, as a flush would). A server error in ``call`` alone asks again singly.
        """
        held, state.buffer, state.buffered_bytes = state.buffer, [], 0
        try:
            reply = self._fetch(BATCH_URL_SUFFIX, batch_payload([*held, call], stop_on_error=True))
        except RPCError as exc:
            if exc.status not in _NO_BATCH_ENDPOINT:
                raise _undelivered(exc, held, keep_in=self._keep_in(state)) from exc
            self._stop_batching(exc)
            self._send_one_by_one(held, state)
            return self._request(f"api/{method.name}", call.kwargs_json, method.attempts, method.allow_null)
        errors = [error for error in self._batch_errors([*held, call], reply) if error.call is not call]
        self._found_our_server(state)
        if errors:
            raise self._batch_failure(len(held), errors)
        return self._own_answer(method, call, reply[-1])

    def _own_answer(self, method: RpcMethod, call: EncodedCall, entry: dict[str, Any]) -> Any:
        """``call``'s response from its batch entry; a server error or an unwanted null asks again alone."""
        if "error" not in entry:
            if entry["response"] is not None or method.allow_null:
                return entry["response"]
        elif not (isinstance(entry.get("status"), int) and entry["status"] >= 500):
            error = SchedulerHTTPError(entry.get("status") or 400, str(entry["error"]), f"api/{method.name}")
            raise RPCError(
                f"Remote scheduler {self._address.url!r} refused api/{method.name}: "
                f"HTTP {error.status}: {error.message}",
                error,
                status=error.status,
            )
        return self._request(f"api/{method.name}", call.kwargs_json, method.attempts, method.allow_null)

    def _request(self, url_suffix: str, data_json: str, attempts: int = 3, allow_null: bool = True) -> Any:
        """The ``response`` of one RPC, asking up to ``attempts`` times while it is null (if not allowed)."""
        for _ in range(max(1, attempts)):
            response = self._fetch(url_suffix, data_json)
            if response is not None or allow_null:
                return response
            logger.debug(
                "Remote scheduler %r answered %s with null; asking again", self._address.url, url_suffix
            )
        raise RPCError(
            f"Received null response from remote scheduler {self._address.url!r} "
            f"for {url_suffix} ({max(1, attempts)} attempts)"
        )

    def _fetch(self, url_suffix: str, data_json: str) -> Any:
        """POST ``data=<data_json>`` to ``url_suffix``, retrying transient failures; the ``response``.

        ``/api/_batch``, which only our own server has, gets the JSON as the body itself (no form
        encoding, which costs more than the rest of a small request), and so does every call once the
        server has answered a batch (the RPC channel takes nothing else).
        """
        if url_suffix == BATCH_URL_SUFFIX or self._batch_answered:
            body, headers = data_json.encode("utf-8"), self._json_headers
        else:
            body, headers = urlencode({"data": data_json}).encode("ascii"), self._headers
        path = self._address.path_for(url_suffix)
        attempts = self._rpc_retry_attempts
        failure: BaseException | None = None
        for attempt in range(1, attempts + 1):
            try:
                return self._exchange(path, body, headers)
            except TransientError as exc:
                failure = exc.cause
            if attempt < attempts:
                self._wait_before_retry(attempt, path, failure)
        status = failure.status if isinstance(failure, SchedulerHTTPError) else None
        raise RPCError(
            f"Errors ({attempts} attempts) when connecting to remote scheduler {self._address.url!r}: "
            f"{describe(failure)}",
            failure,
            status=status,
        )

    def _exchange(self, path: str, body: bytes, headers: dict[str, str]) -> Any:
        state = self._own_state()
        with state.lock:
            try:
                answer = state.connection.post(path, body, headers)
            except (OSError, http.client.HTTPException) as exc:
                raise TransientError(exc) from exc
        return self._read_answer(path, answer)

    def _read_answer(self, path: str, answer: HTTPAnswer) -> Any:
        if 200 <= answer.status < 300:
            try:
                payload = json.loads(answer.body)
            except ValueError:
                payload = None
            if not isinstance(payload, dict) or "response" not in payload:
                raise RPCError(
                    f"Remote scheduler {self._address.url!r} sent a malformed answer to {path} "
                    f'(expected JSON {{"response": ...}}): {snippet(answer.body)}',
                    status=answer.status,
                )
            return payload["response"]
        error = SchedulerHTTPError(answer.status, error_message(answer), path)
        if answer.status >= 500:
            raise TransientError(error)
        raise RPCError(
            f"Remote scheduler {self._address.url!r} refused {path}: HTTP {answer.status}: {error.message}",
            error,
            status=answer.status,
        )

    def _wait_before_retry(self, attempt: int, path: str, failure: BaseException | None) -> None:
        delay = retry_delay(attempt, self._rpc_retry_wait, self._rng)
        if self._rpc_log_retries:
            logger.warning(
                "Failed connecting to remote scheduler %r (%s, attempt %d of %d): %s; retrying in %.1f s",
                self._address.url,
                path,
                attempt,
                self._rpc_retry_attempts,
                describe(failure),
                delay,
            )
        self._sleep(delay)

    # -- held calls -----------------------------------------------------------------------------------

    def _flush_locked(self, state: _ProcessState) -> None:
        self._settle_unanswered(state)
        calls, state.buffer, state.buffered_bytes = state.buffer, [], 0
        if not calls:
            return
        if self._batching:
            try:
                reply = self._fetch(BATCH_URL_SUFFIX, batch_payload(calls))
            except RPCError as exc:
                if exc.status not in _NO_BATCH_ENDPOINT:
                    raise _undelivered(exc, calls, keep_in=self._keep_in(state)) from exc
                self._stop_batching(exc)
            else:
                self._check_batch_reply(state, calls, reply)
                return
        self._send_one_by_one(calls, state)

    def _check_batch_reply(self, state: _ProcessState, calls: list[EncodedCall], reply: Any) -> None:
        errors = self._batch_errors(calls, reply)
        self._found_our_server(state)
        if errors:
            raise self._batch_failure(len(calls), errors)

    def _found_our_server(self, state: _ProcessState) -> None:
        """The server answered a ``_batch``, so it is one of ours: from now on single calls go as JSON
        bodies too, and sockets are asked to switch to its RPC channel (unless ``[core] rpc_channel`` is off).
        """
        if not self._batch_answered:
            self._batch_answered = True
            self._offer_channel(state)

    def _offer_channel(self, state: _ProcessState) -> None:
        if self._batch_answered and self._use_channel:
            state.connection.ask_for_channel(self._address.path_for(BATCH_URL_SUFFIX), self._headers)

    def _send_full_batch(self, state: _ProcessState) -> None:
        """Send the held calls without waiting for the answer, which the next use of the connection reads.

        Meanwhile the caller goes on (a worker walking its graph) while the server applies the batch.
        Until a server has answered a batch (it may be a Luigi luigid without one), this is a plain flush.
        """
        if not self._batch_answered:
            self._flush_locked(state)
            return
        self._settle_unanswered(state)  # if that had to resend, it flushed these calls too
        calls, state.buffer, state.buffered_bytes = state.buffer, [], 0
        if not calls:
            return
        path = self._address.path_for(BATCH_URL_SUFFIX)
        try:
            state.connection.send(path, batch_payload(calls).encode("utf-8"), self._json_headers)
        except (OSError, http.client.HTTPException):
            self._hold_again(state, calls)
            self._flush_locked(state)  # not even sent: the ordinary way, with its retries
            return
        state.unanswered = calls

    def _settle_ahead(self, state: _ProcessState) -> None:
        """Read the answer to what ``ask_ahead`` sent (before anything else uses the connection).

        Held calls without a usable answer are held again, to go with the next call; a refused one
        raises, as it would have from that ``get_work``.
        """
        calls, state.ahead = state.ahead, None
        if calls is None:
            return
        try:
            reply = self._read_batch_answer(state)
            errors = self._batch_errors(calls, reply)
        except (OSError, http.client.HTTPException, TransientError, RPCError):
            self._hold_again(state, calls[:-1])
            return
        held_errors = [error for error in errors if error.call is not calls[-1]]
        if held_errors:
            raise self._batch_failure(len(calls) - 1, held_errors)
        if not errors:
            state.ahead_response = reply[-1]["response"]

    def _read_batch_answer(self, state: _ProcessState) -> Any:
        """The answer to a ``/api/_batch`` request sent earlier on this connection."""
        return self._read_answer(self._address.path_for(BATCH_URL_SUFFIX), state.connection.receive())

    def _hold_again(self, state: _ProcessState, calls: list[EncodedCall]) -> None:
        state.buffer[:0] = calls
        state.buffered_bytes += sum(len(c.kwargs_json) for c in calls)

    def _settle_unanswered(self, state: _ProcessState) -> None:
        """Read the answer to the batch ``_send_full_batch`` sent (resending it the ordinary way if lost)."""
        self._settle_ahead(state)
        calls, state.unanswered = state.unanswered, None
        if calls is None:
            return
        try:
            reply = self._read_batch_answer(state)
        except (OSError, http.client.HTTPException, TransientError):
            self._hold_again(state, calls)  # no usable answer: the flush below sends them again, with retries
            self._flush_locked(state)
            return
        except RPCError as exc:
            raise _undelivered(exc, calls) from exc
        self._check_batch_reply(state, calls, reply)

    def _stop_batching(self, refusal: RPCError) -> None:
        self._batching = False
        logger.info(
            "Remote scheduler %r has no /api/_batch (HTTP %s); sending calls one at a time",
            self._address.url,
            refusal.status,
        )

    def _batch_errors(self, calls: list[EncodedCall], reply: Any) -> list[BatchItemError]:
        """The refused calls of a batch answer (RPCError when the answer is not shaped as one)."""
        try:
            return batch_errors(calls, reply)
        except ValueError as exc:
            raise RPCError(
                f"Remote scheduler {self._address.url!r} sent a malformed /api/_batch answer: {exc}"
            ) from None

    def _batch_failure(self, count: int, errors: list[BatchItemError]) -> RPCError:
        return RPCError(
            f"{len(errors)} of {count} calls sent in a batch to remote scheduler "
            f"{self._address.url!r} failed: {summarise([str(e) for e in errors])}",
            status=errors[0].status,
        )

    def _send_one_by_one(self, calls: list[EncodedCall], state: _ProcessState) -> None:
        """Send held calls singly, in order; every failure is reported, none is skipped silently."""
        failures: list[str] = []
        for index, call in enumerate(calls):
            try:
                self._request(f"api/{call.method}", call.kwargs_json, RPC_METHODS[call.method].attempts)
            except RPCError as exc:
                if exc.status is None:  # no answer at all: the rest would fail the same way
                    earlier = f" (earlier: {summarise(failures)})" if failures else ""
                    raise _undelivered(exc, calls[index:], earlier, keep_in=self._keep_in(state)) from exc
                failures.append(f"{call.describe()}: {exc.message}")
        if failures:
            raise RPCError(
                f"{len(failures)} of {len(calls)} held calls to remote scheduler {self._address.url!r} "
                f"failed: {summarise(failures)}"
            )

    def _keep_in(self, state: _ProcessState) -> _ProcessState | None:
        return state if self.retain_undelivered else None

    # -- fork safety ----------------------------------------------------------------------------------

    def _new_process_state(self) -> _ProcessState:
        state = _ProcessState(KeepAliveConnection(self._address, self._connect_timeout))
        self._offer_channel(state)
        return state

    def _own_state(self) -> _ProcessState:
        """This process's socket and held calls; a forked child never uses its parent's."""
        state = self._state
        if state.pid != _this_process[0]:
            self._forget_parent_state()
            state = self._state
        return state

    def _forget_parent_state(self) -> None:
        """In a forked child: drop the parent's socket (the parent keeps it open) and its held calls."""
        inherited, self._state = self._state, self._new_process_state()
        try:
            inherited.connection.close()
        except OSError:
            pass  # only our copy of the descriptor is closed; the parent's socket is unaffected

    def _flush_at_exit(self) -> None:
        state = self._state
        if state.pid != _this_process[0] or not (state.buffer or state.unanswered or state.ahead):
            return
        if not state.lock.acquire(timeout=_EXIT_FLUSH_LOCK_TIMEOUT):
            logger.error(
                "%d calls to remote scheduler %r were never sent", len(state.buffer), self._address.url
            )
            return
        try:
            self._flush_locked(state)
        except RPCError:
            logger.exception(
                "Sending the last calls to remote scheduler %r at exit failed", self._address.url
            )
        finally:
            state.lock.release()


def _make_rpc_method(method: RpcMethod) -> Callable[..., Any]:
    def rpc_method(self: RemoteScheduler, *args: Any, **kwargs: Any) -> Any:
        return self._call(method, args, kwargs)

    rpc_method.__name__ = method.name
    rpc_method.__qualname__ = f"RemoteScheduler.{method.name}"
    rpc_method.__doc__ = f"The ``{method.name}`` RPC of the remote scheduler (declared in luigi.rpc_methods)."
    rpc_method.__signature__ = signature_of(method)  # type: ignore[attr-defined]
    return rpc_method


for _method in RPC_METHODS.values():
    if hasattr(RemoteScheduler, _method.name):
        raise RuntimeError(f"RPC method {_method.name!r} would hide RemoteScheduler.{_method.name}")
    setattr(RemoteScheduler, _method.name, _make_rpc_method(_method))


# -- configuration helpers -------------------------------------------------------------------------------


def _checked(option: str, value: Any, minimum: float, strict: bool = False) -> Any:
    if value < minimum or (strict and value == minimum):
        relation = "more than" if strict else "at least"
        raise ValueError(f"[core] {option} must be {relation} {minimum:g}, got {value!r}")
    return value


def _auth_token(explicit: str | None, config: Any) -> str | None:
    token = explicit or os.environ.get("LUIGI_AUTH_TOKEN") or config.get("scheduler", "auth_token", None)
    return str(token) if token else None


def _request_headers(address: SchedulerAddress, token: str | None) -> dict[str, str]:
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "Accept": "application/json",
        "User-Agent": f"luigi/{VERSION}",
    }
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    elif address.basic_auth is not None:
        headers["Authorization"] = address.basic_auth
    return headers


def _undelivered(
    error: RPCError, calls: list[EncodedCall], also: str = "", keep_in: _ProcessState | None = None
) -> RPCError:
    """``error`` extended with the held calls it kept from being delivered.

    When the scheduler did not answer at all, the calls go back to the front of ``keep_in``'s buffer, so
    that a caller riding out a scheduler restart loses none of them (they go with the next call).
    """
    names = sorted({call.method for call in calls})
    kept = ""
    if keep_in is not None and error.status is None:
        keep_in.buffer[:0] = calls
        keep_in.buffered_bytes += sum(len(call.kwargs_json) for call in calls)
        kept = "; they are kept and sent with the next call"
    return RPCError(
        f"{error.message} ({len(calls)} held calls were not delivered: {', '.join(names)}{kept}){also}",
        error.sub_exception,
        status=error.status,
    )


# -- process lifecycle -----------------------------------------------------------------------------------

_LIVE_CLIENTS: weakref.WeakSet[RemoteScheduler] = weakref.WeakSet()


def _reset_clients_in_child() -> None:
    _this_process[0] = os.getpid()
    for client in list(_LIVE_CLIENTS):
        client._forget_parent_state()


def _flush_clients_at_exit() -> None:
    for client in list(_LIVE_CLIENTS):
        client._flush_at_exit()


os.register_at_fork(after_in_child=_reset_clients_in_child)
atexit.register(_flush_clients_at_exit)
