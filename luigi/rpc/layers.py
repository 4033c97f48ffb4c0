"""Luigi's three layers of a remote call, each of which a user's test may replace (LUIGI_COMPAT j.3).

1. The generated RPC method builds the arguments dict, defaults merged, and calls
   ``_request("/api/<name>", data)`` (``get_work`` with ``allow_null=False``, ``ping`` with ``attempts=1``).
2. ``_request`` passes ``_fetch`` the body ``{"data": <JSON of data>}`` and returns the ``response`` of the
   text that comes back, asking again while it is null if nulls are not allowed.
3. ``_fetch`` joins the URL and calls ``_fetcher.fetch(full_url, body, _connect_timeout)``, retrying
   every failure ``_rpc_retry_attempts`` times ``_rpc_retry_wait`` seconds apart, logging as Luigi does.

The client's own path (held calls sent in batches over a keep-alive socket, with backoff) is faster and
carries every call while these are as shipped. Once a user replaces ``_request``, ``_fetch`` or
``_fetcher`` (on the class, a subclass or an instance; or the methods or session of the fetcher),
``_layers_replaced`` says so at the next call, and from then on every call, held ones first, goes
through the three layers, one POST each, as Luigi's client sends it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from typing import Any

from luigi.rpc import fetchers
from luigi.rpc.calls import EncodedCall, call_arguments, request_options
from luigi.rpc.errors import RPCError, snippet
from luigi.rpc.hooks import rpc_logger
from luigi.rpc_methods import RPC_METHODS, RpcMethod

__all__ = ["LuigiLayers"]

_NOT_MADE = object()


class LuigiLayers:
    """``RemoteScheduler``'s Luigi-shaped methods and attributes, the ones users' tests patch."""

    _url: str  # the base URL, trailing "/" stripped; with its credentials, which the fetchers send
    _shown_url: str  # the same with the password masked: what messages and logs name
    _connect_timeout: float | None
    _rpc_retry_attempts: int
    _rpc_retry_wait: float
    _rpc_log_retries: bool
    _fetcher_class: Any  # what ``_fetcher`` is made of (``luigi.rpc.HAS_REQUESTS`` chose it at construction)
    _fetcher_class_untouched: Callable[[], bool]  # fetchers.class_probe of it
    _fetcher_headers: dict[str, str]  # sent by our fetchers too: the bearer token, if any
    _made_fetcher: object = _NOT_MADE
    _sleep: Callable[[float], None]

    @functools.cached_property
    def _fetcher(self) -> fetchers.Fetcher:
        """Luigi's fetcher, made when first needed (building a requests session is not free)."""
        fetcher: fetchers.Fetcher = self._fetcher_class()
        fetchers.add_headers(fetcher, self._fetcher_headers)
        self._made_fetcher = fetcher
        return fetcher

    # -- the three layers -----------------------------------------------------------------------------

    def _call_through_layers(self, method: RpcMethod, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        """Layer 1: what each generated RPC method does once a layer is replaced."""
        data = call_arguments(method, args, kwargs)
        json.dumps(data)  # a value JSON cannot carry fails here, before the calls held earlier are sent
        self._send_held_through_layers()
        return self._request(f"/api/{method.name}", data, **request_options(method))

    def _send_through_layers(self, calls: Sequence[EncodedCall]) -> None:
        """Send calls the client's own path held, in order, one ``_request`` each."""
        for call in calls:
            method = RPC_METHODS[call.method]
            self._request(f"/api/{call.method}", json.loads(call.kwargs_json), **request_options(method))

    def _request(self, url: str, data: Any, attempts: int = 3, allow_null: bool = True) -> Any:
        """Layer 2: the ``response`` of one POST of ``data``; RPCError after ``attempts`` null answers
        when ``allow_null`` is False."""
        body = {"data": json.dumps(data)}
        for _ in range(max(1, attempts)):
            response = self._response_of(url, self._fetch(url, body))
            if response is not None or allow_null:
                return response
        raise RPCError(f"Received null response from remote scheduler {self._shown_url!r}")

    def _fetch(self, url_suffix: str, body: Any) -> str:
        """Layer 3: the text of the answer to ``body`` POSTed to ``url_suffix`` under the base URL."""
        full_url = f"{self._url}/{url_suffix.lstrip('/')}"
        fetcher = self._fetcher
        attempts = max(1, self._rpc_retry_attempts)
        failure: Exception | None = None
        for number in range(1, attempts + 1):
            try:
                return fetcher.fetch(full_url, body, self._connect_timeout)
            except Exception as exc:  # Luigi retries any failure; only fetcher.raises become RPCError
                failure = exc
                self._log_failed_attempt(number, attempts)
            if number < attempts:
                self._sleep(self._rpc_retry_wait)
        assert failure is not None
        if isinstance(failure, fetcher.raises):
            raise RPCError(
                f"Errors ({attempts} attempts) when connecting to remote scheduler {self._shown_url!r}",
                failure,
            ) from failure
        raise failure

    # -- helpers --------------------------------------------------------------------------------------

    def _log_failed_attempt(self, number: int, attempts: int) -> None:
        """Luigi's lines after a failed attempt (called while handling it, for the traceback)."""
        if not self._rpc_log_retries:
            return
        logger = rpc_logger()
        logger.warning("Failed connecting to remote scheduler %r", self._shown_url, exc_info=True)
        logger.info(f"Retrying attempt {number + 1} of {attempts} (max)")
        logger.info(f"Wait for {self._rpc_retry_wait} seconds")

    def _response_of(self, url: str, page: Any) -> Any:
        try:
            payload = json.loads(page)
        except (TypeError, ValueError):
            payload = None
        if not isinstance(payload, dict) or "response" not in payload:
            text = page.encode("utf-8", "replace") if isinstance(page, str) else repr(page).encode()
            raise RPCError(
                f"Remote scheduler {self._shown_url!r} sent a malformed answer to {url} "
                f'(expected JSON {{"response": ...}}): {snippet(text)}'
            )
        return payload["response"]

    def _layers_replaced(self) -> bool:
        """Whether a user replaced ``_request``, ``_fetch`` or ``_fetcher`` (see the module docstring).

        It runs before every call, so the common case (nothing replaced, no fetcher made) is a few
        identity checks.
        """
        own = self.__dict__
        if "_request" in own or "_fetch" in own:
            return True
        kind = type(self)
        if kind._request is not _REQUEST or kind._fetch is not _FETCH:
            return True
        if "_fetcher" not in own:
            return not self._fetcher_class_untouched()
        fetcher = own["_fetcher"]
        return fetcher is not self._made_fetcher or not fetchers.untouched(fetcher)

    def _send_held_through_layers(self) -> None:
        """Send the calls the client's own path holds through the layers, in order (the client's)."""
        raise NotImplementedError

    def _close_fetcher(self) -> None:
        """Close the fetcher if one of ours was made."""
        fetcher = self.__dict__.get("_fetcher")
        if fetcher is not None:
            fetchers.close(fetcher)


_REQUEST = LuigiLayers._request
_FETCH = LuigiLayers._fetch
