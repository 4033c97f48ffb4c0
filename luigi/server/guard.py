"""Who may talk to ``luigid`` at all: the ``Host`` allow-list and the cross-site check, before any route.

A web page the user opens can send requests to ``localhost`` (cross-site request forgery), or to a name
of its own that it later points at ``127.0.0.1`` (DNS rebinding). So a request whose ``Host`` is not one
of ``[scheduler] allowed_hosts`` is refused, and so is a state-changing request (any verb but GET, HEAD
and OPTIONS) whose ``Origin`` or ``Referer`` names another site. Luigi's own clients send no ``Origin``
and a ``Host`` of the address they were given, so they pass. A Unix socket is not reachable from a
browser: requests on one are not checked.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import psutil

from luigi.server.errors import ClientError
from luigi.server.settings import ANY_HOST, CorsPolicy

__all__ = ["HostPolicy", "refusal"]

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
_WILDCARDS = ("", "0.0.0.0", "::")
_SAFE_VERBS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True)
class HostPolicy:
    """The host names a request may be addressed to (lower case; IPv6 in brackets), or any (``*``)."""

    names: frozenset[str]
    configured: frozenset[str]  # what ``allowed_hosts`` listed: those sites may also send state changes
    any_host: bool = False
    unchecked: bool = False  # a Unix socket

    @classmethod
    def for_server(cls, allowed_hosts: Iterable[str] | None, address: str | None, unix: bool) -> HostPolicy:
        """The policy of a server bound to ``address`` (None or a wildcard: every interface)."""
        listed = frozenset(_normal(name) for name in allowed_hosts or ())
        if ANY_HOST in listed:
            return cls(frozenset(), listed - {ANY_HOST}, any_host=True, unchecked=unix)
        if listed:
            return cls(listed | set(LOOPBACK_NAMES), listed, unchecked=unix)
        return cls(frozenset(LOOPBACK_NAMES) | _own_names(address), frozenset(), unchecked=unix)

    def allows(self, host_header: str) -> bool:
        """Whether a request with this ``Host`` header is addressed to us."""
        return self.any_host or host_name(host_header) in self.names


def host_name(host_header: str) -> str:
    """The host of a ``Host`` header or URL authority, without the port, lower case (IPv6 bracketed)."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    if host.count(":") == 1:
        host = host.partition(":")[0]
    return _normal(host)


def _normal(name: str) -> str:
    name = name.strip().lower().rstrip(".")
    try:
        if ipaddress.ip_address(name.strip("[]")).version == 6:
            return f"[{name.strip('[]')}]"
    except ValueError:
        pass
    return name


def _own_names(address: str | None) -> frozenset[str]:
    """The bound address; on every interface, each local address and this machine's names."""
    if address not in _WILDCARDS and address is not None:
        return frozenset({_normal(address)})
    names = {_normal(socket.gethostname()), _normal(socket.getfqdn())}
    for addresses in psutil.net_if_addrs().values():
        for entry in addresses:
            if entry.family in (socket.AF_INET, socket.AF_INET6):
                names.add(_normal(entry.address.split("%")[0]))
    return frozenset(names)


def refusal(
    policy: HostPolicy, cors: Callable[[], CorsPolicy], method: str, headers: Mapping[str, str]
) -> ClientError | None:
    """Why a request must be refused before it reaches a route (403), or None when it may go on.

    ``cors`` gives the ``[cors]`` policy; it is asked only for a state change sent from a web page.
    """
    if policy.unchecked:
        return None
    host = headers.get("Host", "")
    if not policy.allows(host):
        return ClientError(
            403,
            f"Host {host[:100]!r} is not one this scheduler answers to; if it is this luigid's name, add it "
            "to [scheduler] allowed_hosts (or '*' behind a proxy that checks it)",
        )
    if method.upper() in _SAFE_VERBS:
        return None
    site = _sender_site(headers)
    if site is None or _same_site(site, host, policy, cors):
        return None
    return ClientError(
        403,
        f"Cross-site request refused: {site[:100]!r} may not change this scheduler's state (a page of "
        "another site cannot drive luigid; allow a site in [cors] allowed_origins)",
    )


def _sender_site(headers: Mapping[str, str]) -> str | None:
    """The ``Origin``, else the origin of the ``Referer``; None when the request names neither."""
    origin = headers.get("Origin")
    if origin is not None:
        return origin.strip()
    referer = headers.get("Referer")
    if referer is None:
        return None
    parts = urlsplit(referer.strip())
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else "null"


def _same_site(site: str, host: str, policy: HostPolicy, cors: Callable[[], CorsPolicy]) -> bool:
    """Whether a request sent from page origin ``site`` to ``host`` is one luigid trusts."""
    if cors().allowed_origin(site) is not None:
        return True  # [cors] lets that origin call the API from a browser, state changes included
    parts = urlsplit(site)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return False  # "null" (a sandboxed frame, a file), or a browser extension
    if parts.netloc.lower() == host.strip().lower():
        return True
    return host_name(parts.netloc) in policy.configured
