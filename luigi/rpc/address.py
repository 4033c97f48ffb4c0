"""Where the remote scheduler lives: parsing ``scheduler_url`` into a connection factory and auth header.

Supports ``http://``, ``https://`` and ``http+unix://<percent-encoded socket path>/`` URLs, with optional
``user:password@`` credentials (sent as HTTP Basic auth) and a path prefix the API is mounted under.
"""

from __future__ import annotations

import base64
import http.client
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit

_SCHEMES = ("http", "https", "http+unix")
_UNIX_HOST_HEADER = "localhost"


class UnixHTTPConnection(http.client.HTTPConnection):
    """An ``HTTPConnection`` whose socket is a Unix domain socket at ``socket_path``."""

    def __init__(self, socket_path: str, timeout: float | None = None) -> None:
        super().__init__(_UNIX_HOST_HEADER, timeout=timeout)
        self.socket_path = socket_path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self.socket_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


@dataclass(frozen=True)
class SchedulerAddress:
    """A parsed scheduler URL: how to connect, the API path prefix, and the credentials it carried."""

    url: str  # as given, for RPCError messages (with any password masked)
    scheme: str
    host: str
    port: int | None
    socket_path: str | None
    base_path: str  # always ends with "/"
    basic_auth: str | None  # a ready ``Authorization`` header value

    def path_for(self, url_suffix: str) -> str:
        """The request path of ``url_suffix`` (e.g. ``api/get_work``) under the mount point."""
        return self.base_path + url_suffix.lstrip("/")

    def new_connection(self, timeout: float | None) -> http.client.HTTPConnection:
        """A fresh, not yet connected, connection to the scheduler."""
        if self.socket_path is not None:
            return UnixHTTPConnection(self.socket_path, timeout=timeout)
        if self.scheme == "https":
            return http.client.HTTPSConnection(
                self.host, self.port, timeout=timeout, context=ssl.create_default_context()
            )
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)


def parse_scheduler_url(url: str) -> SchedulerAddress:
    """Parse ``url`` or raise ValueError naming it and the accepted forms."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"Scheduler URL {url!r} is empty; expected e.g. 'http://localhost:8082/'")
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in _SCHEMES:
        raise ValueError(
            f"Scheduler URL {url!r} has unsupported scheme {parts.scheme!r}; "
            "expected http://, https:// or http+unix://<percent-encoded socket path>/"
        )
    userinfo, _, hostport = parts.netloc.rpartition("@")
    if not hostport:
        raise ValueError(f"Scheduler URL {url!r} names no host (or socket path)")
    base_path = parts.path if parts.path.endswith("/") else parts.path + "/"
    masked = _mask_password(url.strip(), userinfo)
    basic_auth = _basic_auth_header(userinfo) if userinfo else None
    if scheme == "http+unix":
        return SchedulerAddress(
            masked, scheme, _UNIX_HOST_HEADER, None, unquote(hostport), base_path, basic_auth
        )
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"Scheduler URL {url!r} has an invalid port; expected a number 1-65535") from None
    if not parts.hostname:
        raise ValueError(f"Scheduler URL {url!r} names no host")
    return SchedulerAddress(masked, scheme, parts.hostname, port, None, base_path, basic_auth)


def _basic_auth_header(userinfo: str) -> str:
    user, _, password = userinfo.partition(":")
    token = f"{unquote(user)}:{unquote(password)}".encode()
    return "Basic " + base64.b64encode(token).decode("ascii")


def _mask_password(url: str, userinfo: str) -> str:
    """The URL with the password of its credentials replaced, so it can appear in errors and logs."""
    user, has_password, _ = userinfo.partition(":")
    if not has_password:
        return url
    return url.replace(userinfo + "@", f"{user}:***@", 1)


def unix_socket_url(socket_path: str, path: str = "/") -> str:
    """The ``http+unix://`` URL of a scheduler listening on ``socket_path``."""
    return "http+unix://" + quote(socket_path, safe="") + path
