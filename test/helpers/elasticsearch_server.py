"""An in-memory Elasticsearch-compatible server for the esindex tests: osmem-server behind a media-type proxy.

osmem-server (PyPI, test extra) is an in-memory OpenSearch-compatible server: real index creation,
mappings that reject a bad value per document in ``_bulk``, ``_type`` refused as Elasticsearch 8 refuses it,
sorting, refresh and flush, and Elasticsearch's error bodies and ``X-Elastic-Product`` header. Like
OpenSearch, it refuses the compatibility media type that the current ``elasticsearch`` client always sends
(``application/vnd.elasticsearch+json; compatible-with=9``), which a real Elasticsearch of that major
version reads as plain JSON. The proxy here does exactly that translation and nothing else, and records
the ``Authorization`` headers it saw. One osmem process serves the session; each test gets its own clone.
"""

from __future__ import annotations

import http.client
import re
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar

from helpers.json_http import serving
from helpers.services import unavailable

__all__ = ["ElasticsearchStandIn", "osmem_base", "running_elasticsearch"]

_COMPAT = re.compile(r"application/vnd\.elasticsearch\+(json|x-ndjson); compatible-with=\d+")
_HOP_BY_HOP = {"connection", "transfer-encoding", "keep-alive"}


class ElasticsearchStandIn:
    """A running clone: ``url`` (through the proxy), ``host``/``port``, and what the proxy saw."""

    def __init__(self, url: str, authorizations: list[str]) -> None:
        self.url = url
        parsed = urllib.parse.urlsplit(url)
        self.host, self.port = str(parsed.hostname), int(parsed.port or 0)
        self.authorizations = authorizations


class _TranslatingProxy(BaseHTTPRequestHandler):
    """Forwards every request to ``upstream``, with compatibility media types as plain ones."""

    upstream: ClassVar[tuple[str, int]]
    authorizations: ClassVar[list[str]]
    protocol_version = "HTTP/1.1"

    def _forward(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
        headers = {k: _COMPAT.sub(r"application/\1", v) for k, v in self.headers.items()}
        if self.headers.get("Authorization"):
            self.authorizations.append(self.headers["Authorization"])
        connection = http.client.HTTPConnection(*self.upstream, timeout=30)
        try:
            connection.request(self.command, self.path, body=body or None, headers=headers)
            answer = connection.getresponse()
            data = answer.read()
        finally:
            connection.close()
        self.send_response(answer.status, answer.reason)
        for name, value in answer.getheaders():
            if name.lower() not in _HOP_BY_HOP | {"content-length"}:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _forward

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  # keep test output quiet
        pass


@contextmanager
def osmem_base() -> Iterator[Any]:
    """A started osmem-server (its base cluster); skip or fail (CI) when the package is missing."""
    try:
        from osmem_server import OsmemServer
    except ImportError:
        unavailable("osmem-server is not installed (pip install -e '.[test]')")
    server = OsmemServer.start(japanese=False)
    try:
        yield server
    finally:
        server.close()


@contextmanager
def running_elasticsearch(base: Any) -> Iterator[ElasticsearchStandIn]:
    """A fresh clone of ``base`` served through the media-type proxy on a free loopback port."""
    with base.clone() as clone:
        parsed = urllib.parse.urlsplit(clone.url)
        authorizations: list[str] = []
        handler = type(
            "Proxy",
            (_TranslatingProxy,),
            {"upstream": (parsed.hostname, parsed.port), "authorizations": authorizations},
        )
        with serving(handler, "elasticsearch-proxy") as url:
            yield ElasticsearchStandIn(url, authorizations)
