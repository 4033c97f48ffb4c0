"""Where the remote scheduler lives: parsing ``scheduler_url`` into a socket factory and auth header.

Supports ``http://``, ``https://`` and ``http+unix://<percent-encoded socket path>/`` URLs, with optional
``user:password@`` credentials (sent as HTTP Basic auth) and a path prefix the API is mounted under.
"""

from __future__ import annotations

import base64
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit

_SCHEMES = ("http", "https", "http+unix")
_UNIX_HOST_HEADER = "localhost"
_DEFAULT_PORTS = {"http": 80, "https": 443}


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

    @property
    def host_header(self) -> str:
        """The ``Host`` header, as ``http.client`` sends it: the port only when not the scheme's default."""
        if self.socket_path is not None:
            return _UNIX_HOST_HEADER
        host = self.host if self.host.isascii() else self.host.encode("idna").decode("ascii")
        if ":" in host:  # an IPv6 literal
            host = f"[{host}]"
        if self.port is None or self.port == _DEFAULT_PORTS[self.scheme]:
            return host
        return f"{host}:{self.port}"

    def open_socket(self, timeout: float | None) -> socket.socket:
        """A socket connected to the scheduler: Unix, TCP, or verified TLS over TCP (with SNI) for https."""
        if self.socket_path is not None:
            return _open_unix_socket(self.socket_path, timeout)
        port = self.port if self.port is not None else _DEFAULT_PORTS[self.scheme]
        sock = socket.create_connection((self.host, port), timeout)
        try:
            # Requests are one small write each; Nagle would hold them back waiting for an ACK.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.scheme == "https":
                return ssl.create_default_context().wrap_socket(sock, server_hostname=self.host)
        except OSError:
            sock.close()
            raise
        return sock


def _open_unix_socket(socket_path: str, timeout: float | None) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(socket_path)
    except OSError:
        sock.close()
        raise
    return sock


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
