"""Luigi's two fetchers: one POST of a form body to a full URL, returning the answer text (LUIGI_COMPAT j.3).

``RemoteScheduler._fetch`` hands them its requests once a user has replaced one of Luigi's layers
(``luigi.rpc.layers``); until then the client's own keep-alive path carries every call and the fetcher
is only built when someone reads ``_fetcher``. ``untouched`` says whether a fetcher is still exactly
as the client built it, so that replacing its methods or its session engages the layers too.
"""

from __future__ import annotations

import base64
import importlib.util
import os
import socket
from collections.abc import Callable
from typing import Any, Protocol
from urllib.error import URLError
from urllib.parse import unquote, urlencode, urlsplit, urlunsplit
from urllib.request import Request, urlopen

__all__ = [
    "HAS_REQUESTS",
    "Fetcher",
    "RequestsFetcher",
    "URLLibFetcher",
    "class_probe",
    "untouched",
    "untouched_class",
]

# Whether ``requests`` can be imported, found without importing it (that costs more than the rest of
# ``import luigi``); Luigi's RemoteScheduler then uses RequestsFetcher.
HAS_REQUESTS = importlib.util.find_spec("requests") is not None


class Fetcher(Protocol):
    """What ``RemoteScheduler._fetch`` needs of ``_fetcher``: the errors worth retrying, and one POST."""

    raises: type[BaseException] | tuple[type[BaseException], ...]

    def fetch(self, full_url: str, body: dict[str, str] | None, timeout: float | None) -> str: ...


class _OurFetcher:
    """What our two fetchers share: extra headers for every request (the client's bearer token, when it
    has one, which our ``luigid`` may require)."""

    def __init__(self) -> None:
        self.headers: dict[str, str] = {}

    def close(self) -> None:
        """Release what the fetcher keeps open (nothing, unless overridden)."""


class URLLibFetcher(_OurFetcher):
    """POSTs through ``urllib``: ``user:password@`` in the URL becomes HTTP Basic auth."""

    raises: tuple[type[BaseException], ...] = (URLError, socket.timeout)

    def _create_request(self, full_url: str, body: dict[str, str] | None = None) -> Request:
        """The ``Request`` for ``full_url``: credentials moved to an ``Authorization`` header, a non-empty
        body form-encoded into ``data`` (else None, which makes it a GET)."""
        parts = urlsplit(full_url)
        userinfo, at, hostport = parts.netloc.rpartition("@")
        url = urlunsplit(parts._replace(netloc=hostport)) if at else full_url
        data = urlencode(body).encode("utf-8") if body else None
        request = Request(url, data=data, headers=dict(self.headers))
        if at and "Authorization" not in self.headers:  # a bearer token wins, as on the client's own path
            user, _, password = userinfo.partition(":")
            token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode("ascii")
            request.add_header("Authorization", f"Basic {token}")
        return request

    def fetch(self, full_url: str, body: dict[str, str] | None, timeout: float | None) -> str:
        """The answer's text; ``raises`` for no answer or an HTTP error status."""
        request = self._create_request(full_url, body)
        with urlopen(request, timeout=timeout) as answer:
            text: str = answer.read().decode("utf-8")
        return text


class RequestsFetcher(_OurFetcher):
    """POSTs through a ``requests.Session``, renewed in a forked child (sessions are not fork-safe)."""

    def __init__(self, session: Any = None) -> None:
        import requests  # only when this fetcher is built: importing it is slow

        super().__init__()
        self.raises: type[BaseException] = requests.exceptions.RequestException
        self.session = session if session is not None else self._new_session()
        self._made_session = self.session
        self.process_id = os.getpid()

    def _new_session(self) -> Any:
        import requests

        session = requests.Session()
        session.headers.update(self.headers)
        return session

    def check_pid(self) -> None:
        """In a process other than the one that made the session (a forked child), start a new one."""
        if os.getpid() != self.process_id:
            self.session = self._made_session = self._new_session()
            self.process_id = os.getpid()

    def fetch(self, full_url: str, body: dict[str, str] | None, timeout: float | None) -> str:
        """The answer's text; ``raises`` for no answer or an HTTP error status."""
        self.check_pid()
        answer = self.session.post(full_url, data=body, timeout=timeout)
        answer.raise_for_status()
        text: str = answer.text
        return text

    def close(self) -> None:
        """Close the session's connections."""
        self.session.close()


# The methods of each fetcher a user's test may replace on the class or an instance.
_REPLACEABLE: dict[type, tuple[str, str]] = {
    URLLibFetcher: ("fetch", "_create_request"),
    RequestsFetcher: ("fetch", "check_pid"),
}
_ORIGINALS = {kind: tuple(vars(kind)[name] for name in names) for kind, names in _REPLACEABLE.items()}


def class_probe(kind: Any) -> Callable[[], bool]:
    """A check, cheap enough to run before every call, of whether ``kind`` is one of our fetcher
    classes with none of its methods replaced."""
    names = _REPLACEABLE.get(kind) if isinstance(kind, type) else None
    if names is None:
        return _never
    first, second = names
    one, two = _ORIGINALS[kind]

    def untouched() -> bool:
        return getattr(kind, first) is one and getattr(kind, second) is two

    return untouched


def _never() -> bool:
    return False


def untouched_class(kind: Any) -> bool:
    """Whether ``kind`` is one of our fetcher classes with none of its methods replaced."""
    return class_probe(kind)()


def untouched(fetcher: object) -> bool:
    """Whether ``fetcher`` is one of ours exactly as built: class, methods and session not replaced."""
    kind = type(fetcher)
    if not untouched_class(kind) or any(name in vars(fetcher) for name in _REPLACEABLE[kind]):
        return False
    return not isinstance(fetcher, RequestsFetcher) or fetcher.session is fetcher._made_session


def add_headers(fetcher: object, headers: dict[str, str]) -> None:
    """Have ``fetcher`` send ``headers`` too, if it is one of ours (a user's fetcher is left alone)."""
    if isinstance(fetcher, _OurFetcher):
        fetcher.headers.update(headers)
        if isinstance(fetcher, RequestsFetcher):
            fetcher.session.headers.update(headers)


def close(fetcher: object) -> None:
    """Close ``fetcher`` if it is one of ours."""
    if isinstance(fetcher, _OurFetcher):
        fetcher.close()
