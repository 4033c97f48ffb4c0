"""``RemoteScheduler``: the central scheduler's RPC methods, called over HTTP (LUIGI_COMPAT f.1).

Each method of ``luigi.rpc_methods`` becomes a method here that POSTs ``data=<json kwargs>`` to
``<scheduler_url>/api/<name>`` and returns the ``response`` of the JSON answer, the wire format of
Luigi's ``luigid``. Failures that got no answer (or a 5xx one) are retried by ``luigi.rpc.retry``; 4xx
answers are the caller's error and raise at once.

Calls whose answer nobody reads are held (``luigi.rpc.pipeline``) and sent in order as one
``/api/_batch`` request, before any other call, on ``flush()``/``close()``, or when ``batch_size`` are
waiting; a server without ``/api/_batch`` (a real ``luigid``) gets them one by one instead. A held call
that fails raises RPCError from whichever call sends it (that call is then not sent itself). Every
public method takes the pipeline's lock once, so threads (a worker and its keep-alive pings) may share
a client.
"""

from __future__ import annotations

import atexit
import os
import random
import time
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from luigi.rpc.address import SchedulerAddress
from luigi.rpc.calls import (
    BATCH_URL_SUFFIX,
    BUFFERABLE_METHODS,
    NEVER_WAITS,
    BatchItemError,
    EncodedCall,
    batch_payload,
    encode_call,
    signature_of,
)
from luigi.rpc.connection import KeepAliveConnection
from luigi.rpc.errors import (
    NoSchedulerError,
    RPCError,
    SchedulerHTTPError,
    TransientError,
    batch_failure,
    checked_batch_errors,
    summarise,
    undelivered,
)
from luigi.rpc.failover import SchedulerAddresses, split_scheduler_urls
from luigi.rpc.fetchers import class_probe
from luigi.rpc.hooks import fetcher_class, logger, rpc_logger
from luigi.rpc.layers import LuigiLayers
from luigi.rpc.options import ClientOptions, request_headers
from luigi.rpc.pipeline import Pipeline, PipelineSlot, SentRequest, note_fork, this_process
from luigi.rpc.retry import RetryPolicy, checked_ride_out, real_sleep
from luigi.rpc.wire import TRANSPORT_ERRORS, Wire
from luigi.rpc_methods import RPC_METHODS, RpcMethod

if TYPE_CHECKING:
    from luigi.scheduler_api import SchedulerAPI

__all__ = ["RemoteScheduler", "logger"]

DEFAULT_BATCH_SIZE = 200
_MAX_BATCH_BYTES = 1 << 20  # also send once this much JSON is held (the server caps request bodies)
_NO_BATCH_ENDPOINT = frozenset({404, 405, 501})  # how a server without /api/_batch answers it
_EXIT_FLUSH_LOCK_TIMEOUT = 5.0


class RemoteScheduler(LuigiLayers):
    """A scheduler on another host (or Unix socket), used by a ``Worker`` like the in-process one.

    Luigi's hooks (``_request``, ``_fetch``, ``_fetcher``, ``_rpc_retry_attempts``, ``_rpc_retry_wait``,
    ``_rpc_log_retries``, ``_connect_timeout``) are its attributes, read at each call: see
    ``luigi.rpc.layers`` for what replacing one of the first three does.

    Args:
        url: ``http://host:port/``, ``https://...`` or ``http+unix://<percent-encoded socket path>/``;
            ``user:password@`` in it is sent as HTTP Basic auth.
        connect_timeout: socket timeout in seconds (``[core] rpc_connect_timeout``, default 10).
        retry_attempts, retry_wait, log_retries: override ``[core] rpc_retry_attempts`` (3),
            ``rpc_retry_wait`` (30, the cap of the backoff) and ``rpc_log_retries`` (True).
        auth_token: sent as ``Authorization: Bearer``; default ``$LUIGI_AUTH_TOKEN``, then
            ``[scheduler] auth_token``. It takes precedence over URL credentials.
        batch_size: how many fire-and-forget calls to hold before sending them; 1 or less disables.
        unreachable_timeout: seconds to ride out a scheduler that does not answer (see the property).
        sleep, clock, rng: injectable for tests (the retry wait, the ride-out's clock, the jitter).
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
        unreachable_timeout: float = 0.0,
        sleep: Callable[[float], None] | None = None,
        clock: Callable[[], float] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        options = ClientOptions.resolve(connect_timeout, retry_attempts, retry_wait, log_retries, auth_token)
        self._addresses = SchedulerAddresses.parse(url)
        self._url = split_scheduler_urls(url)[0].rstrip("/")  # Luigi's layers reach the first one only
        self._shown_url = self._addresses.shown
        self._connect_timeout = options.connect_timeout
        self._rpc_retry_attempts = options.retry_attempts
        self._rpc_retry_wait = _whole_if_integral(options.retry_wait)
        self._rpc_log_retries = options.log_retries
        self._fetcher_class = fetcher_class()
        self._fetcher_class_untouched = class_probe(self._fetcher_class)
        self._fetcher_headers = _token_header(options.auth_token)
        self._use_channel = options.use_channel
        self._sleep = sleep if sleep is not None else real_sleep
        self._retry = RetryPolicy(
            self._shown_url,
            self,
            sleep=self._sleep,
            clock=clock if clock is not None else time.monotonic,
            rng=rng if rng is not None else random.Random(),
        )
        self._wire = Wire(self._addresses, self._retry, request_headers(self._address, options.auth_token))
        self._batch_size = int(batch_size)
        self._batching = self._batch_size > 1
        # Held calls the scheduler never answered are kept and resent with the next call (instead of
        # being dropped once reported) while this is set: riding out a restart loses none of them.
        self.retain_undelivered = False
        self._pipelines = PipelineSlot(self._new_pipeline)
        self._aside = PipelineSlot(self._new_pipeline)  # for NEVER_WAITS calls while the pipeline is busy
        self.unreachable_timeout = unreachable_timeout
        _LIVE_CLIENTS.add(self)

    if TYPE_CHECKING:  # the RPC methods are made from luigi.rpc_methods below the class
        # Those a worker calls have the types of SchedulerAPI, so that mypy checks the client against it.
        add_task = SchedulerAPI.add_task
        add_task_batcher = SchedulerAPI.add_task_batcher
        add_worker = SchedulerAPI.add_worker
        get_work = SchedulerAPI.get_work
        ping = SchedulerAPI.ping
        count_pending = SchedulerAPI.count_pending
        announce_scheduling_failure = SchedulerAPI.announce_scheduling_failure
        set_task_status_message = SchedulerAPI.set_task_status_message
        set_task_progress_percentage = SchedulerAPI.set_task_progress_percentage
        decrease_running_task_resources = SchedulerAPI.decrease_running_task_resources
        add_scheduler_message_response = SchedulerAPI.add_scheduler_message_response
        report_task_statistics = SchedulerAPI.report_task_statistics
        scheduler_features = SchedulerAPI.scheduler_features
        append_task_log = SchedulerAPI.append_task_log

        def __getattr__(self, name: str) -> Any: ...  # the other RPC methods

    def __repr__(self) -> str:
        shown = self._address.url if len(self._addresses) == 1 else self._shown_url
        return f"RemoteScheduler({shown!r})"

    @property
    def _address(self) -> SchedulerAddress:
        """The scheduler followed now (one of several luigids on a shared state: ``rpc.failover``)."""
        return self._addresses.current

    # -- public ---------------------------------------------------------------------------------------

    @property
    def unreachable_timeout(self) -> float:
        """Seconds to keep retrying a scheduler that does not answer, losing no held call meanwhile.

        The worker's ``[worker] scheduler_unreachable_timeout``; 0 gives up after the ordinary attempts,
        as Luigi's worker does. Setting a negative value raises ValueError.
        """
        return self._retry.ride_out

    @unreachable_timeout.setter
    def unreachable_timeout(self, timeout: float) -> None:
        self._retry.ride_out = checked_ride_out(timeout)
        self.retain_undelivered = self._retry.ride_out > 0

    def flush(self) -> None:
        """Send every held call now; RPCError if the scheduler refused or failed any of them."""
        if self._layers_replaced():
            self._send_held_through_layers()
            return
        pipeline = self._own_pipeline()
        with pipeline.lock:
            self._read_sent(pipeline)
            self._deliver_held(pipeline)

    def close(self) -> None:
        """Send the held calls, then close the connection (a later call opens a new one)."""
        try:
            self.flush()
        finally:
            pipeline = self._own_pipeline()
            with pipeline.lock:
                pipeline.connection.close()
            aside = self._aside.get()
            with aside.lock:
                aside.connection.close()
            self._close_fetcher()

    def after_delivery(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the scheduler has answered every call made so far (now, if it has).

        Held calls are answered later, so a line saying that one arrived waits for this (a call that
        fails is never answered: its callback is never called).
        """
        pipeline = self._own_pipeline()
        with pipeline.lock:
            pipeline.after_delivery(callback)

    def ask_ahead(self, **get_work_kwargs: Any) -> bool:
        """Send the held calls and a ``get_work`` without waiting; ``take_ahead`` returns its response.

        Meanwhile the caller runs its current task while the server answers. Only a server known to be
        ours takes this (False, nothing sent, for any other, or while an earlier one is unread).
        """
        call = encode_call(RPC_METHODS["get_work"], (), get_work_kwargs)
        if self._layers_replaced():
            return False
        pipeline = self._own_pipeline()
        with pipeline.lock:
            if not (self._batching and self._wire.json_bodies) or pipeline.asked_ahead():
                return False
            self._read_sent(pipeline)
            calls = [*pipeline.take_held(), call]
            if not self._send_unread(pipeline, SentRequest(calls, pipeline.held_through, ahead=True)):
                pipeline.hold_again(calls[:-1])  # they go with the next call, with its retries
                return False
            pipeline.ahead_response = None
            return True

    def take_ahead(self) -> Any:
        """The response to the ``get_work`` that ``ask_ahead`` sent, or None when there is none to use
        (nothing was asked, no usable answer came, or the server refused it): ask again the ordinary way,
        which a scheduler answers with the task it granted and we never heard of."""
        pipeline = self._own_pipeline()
        with pipeline.lock:
            self._read_sent(pipeline)
            response, pipeline.ahead_response = pipeline.ahead_response, None
            return response

    @property
    def batching(self) -> bool:
        """Whether fire-and-forget calls are currently held and sent through ``/api/_batch``."""
        return self._batching

    # -- one call -------------------------------------------------------------------------------------

    def _call(self, method: RpcMethod, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        """What every generated RPC method does: check, then hold or send (or go through Luigi's layers)."""
        if self._layers_replaced():
            return self._call_through_layers(method, args, kwargs)
        call = encode_call(method, args, kwargs)
        pipeline = self._own_pipeline()
        if not pipeline.lock.acquire(blocking=method.name not in NEVER_WAITS):
            return self._send_aside(method, call)  # another thread's call holds the pipeline
        try:
            if self._batching and call.method in BUFFERABLE_METHODS:
                pipeline.hold(call)
                if pipeline.is_full(self._batch_size, _MAX_BATCH_BYTES):
                    self._send_held_without_waiting(pipeline)
                return None
            self._read_sent(pipeline)
            if self._batching and pipeline.held:
                return self._send_with_held(pipeline, method, call)
            self._deliver_held(pipeline)
            return self._send_one(f"api/{method.name}", call.kwargs_json, method.attempts, method.allow_null)
        finally:
            pipeline.lock.release()

    def _send_aside(self, method: RpcMethod, call: EncodedCall) -> Any:
        """``call`` alone, over a connection of its own, while the pipeline is busy (a worker riding out
        an outage holds it for minutes): a keep-alive ping must not wait behind it, or the scheduler
        takes the worker for dead. Held calls stay for the pipeline's next request."""
        aside = self._aside.get()
        with aside.lock:
            return self._wire.fetch(aside.connection, f"api/{method.name}", call.kwargs_json)

    def _send_with_held(self, pipeline: Pipeline, method: RpcMethod, call: EncodedCall) -> Any:
        """Send the held calls and then ``call`` in one ``/api/_batch`` request; ``call``'s response.

        The server stops at the first refused call, so ``call`` does not run after a held call failed
        (the failure raises here, as a flush would). A server error in ``call`` alone asks again singly.
        """
        held, through = pipeline.take_held(), pipeline.held_through
        try:
            reply = self._wire.fetch(
                pipeline.connection, BATCH_URL_SUFFIX, batch_payload([*held, call], stop_on_error=True)
            )
        except RPCError as exc:
            if exc.status not in _NO_BATCH_ENDPOINT:
                raise self._undelivered(pipeline, exc, held) from exc
            self._stop_batching(exc)
            self._send_one_by_one(pipeline, held, through)
            return self._send_one(f"api/{method.name}", call.kwargs_json, method.attempts, method.allow_null)
        errors = [
            error
            for error in checked_batch_errors(self._address.url, [*held, call], reply)
            if error.call is not call
        ]
        self._found_our_server(pipeline)
        if errors:
            raise batch_failure(self._address.url, len(held), errors)
        pipeline.delivered(through)
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
        return self._send_one(f"api/{method.name}", call.kwargs_json, method.attempts, method.allow_null)

    def _send_one(self, url_suffix: str, data_json: str, attempts: int = 3, allow_null: bool = True) -> Any:
        """The ``response`` of one RPC, asking up to ``attempts`` times while it is null (if not allowed)."""
        for _ in range(max(1, attempts)):
            response = self._wire.fetch(self._own_pipeline().connection, url_suffix, data_json)
            if response is not None or allow_null:
                return response
            rpc_logger().debug(
                "Remote scheduler %r answered %s with null; asking again", self._shown_url, url_suffix
            )
        raise RPCError(
            f"Received null response from remote scheduler {self._shown_url!r} "
            f"for {url_suffix} ({max(1, attempts)} attempts)"
        )

    # -- held and sent calls --------------------------------------------------------------------------

    def _deliver_held(self, pipeline: Pipeline) -> None:
        """Send the held calls and wait for the answer (one by one to a server without ``_batch``)."""
        calls, through = pipeline.take_held(), pipeline.held_through
        if not calls:
            return
        if self._batching:
            try:
                reply = self._wire.fetch(pipeline.connection, BATCH_URL_SUFFIX, batch_payload(calls))
            except RPCError as exc:
                if exc.status not in _NO_BATCH_ENDPOINT:
                    raise self._undelivered(pipeline, exc, calls) from exc
                self._stop_batching(exc)
            else:
                self._check_batch_reply(pipeline, calls, through, reply)
                return
        self._send_one_by_one(pipeline, calls, through)

    def _send_held_without_waiting(self, pipeline: Pipeline) -> None:
        """Send the held calls; the next use of the connection reads the answer.

        Meanwhile the caller goes on (a worker walking its graph) while the server applies the batch.
        Until a server has answered a batch (it may be a Luigi luigid without one), this is a plain flush.
        """
        self._read_sent(pipeline)  # if that had to resend, it delivered these calls too
        if not self._wire.json_bodies:
            self._deliver_held(pipeline)
            return
        calls = pipeline.take_held()
        if calls and not self._send_unread(pipeline, SentRequest(calls, pipeline.held_through)):
            pipeline.hold_again(calls)
            self._deliver_held(pipeline)  # not even sent: the ordinary way, with its retries

    def _send_unread(self, pipeline: Pipeline, request: SentRequest) -> bool:
        """Send ``request`` as a ``/api/_batch`` whose answer waits in ``sent``; False if it did not go."""
        try:
            self._wire.send_batch(
                pipeline.connection, batch_payload(request.calls, stop_on_error=request.ahead)
            )
        except TRANSPORT_ERRORS:
            return False
        pipeline.sent.append(request)
        return True

    def _read_sent(self, pipeline: Pipeline) -> None:
        """Read the answers to the requests sent earlier, oldest first, before the connection is reused.

        A held call the answer refused raises, as it would have from the call that carried it. Calls
        without a usable answer are held again: a full hold goes again at once, with retries; the calls
        that rode with a ``get_work`` asked ahead go with the next call.
        """
        resend = False
        while pipeline.sent:
            request = pipeline.sent.popleft()
            try:
                reply = self._wire.receive_batch(pipeline.connection)
                errors = checked_batch_errors(self._address.url, request.calls, reply)
            except (*TRANSPORT_ERRORS, TransientError, RPCError) as exc:
                if isinstance(exc, RPCError) and not request.ahead:
                    raise self._undelivered(None, exc, request.calls) from exc
                pipeline.hold_again(request.calls[:-1] if request.ahead else request.calls)
                resend = resend or not request.ahead
                continue
            self._settle(pipeline, request, reply, errors)
        if resend:
            self._deliver_held(pipeline)

    def _settle(
        self, pipeline: Pipeline, request: SentRequest, reply: Any, errors: list[BatchItemError]
    ) -> None:
        """Act on the answer to a sent request: raise for refused held calls, keep an ahead response."""
        if not request.ahead:
            self._check_batch_reply(pipeline, request.calls, request.through, reply)
            return
        held_errors = [error for error in errors if error.call is not request.calls[-1]]
        if held_errors:
            raise batch_failure(self._address.url, len(request.calls) - 1, held_errors)
        pipeline.delivered(request.through)
        if not errors:
            pipeline.ahead_response = reply[-1]["response"]

    def _check_batch_reply(
        self, pipeline: Pipeline, calls: list[EncodedCall], through: int, reply: Any
    ) -> None:
        """Raise for the held calls (up to number ``through``) the answer refused; else they arrived."""
        errors = checked_batch_errors(self._address.url, calls, reply)
        self._found_our_server(pipeline)
        if errors:
            raise batch_failure(self._address.url, len(calls), errors)
        pipeline.delivered(through)

    def _send_one_by_one(self, pipeline: Pipeline, calls: list[EncodedCall], through: int) -> None:
        """Send held calls (the last numbered ``through``) singly, in order; every failure is reported,
        none is skipped silently."""
        failures: list[str] = []
        first = through - len(calls) + 1
        for index, call in enumerate(calls):
            try:
                self._send_one(f"api/{call.method}", call.kwargs_json, RPC_METHODS[call.method].attempts)
                if not failures:  # a refused call before it is not delivered: the mark stays below it
                    pipeline.delivered(first + index)
            except RPCError as exc:
                if exc.status is None:  # no answer at all: the rest would fail the same way
                    earlier = f" (earlier: {summarise(failures)})" if failures else ""
                    raise self._undelivered(pipeline, exc, calls[index:], earlier) from exc
                failures.append(f"{call.describe()}: {exc.message}")
        if failures:
            raise RPCError(
                f"{len(failures)} of {len(calls)} held calls to remote scheduler {self._address.url!r} "
                f"failed: {summarise(failures)}"
            )

    # -- our server or Luigi's ------------------------------------------------------------------------

    def _found_our_server(self, pipeline: Pipeline) -> None:
        """The server answered a ``_batch``, so it is one of ours: from now on single calls go as JSON
        bodies too, and sockets are asked to switch to its RPC channel (unless ``[core] rpc_channel`` is off).
        """
        if not self._wire.json_bodies:
            self._wire.json_bodies = True
            self._offer_channel(pipeline.connection)

    def _offer_channel(self, connection: KeepAliveConnection) -> None:
        if self._wire.json_bodies and self._use_channel:
            connection.ask_for_channel(self._address.path_for(BATCH_URL_SUFFIX), self._wire.headers)

    def _stop_batching(self, refusal: RPCError) -> None:
        self._batching = False
        rpc_logger().info(
            "Remote scheduler %r has no /api/_batch (HTTP %s); sending calls one at a time",
            self._address.url,
            refusal.status,
        )

    # -- errors ---------------------------------------------------------------------------------------

    def _undelivered(
        self, pipeline: Pipeline | None, error: RPCError, calls: list[EncodedCall], also: str = ""
    ) -> RPCError:
        """``error`` naming the held calls it kept from being delivered; when the scheduler did not answer
        at all and ``retain_undelivered`` is set, they go back in front of ``pipeline``'s held calls."""
        # Never answered: there is nothing to ride out, and the exit flush must not wait for it again.
        kept = (
            pipeline is not None
            and self.retain_undelivered
            and error.status is None
            and not isinstance(error, NoSchedulerError)
        )
        if kept and pipeline is not None:
            pipeline.hold_again(calls)
        return undelivered(error, calls, also, kept)

    # -- processes ------------------------------------------------------------------------------------

    def _new_pipeline(self) -> Pipeline:
        connection = KeepAliveConnection(self._address, self._connect_timeout)
        self._offer_channel(connection)
        return Pipeline(connection)

    def _own_pipeline(self) -> Pipeline:
        """This process's pipeline (a forked child never uses its parent's), with the socket timeout
        ``_connect_timeout`` says now."""
        pipeline = self._pipelines.get()
        if pipeline.connection.timeout != self._connect_timeout:
            pipeline.connection.set_timeout(self._connect_timeout)
        return pipeline

    def _send_held_through_layers(self) -> None:
        """Send the held calls, once the answers to requests already sent are read, through Luigi's layers."""
        pipeline = self._own_pipeline()
        with pipeline.lock:
            self._read_sent(pipeline)
            calls, through = pipeline.take_held(), pipeline.held_through
        self._send_through_layers(calls)
        with pipeline.lock:
            pipeline.delivered(through)


def _whole_if_integral(seconds: float) -> float:
    """``seconds`` as an int when it is one: Luigi's ``_rpc_retry_wait`` is, and it is logged as is."""
    return int(seconds) if float(seconds).is_integer() else seconds


def _token_header(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token is not None else {}


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


_LIVE_CLIENTS: weakref.WeakSet[RemoteScheduler] = weakref.WeakSet()


def _reset_clients_in_child() -> None:
    note_fork()
    for client in list(_LIVE_CLIENTS):
        client._pipelines.renew()


def _flush_at_exit(client: RemoteScheduler) -> None:
    """Send what ``client`` still holds as this process exits (logged, never raised)."""
    pipeline = client._pipelines.current
    if pipeline.pid != this_process() or pipeline.idle():
        return
    if client._layers_replaced():
        _flush_through_layers_at_exit(client)
        return
    if not pipeline.lock.acquire(timeout=_EXIT_FLUSH_LOCK_TIMEOUT):
        rpc_logger().error(
            "%d calls to remote scheduler %r were never sent", len(pipeline.held), client._address.url
        )
        return
    try:
        client._read_sent(pipeline)
        client._deliver_held(pipeline)
    except RPCError:
        rpc_logger().exception(
            "Sending the last calls to remote scheduler %r at exit failed", client._address.url
        )
    finally:
        pipeline.lock.release()


def _flush_through_layers_at_exit(client: RemoteScheduler) -> None:
    try:
        client.flush()
    except Exception:  # whatever a user's replaced layer raises: at exit it can only be logged
        rpc_logger().exception(
            "Sending the last calls to remote scheduler %r at exit failed", client._address.url
        )


def _flush_clients_at_exit() -> None:
    for client in list(_LIVE_CLIENTS):
        _flush_at_exit(client)


os.register_at_fork(after_in_child=_reset_clients_in_child)
atexit.register(_flush_clients_at_exit)
