"""Copy documents into an Elasticsearch index, with a marker document that makes the copy complete.

``CopyToIndex`` bulk-indexes ``docs()`` into ``index``; its output, ``ElasticsearchTarget``, is a
document in the marker index (``[elasticsearch] marker-index``, default ``update_log``) whose id is the
sha1 of ``"<index>:<doc_type>:<update_id>"``, as in Luigi. It runs on the current ``elasticsearch``
client (8.x or 9.x, whichever matches the server's major version: ``pip install 'luigi[elasticsearch]'``).

Mapping types are gone from Elasticsearch 7+: ``doc_type`` and ``[elasticsearch] marker-doc-type`` keep
their names and their place in the marker document and its id, but are never sent as a type. A mapping
written for one type (``{doc_type: {"properties": ...}}``) is sent without that level, and a ``_type`` in
a document is dropped. ``http_auth`` becomes the client's ``basic_auth``, ``timeout`` its
``request_timeout``; ``extra_elasticsearch_args`` go to the client as keywords, except Luigi-era
``use_ssl``/``scheme``/``url_prefix``, which describe the node.
"""

from __future__ import annotations

import datetime
import hashlib
import itertools
import json
import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import luigi
from luigi.contrib.optional import require
from luigi.contrib.rdbms import ConfigDefault
from luigi.target import Target

__all__ = ["ClientVersionMismatch", "CopyToIndex", "ElasticsearchTarget"]

logger = logging.getLogger("luigi-interface")

# Keyword mapping of the marker index: exact-match terms for the history query, a real date to sort on.
_MARKER_MAPPING = {
    "properties": {
        "update_id": {"type": "keyword"},
        "target_index": {"type": "keyword"},
        "target_doc_type": {"type": "keyword"},
        "date": {"type": "date"},
    }
}
_MAX_HISTORY_PAGE = 10000  # Elasticsearch's default index.max_result_window


def _elasticsearch() -> Any:
    """The ``elasticsearch`` package, or a MissingExtraError naming ``luigi[elasticsearch]``."""
    return require("elasticsearch", "elasticsearch", "luigi.contrib.esindex")


def _basic_auth(http_auth: Any) -> tuple[str, str] | None:
    """Luigi's ``http_auth`` (a (user, password) pair or ``"user:password"``) as the client's basic_auth."""
    if http_auth is None:
        return None
    if isinstance(http_auth, str):
        user, sep, password = http_auth.partition(":")
        if not sep:
            raise ValueError("http_auth must be (user, password) or 'user:password'; it has no ':'")
        return user, password
    user, password = http_auth
    return str(user), str(password)


def _node(host: str, port: int, extra: dict[str, Any]) -> dict[str, Any]:
    """The client's node description from Luigi's host, port and node-level extra arguments."""
    use_ssl = extra.pop("use_ssl", False)
    scheme = extra.pop("scheme", "https" if use_ssl else "http")
    if "://" in host:  # a URL given as the host: its scheme wins
        scheme, _, host = host.partition("://")
    if "@" in host:
        raise ValueError("the Elasticsearch host must not hold credentials: give them as http_auth")
    node: dict[str, Any] = {"scheme": scheme, "host": host.rstrip("/"), "port": int(port)}
    if "url_prefix" in extra:
        node["path_prefix"] = extra.pop("url_prefix")
    return node


def _connect(
    host: str, port: int, http_auth: Any, timeout: float, extra_elasticsearch_args: Mapping[str, Any] | None
) -> Any:
    """An ``elasticsearch.Elasticsearch`` client for one node, built from Luigi's connection settings."""
    module = _elasticsearch()
    extra = dict(extra_elasticsearch_args or {})
    node = _node(host, port, extra)
    try:
        return module.Elasticsearch(
            hosts=[node], basic_auth=_basic_auth(http_auth), request_timeout=timeout, **extra
        )
    except TypeError as exc:
        raise TypeError(
            f"extra_elasticsearch_args {sorted(extra)} are not all accepted by elasticsearch "
            f"{module.__versionstr__}: {exc}; remove or rename them"
        ) from exc


def _node_url(host: str, port: int, extra_elasticsearch_args: Mapping[str, Any] | None) -> str:
    """``scheme://host:port`` for messages (credentials never live there)."""
    node = _node(host, port, dict(extra_elasticsearch_args or {}))
    return f"{node['scheme']}://{node['host']}:{node['port']}"


class ClientVersionMismatch(RuntimeError):
    """The server refused the client's versioned media type: client and server major versions differ."""

    def __init__(self, url: str, client_version: str) -> None:
        major = int(client_version.partition(".")[0])
        super().__init__(
            f"Elasticsearch at {url} refused the requests of elasticsearch client {client_version}: "
            f"install the client of the server's major version (for a server of version {major - 1}: "
            f"pip install 'elasticsearch>={major - 1},<{major}'); OpenSearch needs its own client"
        )


def _refuses_media_type(exc: Any) -> bool:
    """Whether an ``ApiError`` is the server refusing ``compatible-with=N`` (Elasticsearch or OpenSearch)."""
    return exc.status_code in (400, 406) and (
        "compatible-with" in str(exc) or "media_type_header_exception" in str(exc)
    )


def _untyped_mapping(mapping: Mapping[str, Any], doc_type: str) -> dict[str, Any]:
    """``mapping`` without the type level of Elasticsearch < 7 (``{doc_type: {...}}``), if it has one."""
    if set(mapping) == {doc_type} and isinstance(mapping[doc_type], Mapping):
        return dict(mapping[doc_type])
    return dict(mapping)


class ElasticsearchTarget(Target):
    """A marker document recording that ``update_id`` was copied into ``index``.

    ``marker_index_hist_size`` (0: unlimited) keeps only that many newest markers of ``index``.
    """

    marker_index = ConfigDefault("elasticsearch", "marker_index", "update_log")
    marker_doc_type = ConfigDefault("elasticsearch", "marker_doc_type", "entry")

    def __init__(
        self,
        host: str,
        port: int,
        index: str,
        doc_type: str,
        update_id: str,
        marker_index_hist_size: int = 0,
        http_auth: Any = None,
        timeout: float = 10,
        extra_elasticsearch_args: Mapping[str, Any] | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.http_auth = http_auth
        self.index = index
        self.doc_type = doc_type
        self.update_id = update_id
        self.marker_index_hist_size = marker_index_hist_size
        self.timeout = timeout
        self.extra_elasticsearch_args = dict(extra_elasticsearch_args or {})
        self.es = _connect(host, port, http_auth, timeout, self.extra_elasticsearch_args)
        self.url = _node_url(host, port, self.extra_elasticsearch_args)

    def __repr__(self) -> str:
        return f"ElasticsearchTarget({self.url}, index={self.index!r}, update_id={self.update_id!r})"

    def marker_index_document_id(self) -> str:
        """The marker's document id: sha1 hex of ``"<index>:<doc_type>:<update_id>"`` (Luigi's ids)."""
        return hashlib.sha1(f"{self.index}:{self.doc_type}:{self.update_id}".encode()).hexdigest()

    def touch(self) -> None:
        """Write the marker document (creating the marker index first), then trim the history."""
        self.create_marker_index()
        self.es.index(
            index=self.marker_index,
            id=self.marker_index_document_id(),
            document={
                "update_id": self.update_id,
                "target_index": self.index,
                "target_doc_type": self.doc_type,
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            },
            refresh=True,  # the history search below must already see it
        )
        self.es.indices.flush(index=self.marker_index)
        self.ensure_hist_size()

    def exists(self) -> bool:
        """Whether the marker document is there; an unreachable server counts as not (with a warning)."""
        errors = _elasticsearch()
        try:
            self.es.get(index=self.marker_index, id=self.marker_index_document_id())
        except errors.NotFoundError:
            return False
        except (errors.ApiError, errors.TransportError) as exc:
            # Luigi's contract: a failing check is "not done" and the task runs, where run() reports it.
            logger.warning(
                "Elasticsearch at %s: cannot read marker %s in %s: %s",
                self.url,
                self.marker_index_document_id(),
                self.marker_index,
                exc,
            )
            return False
        return True

    def create_marker_index(self) -> None:
        """Create the marker index, with keyword fields and a date, unless it exists."""
        if not self.es.indices.exists(index=self.marker_index):
            self.es.indices.create(index=self.marker_index, mappings=_MARKER_MAPPING)

    def ensure_hist_size(self) -> None:
        """Delete this index's markers beyond the ``marker_index_hist_size`` newest (0 keeps all).

        One page of the server's result window: a size of 10000 or more keeps the whole history.
        """
        page = _MAX_HISTORY_PAGE - self.marker_index_hist_size
        if not self.marker_index_hist_size or page <= 0:
            return
        found = self.es.search(
            index=self.marker_index,
            query=self._history_query(),
            sort=["date:desc"],
            from_=self.marker_index_hist_size,
            size=page,
            source=False,
        )
        for hit in found["hits"]["hits"]:
            self.es.delete(index=self.marker_index, id=hit["_id"])
        self.es.indices.flush(index=self.marker_index)

    def _history_query(self) -> dict[str, Any]:
        """Markers of this index, whether the marker index has our keyword mapping or a dynamic one."""
        should = [{"term": {field: self.index}} for field in ("target_index", "target_index.keyword")]
        return {"bool": {"should": should, "minimum_should_match": 1}}


class CopyToIndex(luigi.Task):
    """Bulk-index ``docs()`` into ``index``; complete once its marker document exists.

    Override ``index`` and, as needed, the connection and index settings below. ``docs()`` yields JSON
    strings (by default the lines of ``input()``) or dicts; ``_id`` and other ``_`` metadata are honoured.
    """

    host = "localhost"
    port = 9200
    http_auth: Any = None
    doc_type = "default"
    mapping: dict[str, Any] | None = None
    settings: dict[str, Any] = {"settings": {}}  # the create-index body: settings, mappings, aliases
    chunk_size = 2000
    raise_on_error = True
    purge_existing_index = False
    marker_index_hist_size = 0
    timeout: float = 10
    extra_elasticsearch_args: dict[str, Any] = {}

    @property
    def index(self) -> str:
        """The index to copy into (override)."""
        raise NotImplementedError(f"{type(self).__name__} must define index, the Elasticsearch index")

    def docs(self) -> Iterable[Any]:
        """The documents to copy: the lines of ``input()`` by default."""
        with self.input().open("r") as lines:
            yield from lines

    def _docs(self) -> Iterator[dict[str, Any]]:
        """``docs()`` as bulk actions: parsed if strings, with ``_index`` set and no ``_type``."""
        iterator = iter(self.docs())
        first = next(iterator, None)
        if first is None:
            return
        if isinstance(first, str):
            parse: Any = json.loads
        elif isinstance(first, dict):
            parse = dict  # a copy: the user's dicts stay as they were
        else:
            raise RuntimeError(
                f"{type(self).__name__}.docs() must yield JSON strings or dicts, not {type(first).__name__}"
            )
        for doc in itertools.chain([first], iterator):
            action = parse(doc)
            action.setdefault("_index", self.index)
            action.pop("_type", None)  # types are gone from Elasticsearch 7+, which rejects them
            yield action

    def _init_connection(self) -> Any:
        """A client for ``host``:``port`` with this task's credentials and settings."""
        return _connect(self.host, self.port, self.http_auth, self.timeout, self.extra_elasticsearch_args)

    def create_index(self) -> None:
        """Create ``index`` with ``settings`` as its body unless it exists."""
        es = self._init_connection()
        if not es.indices.exists(index=self.index):
            body = dict(self.settings)
            if isinstance(body.get("mappings"), Mapping):
                body["mappings"] = _untyped_mapping(body["mappings"], self.doc_type)
            es.indices.create(index=self.index, body=body)

    def delete_index(self) -> None:
        """Delete ``index`` if it exists."""
        es = self._init_connection()
        if es.indices.exists(index=self.index):
            es.indices.delete(index=self.index)

    def update_id(self) -> str:
        """What the marker records as copied: this task's id."""
        return self.task_id

    def output(self) -> ElasticsearchTarget:
        return ElasticsearchTarget(
            host=self.host,
            port=self.port,
            index=self.index,
            doc_type=self.doc_type,
            update_id=self.update_id(),
            marker_index_hist_size=self.marker_index_hist_size,
            http_auth=self.http_auth,
            timeout=self.timeout,
            extra_elasticsearch_args=self.extra_elasticsearch_args,
        )

    def run(self) -> None:
        """Create the index (purged first if asked), apply the mapping, bulk-copy, refresh, mark done."""
        errors = _elasticsearch()
        url = _node_url(self.host, self.port, self.extra_elasticsearch_args)
        try:
            self._copy()
            self.output().touch()
        except errors.ConnectionError as exc:
            raise ConnectionError(
                f"cannot reach Elasticsearch at {url} ({exc}): "
                "check the task's host and port and that the server is running"
            ) from exc
        except errors.ApiError as exc:
            if not _refuses_media_type(exc):
                raise
            raise ClientVersionMismatch(url, errors.__versionstr__) from exc

    def _copy(self) -> None:
        """Everything ``run()`` does before the marker: index set-up, the bulk copy, the refresh."""
        if self.purge_existing_index:
            self.delete_index()
        self.create_index()
        es = self._init_connection()
        if self.mapping:
            es.indices.put_mapping(index=self.index, body=_untyped_mapping(self.mapping, self.doc_type))
        es.indices.put_settings(index=self.index, settings={"index": {"refresh_interval": "-1"}})
        try:
            self._bulk(es)
        finally:  # indexing is over either way: searches should see new documents again
            es.indices.put_settings(index=self.index, settings={"index": {"refresh_interval": "1s"}})
        es.indices.refresh(index=self.index)

    def _bulk(self, es: Any) -> None:
        """``helpers.bulk`` over ``_docs()``; a failed document fails the task with the server's reason."""
        helpers = require("elasticsearch.helpers", "elasticsearch", "luigi.contrib.esindex")
        try:
            helpers.bulk(es, self._docs(), chunk_size=self.chunk_size, raise_on_error=self.raise_on_error)
        except helpers.BulkIndexError as exc:
            failed = exc.errors
            (item,) = failed[0].values()
            reason = item.get("error", {}).get("reason", item.get("error"))
            raise helpers.BulkIndexError(
                f"{len(failed)} document(s) failed to index into {self.index!r}; "
                f"the first, id {item.get('_id')!r}: {reason}",
                failed,
            ) from exc
